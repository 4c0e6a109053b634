"""A download folder of generated photos (`images/index.parquet` and the JPEGs), as `mining download`
leaves it: what describe reads in the tests that need a few real images and no demo run."""

from __future__ import annotations

from pathlib import Path

import cv2

from fixtures.flickr_sizes import photo
from mining.photos import imageindex
from mining.settings import layout


def photo_folder(root: Path, n: int = 5) -> Path:
    """`n` photos of slightly different widths (80 + 7 k px by 64) under `root`, indexed."""
    for pid in range(1, n + 1):
        p = root / layout.image_relpath(pid)
        p.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(p), photo(pid, 80 + 7 * pid, 64))
    imageindex.write(root, [{"photo_id": i, "status": "ok", "path": layout.image_relpath(i)} for i in range(1, n + 1)])
    return root
