"""Where a candidate's image lives: revisitop's R1M layout `jpg/<3 hex>/<key>.jpg`.

The key is a stable hash of the photo id, so the path is known before downloading and is
the same on every machine, run and shard size.
"""

from __future__ import annotations

import hashlib


def image_key(photo_id: int) -> str:
    """Stable 32-hex-char key of a photo id (MD5 of its decimal string)."""
    return hashlib.md5(str(int(photo_id)).encode("ascii")).hexdigest()


def image_relpath(photo_id: int) -> str:
    """Path of a candidate image relative to the download root: `jpg/abc/abc....jpg`."""
    key = image_key(photo_id)
    return f"jpg/{key[:3]}/{key}.jpg"
