"""Benchmark: `mining report` at R1M's size: how large the one HTML file grows and how long it takes.

Builds a synthetic run folder in the workflow's layout with N selected distractors (default
1,000,000, R1M's size) and what the report reads beside them: a metadata part and candidates
(N rows each, lon/lat), scores for 1.2·N candidates, an image index of every selected photo
(JPEGs written only for the thumbnails the report shows), 70 landmarks × 5 queries (revisitop's
gnd format, tiny query images), 70 × 2,000 review decisions with 3 reviewers' votes, and an
evaluation.json with intervals. Then builds the report in this process and prints one JSON
object: rows, html_bytes, build_s, peak RSS, sections not available. The report caps its
galleries and tables, so html_bytes must not grow with N (compare --rows 10000).

    nice .venv/bin/python -m benchmarks.report_size [--rows 1000000] [--workdir DIR] [--out report_size.json]
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

LANDMARKS, QUERIES, REVIEWED = 70, 5, 2000
METHODS, SETUPS = ["cnn-gem", "rsift-asmk"], ["easy", "medium", "hard"]


def _jpg(path: Path, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    # a photo-like image (smooth areas, some texture), not white noise: what a JPEG of a photo costs
    from PIL import ImageFilter

    noise = Image.fromarray(rng.integers(0, 255, (384, 512, 3), dtype=np.uint8)).filter(ImageFilter.GaussianBlur(6))
    noise.save(path, quality=85)


def _evaluation(n: int) -> dict:
    rng = np.random.default_rng(1)
    sizes = [0, 10 ** 3, 10 ** 4, 10 ** 5, n]
    curve, results, ci = {}, {}, {}
    for m in METHODS:
        curve[m], results[m], ci[m] = {}, {}, {}
        for s in SETUPS:
            base = rng.uniform(0.3, 0.8)
            mined = [base * (1 - 0.4 * k / len(sizes)) for k in range(len(sizes))]
            curve[m][s] = {"sizes": sizes, "mined": mined, "random": [v + 0.03 for v in mined], "random_std": [0.005] * len(sizes)}
            results[m][s] = {"all": {"mAP": mined[-1] - 0.01}}
            d = -0.05 - 0.05 * rng.random()
            ci[m][s] = {"queries": LANDMARKS * QUERIES, "mined_minus_random": {"diff": d, "ci": [d - 0.02, d + 0.02], "p_not_lower": 0.0}}
    return {"methods": METHODS, "setups": SETUPS, "n": n, "pool": int(1.2 * n), "curve": curve, "results": results, "ci": ci,
            "bootstrap": {"level": 0.95, "samples": 2000, "seed": 0},
            "landmarks": {"name": "synthetic", "queries": LANDMARKS * QUERIES, "database": 1000, "fingerprint": "0" * 16}}


def build_run(root: Path, n: int) -> Path:
    """The run folder (RUN/metadata, RUN/candidates, RUN/selected, ...) with N selected rows."""
    from mining.photos import imageindex
    from mining.settings.layout import image_relpath

    rng = np.random.default_rng(0)
    run = root / "run"
    pool = int(1.2 * n)
    ids = np.sort(rng.choice(10 ** 11, pool + n // 10, replace=False)).astype(np.int64)
    cand_ids = ids[:pool]
    lon, lat = rng.uniform(-180, 180, len(ids)), rng.uniform(-60, 75, len(ids))
    for d in ("metadata", "candidates", "scores", "selected", "images", "review", "evaluation", "world/landmarks/jpg"):
        (run / d).mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"photo_id": ids, "longitude": lon, "latitude": lat}), run / "metadata" / "part-00000.parquet")
    (run / "metadata" / "stats.json").write_text(json.dumps({"rows_in": len(ids) + 10, "rows_out": len(ids), "rows_rejected": 10}))
    pq.write_table(pa.table({"photo_id": cand_ids, "longitude": lon[:pool], "latitude": lat[:pool]}), run / "candidates" / "candidates.parquet")
    (run / "candidates" / "stats.json").write_text(json.dumps({"rows_in": len(ids), "rows_out": pool, "photos_in": len(ids),
                                                               "photos_out": pool, "excluded": {"country:GBR": len(ids) - pool}}))
    names = [f"lm{i:02d}" for i in range(LANDMARKS)]
    score = rng.gamma(2.0, 1.0, pool)
    closest = np.array(names)[rng.integers(0, LANDMARKS, pool)]
    pq.write_table(pa.table({"photo_id": cand_ids, "score": score, "closest_landmark": closest}), run / "scores" / "scores.parquet")
    order = np.lexsort((cand_ids, -score))[:n]
    sel = pa.table({"rank": np.arange(1, n + 1), "photo_id": cand_ids[order], "score": score[order],
                    "closest_landmark": closest[order], "url": [f"https://example.org/{i}.jpg" for i in cand_ids[order]]})
    pq.write_table(sel, run / "selected" / "distractors.parquet")
    (run / "selected" / "stats.json").write_text(json.dumps({"candidates_scored": pool, "dropped": pool - n, "n_selected": n}))
    # the image index of every selected photo; JPEGs only where the report shows a thumbnail
    imageindex.write(run / "images", ({"photo_id": int(p), "status": "ok", "path": image_relpath(int(p))}
                                      for p in cand_ids[order]))
    shown = {int(p) for lm in names for p in cand_ids[order][closest[order] == lm][:10]}
    reviewed = min(REVIEWED, pool // LANDMARKS)
    dec_ids = cand_ids[rng.choice(pool, LANDMARKS * reviewed, replace=False)]
    decision = np.where(rng.random(len(dec_ids)) < 0.05, "landmark", "not_landmark")
    shown |= {int(p) for p in dec_ids[decision == "landmark"][:100]}
    for p in shown:
        _jpg(run / "images" / image_relpath(p), p % 1000)
    votes = [json.dumps({"r1": v, "r2": v, "r3": v if k % 9 else "u"}) for k, v in enumerate(np.where(decision == "landmark", "y", "n"))]
    pq.write_table(pa.table({"landmark": np.repeat(names, reviewed), "photo_id": dec_ids, "votes": votes,
                             "decision": decision}), run / "review" / "decisions.parquet")
    (run / "images" / "summary.json").write_text(json.dumps({
        "photos": pool, "counts": {"ok": n}, "alive_full_res": n, "alive_low_res_only": 0, "gone_everywhere": pool - n,
        "sources": {"flickr": {"asked": pool, "served": n, "failed": {"gone": pool - n}}}}))
    qimlist = [f"{lm}_q{q}" for lm in names for q in range(QUERIES)]
    gnd = [{"bbx": [0, 0, 96, 72], "easy": [i % 1000], "hard": [], "junk": [], "landmark": names[i // QUERIES]}
           for i in range(len(qimlist))]
    imlist = [f"db_{i:04d}" for i in range(1000)]
    (run / "world" / "landmarks" / "gnd_synthetic.pkl").write_bytes(pickle.dumps({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}))
    for k, q in enumerate(qimlist):
        _jpg(run / "world" / "landmarks" / "jpg" / f"{q}.jpg", k)
    (run / "evaluation" / "evaluation.json").write_text(json.dumps(_evaluation(n)))
    return run


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="selected distractors (N)")
    ap.add_argument("--workdir", type=Path, help="where the run folder goes (default: a temporary folder)")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)
    from mining.stages.report import stage as report

    with tempfile.TemporaryDirectory() as tmp:
        root = args.workdir or Path(tmp)
        t0 = time.perf_counter()
        run = build_run(root, args.rows)
        setup_s = time.perf_counter() - t0
        out = root / "report.html"
        t0 = time.perf_counter()
        missing = report.run(inputs=report.inputs_from_run(run), out=out)["missing"]
        build_s = time.perf_counter() - t0
        doc = out.read_text()
        res = {"rows": args.rows, "html_bytes": out.stat().st_size, "build_s": round(build_s, 2),
               "setup_s": round(setup_s, 2), "images_embedded": doc.count("src=\"data:image/"),
               "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
               "sections_missing": missing}
    print(json.dumps(res, indent=1))
    if args.out:
        args.out.write_text(json.dumps(res, indent=1) + "\n")
    return res


if __name__ == "__main__":
    main()
