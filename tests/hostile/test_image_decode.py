"""Every stage that decides from pixels sees the image as it is shown.

- 16-bit grey images (PNG I;16) are scaled to 8 bits, not clipped to white: describe's decode
  and the near-duplicate hash of a 16-bit image equal those of its 8-bit version;
- a JPEG stored on its side with an EXIF orientation tag is described, hashed and shown in
  review upright, as every viewer shows it.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image
from mining.stages.describe.stage import load_image
from mining.stages.neardup.stage import dhash
from mining.stages.review.thumbs import render
from rotations import STORE, stored_jpeg, upright_source


def _gradient16() -> np.ndarray:
    """A real 16-bit image: a photo in 16 bits plus a diagonal gradient over the whole range."""
    from skimage import data

    cam = data.camera().astype(np.float64)[:384, :480] / 255
    yy, xx = np.mgrid[0:384, 0:480]
    ramp = 1 - (xx / 479 + yy / 383) / 2
    return np.round((0.6 * cam + 0.4 * ramp) * 65535).astype(np.uint16)


@pytest.fixture(scope="module")
def sixteen(tmp_path_factory):
    root = tmp_path_factory.mktemp("sixteen")
    a16 = _gradient16()
    Image.fromarray(a16).save(root / "g16.png")
    Image.fromarray((a16 >> 8).astype(np.uint8)).save(root / "g8.png")
    with Image.open(root / "g16.png") as im:
        assert im.mode in ("I;16", "I")  # the test's premise: Pillow reads it as 16-bit
    return root


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_a_16_bit_image_is_described_as_its_8_bit_version(sixteen, mode):
    got = load_image(sixteen / "g16.png", 256, mode)
    want = load_image(sixteen / "g8.png", 256, mode)
    assert got.dtype == np.uint8 and got.std() > 20, "16-bit image decoded flat (all white?)"
    np.testing.assert_array_equal(got, want)


def test_a_16_bit_image_hashes_as_its_8_bit_version(sixteen):
    h16, h8 = dhash(sixteen / "g16.png"), dhash(sixteen / "g8.png")
    assert h16 not in (0, None) and h16 == h8
    assert dhash(sixteen / "g16.png", (0.0, 0.06)) == dhash(sixteen / "g8.png", (0.0, 0.06))


def test_a_32_bit_integer_image_of_16_bit_values_reads_as_16_bit(sixteen, tmp_path):
    Image.fromarray(_gradient16().astype(np.int32), mode="I").save(tmp_path / "i.tif")
    with Image.open(tmp_path / "i.tif") as im:
        assert im.mode == "I"
    np.testing.assert_array_equal(load_image(tmp_path / "i.tif", 256, "L"), load_image(sixteen / "g8.png", 256, "L"))


def test_float_and_wide_integer_images_are_refused_not_guessed(tmp_path):
    Image.fromarray(np.linspace(0, 1, 64 * 64, dtype=np.float32).reshape(64, 64)).save(tmp_path / "f.tif")
    Image.fromarray(np.arange(64 * 64, dtype=np.int32).reshape(64, 64) * 1000, mode="I").save(tmp_path / "w.tif")
    for name, words in (("f.tif", "float"), ("w.tif", "outside 0-65535")):
        assert dhash(tmp_path / name) is None
        with pytest.raises(ValueError, match=words):
            load_image(tmp_path / name, 256, "L")


@pytest.fixture(scope="module")
def rotated(tmp_path_factory):
    root = tmp_path_factory.mktemp("exif")
    up = upright_source()
    up.save(root / "upright.png")
    for o in STORE:
        (root / f"o{o}.jpg").write_bytes(stored_jpeg(up, o))
    return root, up


@pytest.mark.parametrize("orientation", sorted(STORE))
def test_describe_decodes_what_is_shown(rotated, orientation):
    root, up = rotated
    want = load_image(root / "upright.png", 300, "RGB").astype(np.float32)
    got = load_image(root / f"o{orientation}.jpg", 300, "RGB").astype(np.float32)
    assert got.shape == want.shape
    assert np.abs(got - want).mean() < 4
    crop = load_image(root / f"o{orientation}.jpg", 300, "RGB", (182, 63, 269, 174)).astype(np.float32)
    ref = load_image(root / "upright.png", 300, "RGB", (182, 63, 269, 174)).astype(np.float32)
    assert crop.shape == ref.shape and np.abs(crop - ref).mean() < 6


@pytest.mark.parametrize("orientation", sorted(STORE))
def test_near_duplicate_hash_is_of_what_is_shown(rotated, orientation):
    root, _ = rotated
    want = dhash(root / "upright.png")
    got = dhash(root / f"o{orientation}.jpg")
    assert bin(int(want) ^ int(got)).count("1") <= 4


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_review_thumbnail_is_upright(rotated, orientation):
    root, up = rotated
    with Image.open(io.BytesIO(render(root / f"o{orientation}.jpg", 128))) as im:
        got = np.asarray(im.convert("RGB"), np.float32)
    want = np.asarray(up.resize(im.size, Image.Resampling.LANCZOS), np.float32)
    assert np.abs(got - want).mean() < 8
