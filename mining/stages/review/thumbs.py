"""Thumbnail cache: each thumbnail is made once, on first request, and kept on disk beside the DB.

A review session shows thousands of 1024 px images as small tiles; decoding and shrinking
them on every page view would make the grid crawl, so the first request pays and writes the
result atomically (two requests racing for the same tile both produce a complete file).

The cache is checked like the image root: an entry is read and written by walking from the
cache root one folder at a time with O_NOFOLLOW and working relative to the folder's
descriptor, so a symlink planted in the cache (`items/abc/<key>.jpg -> /etc/passwd`) is never
followed, and a folder swapped for a link between the check and the write (while the
thumbnail renders) changes nothing. A planted file link is replaced by a fresh thumbnail; a
planted directory link makes the entry refused (None), since writing through it would write
outside the cache.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import secrets
import stat
from pathlib import Path, PurePosixPath

from PIL import Image

from mining.photos.imagedecode import open_upright

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
    with open_upright(src, "RGB") as im:
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


class _Refused(Exception):
    """A folder on the way to a cache entry is a symlink (or not a folder)."""


def _entry_dir(cache_dir: Path, name: str, create: bool) -> int:
    """A descriptor of the folder that holds entry `name`, reached from the cache root one
    folder at a time with O_NOFOLLOW (made on the way if `create`). Everything after this is
    relative to the descriptor, so a folder swapped for a link meanwhile changes nothing.
    _Refused: a folder on the way is a link; OSError: absent (not `create`) or not writable."""
    if create:
        cache_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(cache_dir, os.O_RDONLY | os.O_DIRECTORY)  # the root itself may be a link
    try:
        for part in PurePosixPath(name).parts[:-1]:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                nxt = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _Refused(part) from None
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_entry(cache_dir: Path, name: str) -> bytes | None:
    """Bytes of cache entry `name` if it is a plain file (one link) reached from the cache root
    without following any symlink below it; None otherwise (absent included)."""
    try:
        fd = _entry_dir(cache_dir, name, create=False)
    except (OSError, _Refused):
        return None
    try:
        leaf = os.open(PurePosixPath(name).name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(leaf, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None
        return f.read()


def _write_entry(dir_fd: int, leaf: str, data: bytes) -> None:
    """Write `leaf` in the folder `dir_fd` atomically: a private temporary file, then a rename
    that replaces whatever is there (a planted file link included) without following it."""
    tmp = f".{leaf}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, leaf, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def cached(cache_dir: Path, name: str, src: Path, size: int = THUMB_SIZE,
           crop: tuple[float, float, float, float] | None = None) -> bytes | None:
    """JPEG bytes of the cached thumbnail `name` (a server-made name, never client text); made
    if absent. None when the entry is refused: a folder on its way is a symlink."""
    data = read_entry(cache_dir, name)
    if data is not None:
        return data
    try:
        dir_fd: int | None = _entry_dir(cache_dir, name, create=True)
    except _Refused:
        log.warning("%s: a directory in the thumbnail cache is a symlink; entry refused", cache_dir / name)
        return None
    except OSError as exc:  # e.g. a read-only or full cache folder: serve it uncached
        log.warning("%s: thumbnail not cached (%s)", cache_dir / name, exc.strerror or exc)
        dir_fd = None
    try:
        data = render(src, size, crop)
        if dir_fd is not None:
            try:
                _write_entry(dir_fd, PurePosixPath(name).name, data)
            except OSError as exc:
                log.warning("%s: thumbnail not cached (%s)", cache_dir / name, exc.strerror or exc)
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    return data
