"""RootSIFT's shared extraction gives the same bytes as the plain recipe, on the Flickr mix."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from fixtures.flickr_sizes import photo
from mining.photos.imagedecode import load_image
from mining.methods.rootsift import rootsift

# landscape, portrait, a 2:1 crop and 9:16: strides and odd sides of the mix
SHAPES = [(1024, 768), (683, 1024), (1024, 511), (575, 1024)]


def plain_rootsift(gray: np.ndarray, cap: int) -> np.ndarray:
    """The recipe, written out: a fresh OpenCV SIFT keeping `cap` keypoints, each descriptor
    L1-normalised in float32 and square-rooted."""
    _, des = cv2.SIFT_create(nfeatures=cap).detectAndCompute(gray, None)
    des = des[:cap].astype(np.float32)
    return np.sqrt(des / np.maximum(des.sum(1, keepdims=True), np.float32(1e-12)))


@pytest.fixture(scope="module")
def mix_grays(tmp_path_factory):
    """The mix's shapes as q90 JPEGs, decoded as describe decodes them for RootSIFT."""
    root = tmp_path_factory.mktemp("mix")
    out = []
    for i, (w, h) in enumerate(SHAPES):
        p = root / f"{i}.jpg"
        cv2.imwrite(str(p), photo(100 + i, w, h), [cv2.IMWRITE_JPEG_QUALITY, 90])
        out.append(load_image(p, 1024, "L"))
    return out


def test_rootsift_bytes_equal_the_plain_recipe_on_the_mix(mix_grays):
    cap = 1000
    for gray in mix_grays:
        got, want = rootsift(gray, cap), plain_rootsift(gray, cap)
        assert got.dtype == np.float32 and got.shape == want.shape and 100 < len(got) <= cap
        assert got.tobytes() == want.tobytes()
    # the detector kept per thread: the same bytes in any order, with another cap in between
    again = [rootsift(g, cap) for g in reversed(mix_grays)][::-1]
    rootsift(mix_grays[0], 50)
    assert all(a.tobytes() == rootsift(g, cap).tobytes() for a, g in zip(again, mix_grays))


def test_rootsift_of_rgb_is_that_of_its_gray():
    rgb = photo(7, 683, 1024)
    assert rootsift(rgb, 300).tobytes() == rootsift(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), 300).tobytes()
