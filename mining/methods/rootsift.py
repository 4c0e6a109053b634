"""RootSIFT local features (Arandjelović & Zisserman 2012), shared by the SIFT-based methods.

OpenCV SIFT keeps the `max_features` strongest keypoints (a cap bounds time and memory on
busy images); each descriptor is L1-normalised and square-rooted, so that the Euclidean
distance between RootSIFTs is the Hellinger kernel between SIFTs.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mining.retrieval import spatial
from mining.errors import UserError
from mining.methods.base import Method, Param

_local = threading.local()  # one SIFT detector per thread (images are described in parallel)


def _sift(max_features: int):  # noqa: ANN202 - cv2 type
    cache = _local.__dict__.setdefault("sift", {})
    if max_features not in cache:
        import cv2

        cache[max_features] = cv2.SIFT_create(nfeatures=int(max_features))
    return cache[max_features]


class LocalFeatures(NamedTuple):
    """One image's RootSIFTs and their keypoints (what the RootSIFT methods share per image)."""

    des: np.ndarray  # float32 (n, 128)
    geometry: np.ndarray  # float32 (n, 4): x, y, size, angle in the decoded image's pixels
    size: tuple[int, int] = (0, 0)  # the decoded image's (width, height)


def rootsift(gray: np.ndarray, max_features: int = 1000) -> np.ndarray:
    """(n, 128) float32 RootSIFT descriptors of a uint8 gray image; (0, 128) when none."""
    return rootsift_features(gray, max_features).des


def rootsift_features(gray: np.ndarray, max_features: int = 1000) -> LocalFeatures:
    """RootSIFT descriptors and the geometry of their keypoints, row for row."""
    if gray.ndim == 3:
        import cv2

        gray = cv2.cvtColor(gray, cv2.COLOR_RGB2GRAY)
    kps, des = _sift(max_features).detectAndCompute(np.ascontiguousarray(gray), None)
    if des is None or len(des) == 0:
        return LocalFeatures(np.zeros((0, 128), np.float32), np.zeros((0, 4), np.float32), gray.shape[1::-1])
    des = des[:max_features].astype(np.float32)
    des /= np.maximum(des.sum(1, keepdims=True), 1e-12)
    geometry = np.array([(k.pt[0], k.pt[1], k.size, k.angle) for k in kps[:len(des)]], np.float32).reshape(-1, 4)
    return LocalFeatures(np.sqrt(des), geometry, gray.shape[1::-1])


def sample_rows(features: list[np.ndarray], max_rows: int, seed: int) -> np.ndarray:
    """At most `max_rows` rows drawn uniformly from the stacked features (for codebook training)."""
    x = np.concatenate([f for f in features if len(f)]) if any(len(f) for f in features) else np.zeros((0, 128), np.float32)
    if len(x) > max_rows:
        x = x[np.random.default_rng(seed).choice(len(x), max_rows, replace=False)]
    return np.ascontiguousarray(x, np.float32)


class Described(NamedTuple):
    """A payload and, when the method keeps geometry, the image's keypoints (`mining.retrieval.spatial`)."""

    payload: Any
    keypoints: Any


class RootSiftMethod(Method):
    """Shared part of the RootSIFT methods: gray input, learning a vocabulary on candidates,
    and (`spatial_verification` set) the keypoints kept for spatial verification."""

    mode = "L"
    domains = {"max_side": Param("int", 32, 16384), "max_features": Param("int", 1),
               "train_descriptors": Param("int", 1), "spatial_verification": Param("spatial", none=True)}

    @property
    def learns(self) -> bool:
        return True

    def extractor(self) -> tuple[str, int]:
        """RootSIFT with the same cap: rsift-asmk and rsift-vlad share one extraction per image."""
        return ("rootsift", int(self.params["max_features"]))

    def extract(self, image: np.ndarray) -> LocalFeatures:
        return rootsift_features(image, int(self.params["max_features"]))

    def fit_features(self, image: np.ndarray) -> np.ndarray:
        return self.extract(image).des

    def fit_features_extracted(self, features: LocalFeatures) -> np.ndarray:
        return features.des

    def describe(self, image: np.ndarray) -> object:
        return self.describe_extracted(self.extract(image))

    def describe_extracted(self, features: LocalFeatures) -> object:
        payload = self.aggregate(features.des)
        if self.params.get("spatial_verification") is None:
            return payload
        return Described(payload, spatial.pack(features.geometry, features.des, features.size))

    def aggregate(self, des: np.ndarray) -> object:
        """The payload of one image's RootSIFTs."""
        raise NotImplementedError

    def write_extras(self, shards_dir: Path, shard: str, payloads: list[Any]) -> list[Any]:
        """The keypoints (`mining.retrieval.spatial`), when kept; the payloads proper."""
        if self.params.get("spatial_verification") is None:
            return payloads
        spatial.write_shard(shards_dir, shard, [p.keypoints for p in payloads])
        return [p.payload for p in payloads]

    def training_rows(self, features: list[np.ndarray], words: int, seed: int) -> np.ndarray:
        """The k-means sample; a clear error when it is too small for `words` centroids."""
        x = sample_rows(features, int(self.params["train_descriptors"]), seed)
        if len(x) < 4 * words:
            raise UserError(f"{self.name}: {len(x)} training descriptors for {words} visual words; "
                            "describe more candidates or choose a smaller vocabulary")
        return x
