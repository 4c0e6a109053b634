"""Thumbnail cache: each thumbnail is made once, on first request, and kept on disk beside the DB.

A review session shows thousands of 1024 px images as small tiles; decoding and shrinking
them on every page view would make the grid crawl, so the first request pays and writes the
result atomically (two requests racing for the same tile both produce a complete file).
"""

from __future__ import annotations

import io
from pathlib import Path

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


def cached(cache_dir: Path, name: str, src: Path, size: int = THUMB_SIZE,
           crop: tuple[float, float, float, float] | None = None) -> Path:
    """Path of the cached thumbnail `name` (a server-made name, never client text); made if absent."""
    target = cache_dir / name
    if not target.is_file():
        write_bytes(target, render(src, size, crop))
    return target
