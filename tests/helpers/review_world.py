"""A tiny generated world for the review tests: images, a gnd pickle, a queue, a truth file; and
`item_id`, the review database's id of a queued item."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image, ImageDraw

from mining.photos import imageindex
from mining.settings.layout import image_relpath

LANDMARKS = ("tower", "bridge")


def _image(path: Path, seed: int, size: tuple[int, int] = (96, 72)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new("RGB", size, ((seed * 53) % 256, (seed * 97) % 256, (seed * 31) % 256))
    d = ImageDraw.Draw(im)
    d.rectangle([size[0] // 4, size[1] // 4, size[0] // 2, size[1] - 8], fill=(240, 240, 240))
    d.text((4, 4), str(seed), fill=(0, 0, 0))
    im.save(path, "JPEG", quality=80)


def make_world(root: Path, per_landmark: int = 6) -> dict[str, Path]:
    """Images for every queued photo, two landmarks with two queries each, queue + truth."""
    images, lms = root / "images", root / "landmarks"
    qimlist = [f"{lm}_{k:03d}" for lm in LANDMARKS for k in (1, 2)]
    for i, q in enumerate(qimlist):
        _image(lms / "jpg" / f"{q}.jpg", 1000 + i, (120, 90))
    for li in range(len(LANDMARKS)):  # one positive per landmark: landmarks are found from the positives
        _image(lms / "jpg" / f"db_{li}.jpg", 2000 + li)
    gnd = {"imlist": [f"db_{li}" for li in range(len(LANDMARKS))], "qimlist": qimlist,
           "gnd": [{"bbx": [10, 10, 100, 80], "easy": [i // 2], "hard": [], "junk": []} for i in range(len(qimlist))]}
    (lms / "gnd_test.pkl").write_bytes(pickle.dumps(gnd))
    rows, truth, index = [], [], []
    for li, lm in enumerate(LANDMARKS):
        for r in range(per_landmark):
            pid = 10_000 + li * 1000 + r
            _image(images / image_relpath(pid), pid)
            index.append({"photo_id": pid, "status": "ok", "path": image_relpath(pid)})
            rows.append({"landmark": lm, "photo_id": pid, "rank": r + 1, "score": 10.0 - r,
                         "total_score": 20.0 - r, "best_query": f"{lm}_001"})
            # rank 1 of each landmark shows the landmark itself, rank 2 shows the OTHER one.
            kind, shown = ("landmark", lm) if r == 0 else (
                ("landmark", LANDMARKS[1 - li]) if r == 1 else ("hard" if r % 2 else "easy", None))
            truth.append({"photo_id": pid, "kind": kind, "landmark": shown})
    imageindex.write(images, index)
    queue = root / "review_queue.parquet"
    pq.write_table(pa.Table.from_pylist(rows), queue)
    pq.write_table(pa.Table.from_pylist(truth), root / "truth.parquet")
    return {"images": images, "landmarks": lms, "queue": queue, "truth": root / "truth.parquet",
            "db": root / "review.sqlite"}


def item_id(con, landmark, rank):
    return con.execute("SELECT id FROM items WHERE landmark = ? AND rank = ?", (landmark, rank)).fetchone()[0]
