"""Spatial verification: how many tentative matches between two images one geometric
transformation explains (RANSAC inliers), from the keypoints a local-feature store keeps.

What a store keeps per image (`<shard>.geom.npz` beside the method's own shard file, when
the method has `spatial_verification` set): each RootSIFT keypoint's x, y, size and
orientation in the decoded image's pixels (float16, 8 bytes) and its RootSIFT descriptor
quantised to uint8 (round(255·v), 128 bytes): 136 bytes a keypoint, ≤ 136 kB an image at
the default 1,000 keypoints; and the decoded image's width and height (8 bytes).

Tentative matches: mutual nearest neighbours of the quantised descriptors that also pass
Lowe's ratio test (0.9 on the distance) in both directions. Mutual nearest neighbours alone
keep many accidental pairs on repeated texture; the ratio test alone keeps one-to-many
pairs; together they leave few outliers for RANSAC. Exact and order-free: the squared
distances are integers below 2^24, so the float32 products that give them are exact
whatever the BLAS and its threads.

Geometry: an affine transformation (6 degrees of freedom, `cv2.estimateAffine2D`, RANSAC,
threshold 1 % of the larger image's long side, at least 3 px): it covers the crops, scalings,
rotations and moderate perspective a photo of the same object shows, with 3-point
hypotheses that need few correspondences. OpenCV's RANSAC draws from a generator seeded
with a constant (also set by `cv2.setRNGSeed`), so the count is the same on every call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mining.files import atomic

GEOM_SUFFIX = ".geom.npz"
ROW_SUFFIX = "+SP"  # an evaluation row of a method's verified ranking: `rsift-asmk+SP`
RATIO = 0.9  # Lowe's ratio on distances (compared squared: 0.81)
MAX_ITERS = 2000
CONFIDENCE = 0.999
MIN_THRESHOLD_PX = 3.0
THRESHOLD_FRACTION = 0.01
DEFAULTS = {"top_k": 100, "min_inliers": 15}  # `spatial_verification` settings not given
RULE = "a mapping {top_k: integer >= 1, min_inliers: integer >= 1}"  # the values `valid` takes, in words


def valid(value: Any) -> bool:
    """Whether `value` is a `spatial_verification` setting (`RULE`): the one rule, which describe's
    settings check (mining.methods.base.Param) and a store's reader both apply."""
    return (isinstance(value, dict) and set(value) <= set(DEFAULTS)
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in value.values()))


class Keypoints(NamedTuple):
    """One image's keypoints: float16 (n, 4) x, y, size, angle; uint8 (n, 128) descriptors;
    the decoded image's (width, height), the frame x and y are in."""

    geometry: np.ndarray
    des: np.ndarray
    size: tuple[int, int] = (0, 0)


def pack(geometry: np.ndarray, des: np.ndarray, size: tuple[int, int] = (0, 0)) -> Keypoints:
    """The stored form of float32 keypoints and RootSIFT descriptors."""
    g = np.asarray(geometry, np.float32).reshape(-1, 4)
    d = np.clip(np.rint(np.asarray(des, np.float32) * 255.0), 0, 255).astype(np.uint8).reshape(-1, 128)
    return Keypoints(g.astype(np.float16), d, (int(size[0]), int(size[1])))


class GeometryShard(NamedTuple):
    """One shard's keypoints: image i owns rows offsets[i]:offsets[i+1]."""

    geometry: np.ndarray
    des: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray  # int32 (n, 2): each image's decoded (width, height)

    def image(self, i: int) -> Keypoints:
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return Keypoints(self.geometry[a:b], self.des[a:b], (int(self.sizes[i, 0]), int(self.sizes[i, 1])))


def write_shard(shards_dir: Path, shard: str, images: list[Keypoints]) -> None:
    counts = [len(k.geometry) for k in images]
    geometry = np.concatenate([k.geometry for k in images]) if images else np.zeros((0, 4), np.float16)
    des = np.concatenate([k.des for k in images]) if images else np.zeros((0, 128), np.uint8)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    sizes = np.array([k.size for k in images], np.int32).reshape(-1, 2)
    with atomic.atomic_path(Path(shards_dir) / f"{shard}{GEOM_SUFFIX}") as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, geometry=geometry.astype(np.float16), des=des.astype(np.uint8), offsets=offsets, sizes=sizes)


def load_shard(shards_dir: Path, shard: str) -> GeometryShard:
    with np.load(Path(shards_dir) / f"{shard}{GEOM_SUFFIX}") as z:
        return GeometryShard(z["geometry"], z["des"], z["offsets"], z["sizes"])


def settings(params: dict[str, Any] | None) -> dict[str, int] | None:
    """A store's `spatial_verification` with defaults filled in; None when it keeps no geometry."""
    sv = (params or {}).get("spatial_verification")
    return None if sv is None else {**DEFAULTS, **{k: int(v) for k, v in sv.items()}}


# ----------------------------------------------------------------------------- matching
def tentative_matches(des_a: np.ndarray, des_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices (ia, ib) of the mutual nearest neighbours that pass the ratio test both ways."""
    if len(des_a) < 2 or len(des_b) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    a = np.asarray(des_a, np.float32)
    b = np.asarray(des_b, np.float32)
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)  # exact integers
    ab = np.argmin(d2, axis=1)
    ba = np.argmin(d2, axis=0)
    ia = np.flatnonzero(ba[ab] == np.arange(len(a)))
    ib = ab[ia]
    r2 = RATIO * RATIO
    two_a = np.partition(d2[ia], 1, axis=1)[:, :2]  # best and second best of each a
    two_b = np.partition(d2[:, ib], 1, axis=0)[:2].T
    keep = (two_a[:, 0] < r2 * two_a[:, 1]) & (two_b[:, 0] < r2 * two_b[:, 1])  # a tie is ambiguous
    return ia[keep].astype(np.int64), ib[keep].astype(np.int64)


def _extent(g: np.ndarray) -> float:
    return float(np.ptp(g[:, :2], axis=0).max()) if len(g) else 0.0


def verify(a: Keypoints, b: Keypoints) -> tuple[int, np.ndarray]:
    """(inliers, float32 (inliers, 4) x_a, y_a, x_b, y_b of the inlier correspondences)."""
    import cv2

    ia, ib = tentative_matches(a.des, b.des)
    none = np.zeros((0, 4), np.float32)
    if ia.size < 3:
        return 0, none
    pa = a.geometry[ia, :2].astype(np.float32)
    pb = b.geometry[ib, :2].astype(np.float32)
    threshold = max(MIN_THRESHOLD_PX, THRESHOLD_FRACTION * max(_extent(a.geometry), _extent(b.geometry)))
    cv2.setRNGSeed(0)
    model, mask = cv2.estimateAffine2D(pa, pb, method=cv2.RANSAC, ransacReprojThreshold=threshold,
                                       maxIters=MAX_ITERS, confidence=CONFIDENCE, refineIters=0)
    if model is None or mask is None:
        return 0, none
    keep = np.flatnonzero(mask.ravel())
    return int(keep.size), np.concatenate([pa[keep], pb[keep]], axis=1)


def inliers(a: Keypoints, b: Keypoints) -> int:
    return verify(a, b)[0]
