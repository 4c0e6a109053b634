"""The domains of the YFCC100M/Flickr fields that end up in image URLs (and a few others).

Metadata is written by strangers: `secret: ../../../../etc/passwd` must never reach a URL.
`mining ingest` checks whole columns against these domains (vectorised, quarantining the
rows that fail: `bad_url_field`, `out_of_domain`) and `photo_url` checks each value again before it
builds a URL, so a candidates file made some other way is held to the same rules. `photo_url`
lives here, not in the download stage, because `mining select` writes the same URLs.
"""

from __future__ import annotations

import hashlib
import re

from mining.errors import UserError

DEFAULT_HOST = "https://live.staticflickr.com"

# Flickr secrets are 10 lower-case hex digits; any hex string of 1 to SECRET_MAX is accepted.
# Server and farm ids are non-negative integers written with digits only.
SECRET_MAX = 64
# Extension of the original (`originalformat`): Flickr's image formats and the video
# containers it accepts (videos are dropped later, by geofilter's photos_only).
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "gif", "tif", "tiff", "bmp", "webp", "heic")
VIDEO_EXTENSIONS = ("mp4", "m4v", "mov", "avi", "wmv", "3gp", "mpg", "mpeg", "mts", "m2ts",
                    "ogg", "ogv", "webm", "flv", "asf", "dv", "vob", "mkv")
EXTENSIONS = IMAGE_EXTENSIONS + VIDEO_EXTENSIONS
# the values an `extension` field may hold: a known one in lower or upper case, or empty
# (unknown: URLs use jpg)
EXTENSION_VALUES = ("",) + EXTENSIONS + tuple(e.upper() for e in EXTENSIONS)
ACCURACY_RANGE = (0, 16)  # 1 world … 16 street; 0 (or empty) = unknown
MARKERS = (0, 1)  # 0 photo, 1 video

_SECRET = re.compile(f"[0-9a-fA-F]{{1,{SECRET_MAX}}}")


def url_field_problem(photo_id: object, server: object, secret: object,
                      secret_original: object = None, ext: object = None) -> str | None:
    """Why these values cannot go into a Flickr URL (None when they can).

    `secret_original`/`ext`: None = not used by this URL (not checked); given, they must be
    a hex original secret and a known extension (empty = jpg)."""
    if not isinstance(photo_id, int) or isinstance(photo_id, bool) or photo_id <= 0:
        return f"photo id {photo_id!r} is not a positive integer"
    if not isinstance(server, int) or isinstance(server, bool) or server < 0:
        return f"server {server!r} is not a non-negative integer"
    if not isinstance(secret, str) or not _SECRET.fullmatch(secret):
        return f"secret {secret!r} is not hexadecimal"
    if secret_original is not None and (not isinstance(secret_original, str)
                                        or not _SECRET.fullmatch(secret_original)):
        return f"secret_original {secret_original!r} is not hexadecimal"
    if ext is not None and ext not in EXTENSION_VALUES:
        return f"extension {ext!r} is not a known image or video extension"
    return None


def photo_url(host: str, size: str, server: int, photo_id: int, secret: str, secret_original: str | None, ext: str | None) -> str:
    """Flickr static URL: `_b` (1024 px long side) from the secret, `_o` from the original secret.

    Values outside their domains (a secret like `../../etc/passwd`) are refused."""
    problem = url_field_problem(photo_id, server, secret, *((secret_original or "", ext or "") if size == "o" else ()))
    if problem:
        raise UserError(f"photo {photo_id!r}: {problem}; no URL built (metadata not from `mining ingest`?)")
    host = host.rstrip("/")
    if size == "b":
        return f"{host}/{server}/{photo_id}_{secret}_b.jpg"
    return f"{host}/{server}/{photo_id}_{secret_original}_o.{ext or 'jpg'}"


# the mirror's key: each of the MD5's 16 bytes in hex *without* a leading zero ("0a" -> "a"),
# so keys have 16 to 32 characters (the rule of the `yfcc100m` package's `yfcc_hash`)
_BYTE_HEX = tuple(format(b, "x") for b in range(256))


def yfcc_hash(download_url: str) -> str:
    """YFCC's photo hash as the Multimedia Commons mirror names its images: the MD5 of the row's
    download URL (UTF-8) with each byte printed in hex without a leading zero.

    The mirror stores the photo at `data/images/<h[0:3]>/<h[3:6]>/<h>.jpg`."""
    return "".join(_BYTE_HEX[b] for b in hashlib.md5(download_url.encode("utf-8")).digest())


def mirror_relpath(photo_hash: str, ext: str = "jpg") -> str:
    """Where the Multimedia Commons mirror keeps a photo: `data/images/<h[0:3]>/<h[3:6]>/<h>.<ext>`."""
    return f"data/images/{photo_hash[:3]}/{photo_hash[3:6]}/{photo_hash}.{ext}"
