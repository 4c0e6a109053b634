"""Geometry as evidence that a candidate shows a landmark: its best RANSAC inlier count
(`mining.retrieval.spatial`) against the landmark's images.

A photo of a landmark's model, a painting of it, a photo of a printed photo or a partial view
may score low against the queries and still share dozens of verified correspondences with
one of the landmark's images; an unrelated photo shares only a handful. The score stage adds
this evidence to every review-queue row (its landmark), the leak risk to the riskiest
candidates (their nearest landmark); the review app draws the correspondences and sorts by
them. People still decide: a candidate with `min_inliers` or more (the method's
`spatial_verification` setting, the same bar as the +SP ranking) is flagged, not removed.

The landmark's images compared: its query crops, then its positives (Easy, then Hard, in
ground-truth order), at most MAX_IMAGES in all, which bounds the cost per candidate
(docs/performance.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from mining.retrieval import spatial
from mining.datasets.benchmarks import qualify
from mining.retrieval.reranking import KeypointStore, has_keypoints, store_settings, verify_pairs
from mining.retrieval.methodstores import open_method

MAX_IMAGES = 20  # landmark images compared with a candidate
MAX_POINTS = 200  # inlier correspondences kept per row (to draw)


def landmark_images(dataset: Any) -> list[tuple[str, str, str]]:
    """(set, image name, landmark) of every query and every positive of a landmark's queries."""
    out: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str]] = set()
    for lm, queries in dataset.groups:
        for q in queries:
            out.append(("queries", dataset.qimlist[q], lm))
        for q in queries:
            for j in dataset.positives(q):
                name = dataset.imlist[j]
                if (name, lm) not in seen:
                    seen.add((name, lm))
                    out.append(("database", name, lm))
    return out


@dataclass
class Evidence:
    """Per row: best inliers (-1: the candidate or the landmark has no keypoints), the image
    that gave them (`queries/<name>` or `database/<name>`, "" when none), and the inlier
    correspondences (float32 x_candidate, y_candidate, x_image, y_image, flattened), with
    the two frames' sizes (width, height of the candidate, then of the image)."""

    inliers: np.ndarray
    image: list[str]
    points: list[np.ndarray]
    frames: list[list[int]]

    @classmethod
    def none(cls, n: int) -> "Evidence":
        """n rows without evidence."""
        return cls(np.full(n, -1, np.int32), [""] * n, [np.zeros(0, np.float32)] * n, [[]] * n)


class Geometry:
    """The keypoints of one method's stores (one per benchmark), and the landmarks' images."""

    def __init__(self, sources: Sequence[tuple[Any, Any, str | None]], several: bool) -> None:
        """`sources`: (MethodStores, dataset, benchmark name) per benchmark, all with keypoints."""
        self.min_inliers = int(store_settings(sources[0][0].queries, True)["min_inliers"])
        self.method = sources[0][0].name
        self.candidates = KeypointStore(sources[0][0].candidates)
        self.images: dict[str, list[tuple[KeypointStore, str, str]]] = {}
        for stores, ds, bench in sources:
            parts = {"queries": KeypointStore(stores.queries), "database": KeypointStore(stores.database)}
            for part, name, lm in landmark_images(ds):
                self.images.setdefault(qualify(bench or "", lm, several), []).append((parts[part], part, name))
        for lm, imgs in self.images.items():
            self.images[lm] = imgs[:MAX_IMAGES]  # queries come first

    def best(self, landmarks: Sequence[str], photo_ids: Sequence[int]) -> Evidence:
        """The evidence of each (landmark, candidate) row."""
        out = Evidence.none(len(photo_ids))
        cand = self.candidates.get([str(p) for p in photo_ids if str(p) in self.candidates])
        images: dict[tuple[str, str], spatial.Keypoints] = {}
        by_store: dict[int, tuple[KeypointStore, str, list[str]]] = {}
        for lm in dict.fromkeys(landmarks):
            for st, part, name in self.images.get(lm, []):
                by_store.setdefault(id(st), (st, part, []))[2].append(name)
        for st, part, names in by_store.values():
            images.update({(part, k): v for k, v in st.get(names).items()})
        jobs, owner = [], []
        for r, (lm, pid) in enumerate(zip(landmarks, photo_ids)):
            c = cand.get(str(pid))
            for _, part, name in self.images.get(lm, []) if c is not None else []:
                jobs.append((c, images[(part, name)]))
                owner.append((r, f"{part}/{name}"))
        for (r, image), (n_in, pts), (c, img) in zip(owner, verify_pairs(jobs), jobs):
            if n_in > out.inliers[r]:
                out.inliers[r], out.image[r] = n_in, image
                out.points[r] = pts[:MAX_POINTS].ravel().astype(np.float32)
                out.frames[r] = [*c.size, *img.size]
        return out


def geometry_of(method_dirs: Sequence[Any], benchmarks: Sequence[Any], datasets: Sequence[Any]) -> Geometry | None:
    """The Geometry of the first method whose stores keep keypoints, or None."""
    several = len(benchmarks) > 1
    for d in method_dirs:
        sources = [(open_method(d, benchmark=b.name if several else None), ds, b.name if several else None)
                   for b, ds in zip(benchmarks, datasets)]
        if all(has_keypoints(s) for s, _, _ in sources):
            return Geometry(sources, several)
    return None


def columns(ev: Evidence) -> dict[str, Any]:
    """The evidence as Parquet columns (pyarrow arrays) of a review queue or leak-risk table."""
    return {"inliers": pa.array(ev.inliers, pa.int32()), "inlier_image": pa.array(ev.image, pa.string()),
            "inlier_points": pa.array([p.tolist() for p in ev.points], pa.list_(pa.float32())),
            "inlier_frames": pa.array(ev.frames, pa.list_(pa.int32()))}
