"""Benchmark: the review app's API at full size (26 landmarks x 2,000 items) vs a tiny queue.

Builds two review databases in the same run: the reference (26 x 5 items) and the target
(default 26 x 2,000 = 52,000 items, 3 reviewers who already voted on 70 % of them), then
times each UI request against a real uvicorn server over keep-alive HTTP: the landmark
overview with progress, one page of 100 items, the resume position (a landmark whose open
item is deep in the queue), and posting a vote. Also times import and export at full size.
Prints JSON; `ratio_*` = full-size latency / tiny-queue latency (a page must not slow down
with queue size: target ratio <= 3 and every median under 50 ms).

    nice .venv/bin/python benchmarks/review.py [--landmarks 26] [--items 2000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq

from mining.stages.review import database, decisions, queue_import, vote_log
from mining.stages.review.app import create_app
from mining.stages.review.hosting import running


def build(root: Path, n_lm: int, n_items: int, voted: float) -> tuple[Path, dict[str, float]]:
    rows = [{"landmark": f"lm{l:02d}", "photo_id": l * 1_000_000 + r, "rank": r + 1,
             "score": float(n_items - r), "total_score": 1.0, "best_query": f"lm{l:02d}_001"}
            for l in range(n_lm) for r in range(n_items)]
    queue = root / "queue.parquet"
    pq.write_table(pa.Table.from_pylist(rows), queue)
    path = root / "review.sqlite"
    con = database.connect(path, create=True)
    t = time.perf_counter()
    queue_import.import_queue(con, queue, scores_fingerprint=None)
    import_s = time.perf_counter() - t
    # Votes written straight to the log (as the API would), 3 reviewers, first `voted` of each list.
    ids = [r[0] for r in con.execute("SELECT id FROM items WHERE rank <= ? ORDER BY id", (int(n_items * voted),))]
    for name in ("ann", "bob", "cy"):
        con.execute("BEGIN")
        rid = vote_log.reviewer_id(con, name, create=True)
        for i in ids:
            cur = con.execute("INSERT INTO votes (item_id, reviewer_id, vote, created) VALUES (?, ?, 'n', 0)", (i, rid))
            con.execute("INSERT INTO current VALUES (?, ?, ?, 'n')", (i, rid, cur.lastrowid))
        con.execute("COMMIT")
    t = time.perf_counter()
    stats = decisions.export(con, root / "decisions.parquet")
    export_s = time.perf_counter() - t
    con.close()
    return path, {"import_s": round(import_s, 3), "export_s": round(export_s, 3), "exported_rows": stats["rows"]}


def median_ms(fn, repeat: int) -> float:
    fn()  # warm (connection, page cache)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1000, 3)


def measure(path: Path, images: Path, n_lm: int, n_items: int, repeat: int) -> dict[str, float]:
    app = create_app(db_path=path, images=images)
    deep = f"lm{n_lm - 1:02d}"
    with running(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        def ok(r: httpx.Response) -> None:
            r.raise_for_status()
        item = c.get("/api/items", params={"landmark": deep, "offset": n_items - 1, "limit": 1}).json()["items"][0]
        return {
            "landmarks_ms": median_ms(lambda: ok(c.get("/api/landmarks", params={"reviewer": "ann"})), repeat),
            "page_ms": median_ms(lambda: ok(c.get("/api/items", params={
                "landmark": deep, "offset": (n_items // 2) // 100 * 100, "limit": 100, "reviewer": "ann"})), repeat),
            "resume_ms": median_ms(lambda: ok(c.get("/api/resume", params={"landmark": deep, "reviewer": "ann"})), repeat),
            "vote_ms": median_ms(lambda: ok(c.post("/api/votes", json={
                "item_id": item["id"], "vote": "y", "reviewer": "dan"})), repeat),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--landmarks", type=int, default=26)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=30)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "small").mkdir()
        (root / "full").mkdir()
        small, _ = build(root / "small", a.landmarks, 5, 0.7)
        full, io_stats = build(root / "full", a.landmarks, a.items, 0.7)
        ref = measure(small, root, a.landmarks, 5, a.repeat)
        got = measure(full, root, a.landmarks, a.items, a.repeat)
    out = {"landmarks": a.landmarks, "items_per_landmark": a.items, "items": a.landmarks * a.items,
           "reference_items": a.landmarks * 5, **io_stats,
           **{f"ref_{k}": v for k, v in ref.items()}, **got,
           **{f"ratio_{k[:-3]}": round(got[k] / ref[k], 2) for k in got}}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
