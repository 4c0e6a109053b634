"""Check that the demo world is shaped like a landmark benchmark: Easy mAP ≫ Hard mAP.

A deliberately simple global descriptor (colour + gradient-orientation histograms on a
spatial grid) and the revisited Easy/Medium/Hard setups, used by a unit test and by
benchmarks/demo_realism.py (which adds the project's CNN).
"""

from __future__ import annotations

from typing import Callable

import cv2
import numpy as np

from mining.datasets.landmarks import LandmarkDataset
from mining.retrieval.metrics import compute_map


def histogram_descriptor(img_rgb: np.ndarray, grid: int = 3, bins: int = 9) -> np.ndarray:
    """Hellinger-normalised HSV colour histogram + gradient orientation histograms per cell."""
    img = cv2.resize(img_rgb, (192, 144), interpolation=cv2.INTER_AREA)
    hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV)
    colour = cv2.calcHist([hsv], [0, 1, 2], None, [8, 4, 4], [0, 180, 0, 256, 0, 256]).ravel()
    grey = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY).astype(np.float32)
    gx, gy = cv2.Sobel(grey, cv2.CV_32F, 1, 0), cv2.Sobel(grey, cv2.CV_32F, 0, 1)
    mag, ang = cv2.cartToPolar(gx, gy)
    obin = np.minimum((ang % np.pi) / np.pi * bins, bins - 1).astype(np.int64)
    h, w = grey.shape
    parts = [colour / max(colour.sum(), 1)]
    for i in range(grid):
        for j in range(grid):
            sl = (slice(i * h // grid, (i + 1) * h // grid), slice(j * w // grid, (j + 1) * w // grid))
            hist = np.bincount(obin[sl].ravel(), weights=mag[sl].ravel(), minlength=bins)
            parts.append(hist / max(hist.sum(), 1e-9) / grid)
    v = np.sqrt(np.concatenate(parts))
    return (v / max(np.linalg.norm(v), 1e-12)).astype(np.float32)


def _read(path, bbox=None) -> np.ndarray:
    img = cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    if bbox is not None:
        x1, y1, x2, y2 = (int(round(v)) for v in bbox)
        img = img[y1:y2, x1:x2]
    return img


SETUPS = {"easy": (("easy",), ("hard", "junk")), "medium": (("easy", "hard"), ("junk",)),
          "hard": (("hard",), ("easy", "junk"))}


def evaluate_setups(ds: LandmarkDataset, describe: Callable[[np.ndarray], np.ndarray] | None,
                    rng: np.random.Generator | None = None) -> dict[str, float]:
    """mAP per revisited setup for a global descriptor (None = a random ranking)."""
    if describe is None:
        sims = (rng or np.random.default_rng(0)).random((len(ds.qimlist), len(ds.imlist)))
    else:
        db = np.stack([describe(_read(ds.image_path(n))) for n in ds.imlist])
        qs = np.stack([describe(_read(ds.image_path(q), ds.bbox(i))) for i, q in enumerate(ds.qimlist)])
        sims = qs @ db.T

    ranks = np.argsort(-sims, axis=1, kind="stable").T  # (database, queries), best first
    out = {}
    for setup, (pos, ign) in SETUPS.items():
        gnd = [{"ok": sorted(set().union(*(g[k] for k in pos))), "junk": sorted(set().union(*(g[k] for k in ign)))}
               for g in ds.gnd]
        out[f"map_{setup}"] = round(float(compute_map(ranks, gnd)[0]), 4)
    return out
