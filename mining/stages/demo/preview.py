"""A contact sheet of the demo world, so a person can judge at a glance whether it looks right.

One row per landmark: its first query with the bbox, a few Easy and Hard views, then a few
hard negatives of the same architectural family (what the mining should surface).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq

from mining.files import atomic
from mining.files.names import TRUTH
from mining.datasets.landmarks import load_landmarks

THUMB = (200, 150)
LABEL_COLOURS = {"query": (40, 40, 220), "easy": (60, 170, 60), "hard": (30, 140, 230), "hard neg": (150, 60, 150)}


def _thumb(path: Path, label: str, bbox: tuple[float, float, float, float] | None = None) -> np.ndarray:
    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if img is None:
        img = np.zeros((THUMB[1], THUMB[0], 3), np.uint8)
    h, w = img.shape[:2]
    if bbox is not None:
        x1, y1, x2, y2 = (int(v) for v in bbox)
        cv2.rectangle(img, (x1, y1), (x2 - 1, y2 - 1), (0, 0, 255), max(2, w // 150))
    s = min(THUMB[0] / w, THUMB[1] / h)
    small = cv2.resize(img, (max(1, int(w * s)), max(1, int(h * s))), interpolation=cv2.INTER_AREA)
    tile = np.full((THUMB[1] + 18, THUMB[0], 3), 245, np.uint8)
    oy, ox = (THUMB[1] - small.shape[0]) // 2, (THUMB[0] - small.shape[1]) // 2
    tile[oy:oy + small.shape[0], ox:ox + small.shape[1]] = small
    cv2.putText(tile, label, (4, THUMB[1] + 13), cv2.FONT_HERSHEY_SIMPLEX, 0.42, LABEL_COLOURS.get(label.split(":")[0], (0, 0, 0)), 1, cv2.LINE_AA)
    return tile


def contact_sheet(root: Path, per_label: int = 3, negatives: int = 2, max_rows: int = 11,
                  gnd: str = "landmarks/gnd_demo.pkl") -> np.ndarray:
    """Build the sheet image (BGR) from a built world folder (`gnd`: the city shown, of a world with several)."""
    ds = load_landmarks(root / gnd)
    prefix = "" if gnd == "landmarks/gnd_demo.pkl" else f"{Path(gnd).parent.name}/"  # truth's names with several
    truth = pq.read_table(root / TRUTH).to_pylist()
    rows = []
    for lm in ds.landmarks[:max_rows]:
        qi = next(i for i in range(len(ds.qimlist)) if ds.query_landmark(i) == lm)
        g = ds.gnd[qi]
        tiles = [_thumb(ds.image_path(ds.qimlist[qi]), f"query: {lm}"[:30], ds.bbox(qi))]
        tiles += [_thumb(ds.image_path(ds.imlist[j]), "easy") for j in g["easy"][:per_label]]
        tiles += [_thumb(ds.image_path(ds.imlist[j]), "hard") for j in g["hard"][:per_label]]
        family = next((t["family"] for t in truth if t["landmark"] == prefix + lm), None)
        negs = [t["photo_id"] for t in truth if t["kind"] == "hard_negative" and t["family"] == family][:negatives]
        tiles += [_thumb(root / "images" / f"{pid}.jpg", "hard neg") for pid in negs]
        while len(tiles) < 1 + 2 * per_label + negatives:
            tiles.append(np.full_like(tiles[0], 245))
        rows.append(np.hstack([np.pad(t, ((2, 2), (2, 2), (0, 0)), constant_values=255) for t in tiles]))
    return np.vstack(rows)


def write_preview(root: Path, out: Path, gnd: str = "landmarks/gnd_demo.pkl") -> None:
    ok, buf = cv2.imencode(".png", contact_sheet(Path(root), gnd=gnd), [cv2.IMWRITE_PNG_COMPRESSION, 6])
    if not ok:  # pragma: no cover
        raise RuntimeError("PNG encoding failed")
    atomic.write_bytes(out, buf.tobytes())
