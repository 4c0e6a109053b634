"""Thumbnail cache: each thumbnail is made once, on first request, and kept on disk beside the DB.

A review session shows thousands of 1024 px images as small tiles; decoding and shrinking
them on every page view would make the grid crawl, so the first request pays and writes the
result atomically (two requests racing for the same tile both produce a complete file).

The cache is checked like the image root: an entry is read by walking from the cache root with
O_NOFOLLOW, so a symlink planted in the cache (`items/abc/<key>.jpg -> /etc/passwd`) is never
followed. A planted file link is replaced by a fresh thumbnail; a planted directory link makes
the entry refused (None), since writing through it would write outside the cache.
"""

from __future__ import annotations

import io
import logging
import os
import stat
from pathlib import Path, PurePosixPath

from mining.atomic import write_bytes

THUMB_SIZE = 256


def inside(root: Path, candidate: Path) -> Path | None:
    """`candidate` with symlinks resolved, or None if it is not a file under `root` (resolved too)."""
    try:
        real = candidate.resolve(strict=True)
        base = root.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not real.is_relative_to(base) or not real.is_file():
        return None
    return real


def render(src: Path, size: int, crop: tuple[float, float, float, float] | None = None) -> bytes:
    """JPEG bytes of `src` (optionally cropped to a bbox) shrunk to fit in size × size."""
    from PIL import Image, ImageOps

    with Image.open(src) as im:
        im = ImageOps.exif_transpose(im).convert("RGB")
        if crop is not None:
            x1, y1, x2, y2 = crop
            box = (max(0, int(x1)), max(0, int(y1)), min(im.width, int(round(x2))), min(im.height, int(round(y2))))
            if box[2] > box[0] and box[3] > box[1]:
                im = im.crop(box)
        im.thumbnail((size, size), Image.Resampling.LANCZOS)
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=85, optimize=True)
        return buf.getvalue()


log = logging.getLogger(__name__)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def read_entry(cache_dir: Path, name: str) -> bytes | None:
    """Bytes of cache entry `name` if it is a plain file (one link) reached from the cache root
    without following any symlink below it; None otherwise (absent included)."""
    parts = PurePosixPath(name).parts
    try:
        fd = os.open(cache_dir, os.O_RDONLY | os.O_DIRECTORY)  # the root itself may be a link
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = nxt
        leaf = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(leaf, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None
        return f.read()


def _dirs_are_plain(cache_dir: Path, name: str) -> bool:
    """No directory between the cache root and entry `name` is a symlink (or not a directory)."""
    d = cache_dir
    for part in PurePosixPath(name).parts[:-1]:
        d = d / part
        try:
            mode = d.lstat().st_mode
        except FileNotFoundError:
            return True  # made below by the atomic write, as a plain directory
        if not stat.S_ISDIR(mode):
            return False
    return True


def cached(cache_dir: Path, name: str, src: Path, size: int = THUMB_SIZE,
           crop: tuple[float, float, float, float] | None = None) -> bytes | None:
    """JPEG bytes of the cached thumbnail `name` (a server-made name, never client text); made
    if absent. None when the entry is refused: a directory on its way is a symlink."""
    data = read_entry(cache_dir, name)
    if data is not None:
        return data
    if not _dirs_are_plain(cache_dir, name):
        log.warning("%s: a directory in the thumbnail cache is a symlink; entry refused", cache_dir / name)
        return None
    data = render(src, size, crop)
    try:
        write_bytes(cache_dir / name, data)  # os.replace swaps a planted file link, never follows it
    except OSError as exc:  # e.g. a read-only or full cache folder: serve it uncached
        log.warning("%s: thumbnail not cached (%s)", cache_dir / name, exc.strerror or exc)
    return data
