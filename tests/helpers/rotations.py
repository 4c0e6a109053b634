"""Real face photos stored the eight EXIF ways: pixels transposed so that the
orientation tag (what every viewer applies, `ImageOps.exif_transpose`) brings them upright."""

from __future__ import annotations

import io

from PIL import Image

ORIENTATION = 0x0112
# the transpose that turns the upright image into the stored one, per EXIF orientation:
# ImageOps.exif_transpose applies the inverse and gets the upright image back
STORE = {1: None, 2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
         4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_90,
         7: Image.Transpose.TRANSVERSE, 8: Image.Transpose.ROTATE_270}
FACE = (182, 63, 87, 111)  # the astronaut's face (x, y, w, h), found by MTCNN in the upright image


def upright_source() -> Image.Image:
    """scikit-image's astronaut (a real face photo), cut to 512 × 448 (a swapped width and height shows)."""
    from skimage import data

    return Image.fromarray(data.astronaut()[:, :448])


def stored_jpeg(upright: Image.Image, orientation: int, quality: int = 92) -> bytes:
    """JPEG bytes whose pixels are stored so that the EXIF orientation tag brings them upright."""
    op = STORE[orientation]
    stored = upright if op is None else upright.transpose(op)
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    buf = io.BytesIO()
    stored.save(buf, "JPEG", quality=quality, exif=exif.tobytes())
    return buf.getvalue()
