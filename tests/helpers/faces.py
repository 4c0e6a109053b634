"""Real faces to plant into test images: photographs shipped inside the scikit-image wheel
(`astronaut`: Eileen Collins, NASA, public domain; `camera`: the cameraman; `lfw_subset`:
100 Labeled Faces in the Wild crops), no download. Used by tests/unit/test_release.py and
benchmarks/release_faces.py."""

from __future__ import annotations

import cv2
import numpy as np

# (crop with context around the face, the face box inside that crop as x, y, w, h)
_ASTRONAUT = ((150, 30, 300, 210), (32, 33, 87, 111))
_CAMERA = ((175, 95, 285, 225), (27, 27, 54, 75))


def face_patches() -> list[tuple[np.ndarray, tuple[int, int, int, int]]]:
    """(RGB patch with some context, face box in it): astronaut and cameraman."""
    from skimage import data

    out = []
    for img, ((x0, y0, x1, y1), box) in ((data.astronaut(), _ASTRONAUT),
                                         (np.stack([data.camera()] * 3, -1), _CAMERA)):
        out.append((np.ascontiguousarray(img[y0:y1, x0:x1]), box))
    return out


def lfw_faces(scale: int = 4) -> list[tuple[np.ndarray, tuple[int, int, int, int]]]:
    """The 100 face crops of skimage's lfw_subset (25×25 grey), upscaled, as RGB patches with
    a grey border of one face width; the face box is the upscaled crop."""
    from skimage import data

    out = []
    for f in data.lfw_subset()[:100]:
        g = cv2.resize((f * 255).astype(np.uint8), None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
        s = g.shape[0]
        canvas = np.full((3 * s, 3 * s), 128, np.uint8)
        canvas[s:2 * s, s:2 * s] = g
        out.append((np.stack([canvas] * 3, -1), (s, s, s, s)))
    return out


def plant(img: np.ndarray, patch: np.ndarray, box: tuple[int, int, int, int], x: int, y: int,
          face_px: int) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """Paste `patch` scaled so that its face is `face_px` wide, with the patch's top-left at
    (x, y) of a copy of `img`; return the copy and the face box in it (x, y, w, h)."""
    f = face_px / box[2]
    p = cv2.resize(patch, None, fx=f, fy=f, interpolation=cv2.INTER_AREA if f < 1 else cv2.INTER_CUBIC)
    out = img.copy()
    h, w = min(p.shape[0], out.shape[0] - y), min(p.shape[1], out.shape[1] - x)
    out[y:y + h, x:x + w] = p[:h, :w]
    return out, (x + round(box[0] * f), y + round(box[1] * f), round(box[2] * f), round(box[3] * f))


def iou(a: tuple, b: tuple) -> float:
    ax1, ay1, bx1, by1 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    iw, ih = max(0, min(ax1, bx1) - max(a[0], b[0])), max(0, min(ay1, by1) - max(a[1], b[1]))
    inter = iw * ih
    return inter / float(a[2] * a[3] + b[2] * b[3] - inter)
