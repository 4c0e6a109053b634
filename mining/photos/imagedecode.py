"""The one way an image file is decoded for a decision: as every viewer shows it, in 8 bits.

Every stage that looks at pixels (describe, near-duplicates' hashing, review and report
thumbnails, the release's face check) opens images through `open_upright`, so that
- the EXIF orientation (1-8) is applied (`ImageOps.exif_transpose`): a photo stored on its
  side is seen upright, the way it is shown, and coordinates (face boxes, query bboxes) are
  those of the upright image; the returned image carries no orientation tag;
- 16-bit images (Pillow modes I;16*, and I holding 0-65535) are scaled to 8 bits (value >> 8;
  mode L) instead of being clipped to white by Pillow's `convert("L")`; 32-bit float images
  (mode F) and 32-bit integer ones with other values are refused (ValueError), never guessed.

`load_image` is the describe stage's decode (scaled to a long side, a query cropped to its
bbox). JPEGs can still be decoded at a reduced scale (`draft`, DCT scaling): `size` is the wanted
size of the upright image, handed to libjpeg the way the stored image lies.
"""

from __future__ import annotations

import io
import math
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Union

import numpy as np
from PIL import Image, ImageOps

ORIENTATION_TAG = 0x0112
SWAPS_SIDES = (5, 6, 7, 8)  # orientations whose stored width is the shown height
_WIDE = ("I;16", "I;16L", "I;16B", "I;16N", "I")
Size = Union[tuple[int, int], Callable[[tuple[int, int]], "tuple[int, int] | None"], None]


def orientation(im: Any) -> int:
    """The EXIF orientation of an open image (1 when absent or not 1-8)."""
    try:
        o = im.getexif().get(ORIENTATION_TAG, 1)
    except Exception:  # noqa: BLE001 - a broken EXIF block is an image without orientation
        return 1
    return o if isinstance(o, int) and 1 <= o <= 8 else 1


def shown_size(im: Any) -> tuple[int, int]:
    """(width, height) of an open image as it is shown (orientation applied)."""
    w, h = im.size
    return (h, w) if orientation(im) in SWAPS_SIDES else (w, h)


def to_8bit(im: Any) -> Any:
    """16-bit grey (I;16*, and I holding 16-bit values) → L by the top 8 bits; F and I with
    other values refused (ValueError)."""
    if im.mode == "F":
        raise ValueError("32-bit float images are not supported")
    if im.mode not in _WIDE:
        return im
    a = np.asarray(im).astype(np.int64)
    if a.size and (a.min() < 0 or a.max() > 65535):  # a 32-bit integer image: no 8-bit reading to guess
        raise ValueError(f"{im.mode} image with values outside 0-65535 is not supported")
    return Image.fromarray((a >> 8).astype(np.uint8), mode="L")


def upright(im: Any, mode: str | None = None, size: Size = None) -> Any:
    """The decoded image as shown: for a JPEG, `draft` to `size` (the upright width and
    height, or a function of the shown size giving them or None), orientation applied (no tag
    left), 16 bits scaled to 8, then converted to `mode` if given. Always a new, loaded image."""
    o = orientation(im)
    want = size(shown_size(im)) if callable(size) else size
    if want is not None and im.format == "JPEG":
        w, h = want
        im.draft(mode, (h, w) if o in SWAPS_SIDES else (w, h))
    out = to_8bit(im if o == 1 else ImageOps.exif_transpose(im))
    if mode is not None and out.mode != mode:
        out = out.convert(mode)
    return im.copy() if out is im else out


@contextmanager
def open_upright(source: str | Path | bytes, mode: str | None = None, size: Size = None,
                 formats: tuple[str, ...] | None = None) -> Iterator[Any]:
    """`with open_upright(path or bytes, "RGB") as im:` the image as shown (see `upright`).
    `size`: decode a JPEG at a reduced scale no smaller than this upright size. `formats`:
    the file formats accepted (ValueError for another)."""
    try:
        im = Image.open(io.BytesIO(source) if isinstance(source, bytes) else source)
    except Image.DecompressionBombError as exc:  # a failure of this image, like any undecodable one
        raise ValueError(f"decompression bomb: {exc}") from None
    with im:
        if formats is not None and im.format not in formats:
            raise ValueError(f"not a {' or '.join(formats)} ({im.format})")
        try:
            out = upright(im, mode, size)
        except Image.DecompressionBombError as exc:
            raise ValueError(f"decompression bomb: {exc}") from None
        yield out


def load_image(path: str | Path, max_side: int, mode: str = "RGB",
               bbox: tuple[float, float, float, float] | None = None) -> np.ndarray:
    """Decode an image with its long side scaled down to `max_side`, then crop `bbox`.

    The image is the one shown (EXIF orientation applied, 16 bits scaled to 8: `open_upright`);
    the bbox is in its original pixels; the crop is taken from the
    scaled image, so a query crop has the same scale as the database images (as revisitop
    does). JPEGs are decoded with Pillow's `draft` (DCT scaling), several times faster than a
    full decode then resize.
    """
    scaled: list = []

    def target(shown: tuple[int, int]) -> tuple[int, int] | None:
        w, h = shown
        s = min(1.0, max_side / max(w, h))
        scaled[:] = [s, max(1, round(w * s)), max(1, round(h * s))]
        return (scaled[1], scaled[2]) if s < 1.0 else None

    with open_upright(path, mode, size=target) as im:
        s, tw, th = scaled
        if im.size != (tw, th):
            im = im.resize((tw, th), Image.Resampling.BILINEAR)
    if bbox is not None:
        x1, y1, x2, y2 = (v * s for v in bbox)
        x1, y1 = max(0, int(math.floor(x1))), max(0, int(math.floor(y1)))
        x2, y2 = min(tw, int(math.ceil(x2))), min(th, int(math.ceil(y2)))
        if x2 - x1 < 8 or y2 - y1 < 8:
            raise ValueError(f"query bbox {bbox} is empty or tiny after clipping to the image")
        im = im.crop((x1, y1, x2, y2))
    return np.asarray(im)


__all__ = ["load_image", "open_upright", "upright", "orientation", "shown_size", "to_8bit"]
