"""Small procedurally drawn test scenes (façade-like: windows, ornaments, texture)."""

from __future__ import annotations

import cv2
import numpy as np


def scene(seed: int, w: int = 320, h: int = 240) -> np.ndarray:
    """An RGB uint8 image with a random 'building': wall, window grid, ornaments, texture."""
    rng = np.random.default_rng(seed)
    img = np.zeros((h, w, 3), np.uint8)
    img[:] = rng.integers(120, 230, 3)  # sky
    wall = tuple(int(c) for c in rng.integers(40, 200, 3))
    x0, y0 = int(rng.integers(10, 60)), int(rng.integers(20, 70))
    cv2.rectangle(img, (x0, y0), (w - int(rng.integers(10, 60)), h - 5), wall, -1)
    rows, cols = int(rng.integers(2, 5)), int(rng.integers(3, 7))
    for r in range(rows):
        for c in range(cols):
            x = x0 + 10 + c * int(rng.integers(28, 40))
            y = y0 + 10 + r * int(rng.integers(30, 45))
            col = tuple(int(v) for v in rng.integers(0, 255, 3))
            if rng.random() < 0.5:
                cv2.rectangle(img, (x, y), (x + 16, y + 22), col, -1)
            else:
                cv2.ellipse(img, (x + 8, y + 11), (8, 11), 0, 0, 360, col, -1)
    for _ in range(25):
        kind = rng.integers(3)
        col = tuple(int(v) for v in rng.integers(0, 255, 3))
        p = (int(rng.integers(0, w)), int(rng.integers(0, h)))
        if kind == 0:
            cv2.circle(img, p, int(rng.integers(3, 20)), col, int(rng.integers(-1, 4)))
        elif kind == 1:
            cv2.line(img, p, (int(rng.integers(0, w)), int(rng.integers(0, h))), col, int(rng.integers(1, 4)))
        else:
            pts = rng.integers(0, [w, h], (int(rng.integers(3, 6)), 2)).astype(np.int32)
            cv2.fillPoly(img, [pts], col)
    noise = rng.normal(0, 8, img.shape)
    return np.clip(img.astype(np.float32) + noise, 0, 255).astype(np.uint8)


def transformed(img: np.ndarray, seed: int = 0) -> np.ndarray:
    """Crop, rescale, rotate slightly and brighten: another photo of the same thing."""
    h, w = img.shape[:2]
    crop = img[int(h * 0.06): int(h * 0.95), int(w * 0.05): int(w * 0.93)]
    crop = cv2.resize(crop, None, fx=1.25, fy=1.25, interpolation=cv2.INTER_LINEAR)
    ch, cw = crop.shape[:2]
    m = cv2.getRotationMatrix2D((cw / 2, ch / 2), 4.0, 1.0)
    rot = cv2.warpAffine(crop, m, (cw, ch), borderMode=cv2.BORDER_REFLECT)
    return np.clip(rot.astype(np.float32) * 1.2 + 10, 0, 255).astype(np.uint8)


def gray(img: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
