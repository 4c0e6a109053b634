"""Scale benchmark: every stage's wall time, CPU time and peak RSS from thousands to R1M's size.

Why: the largest real run is a few thousand rows; R1M is ~100M metadata rows → 5M sampled →
~4.1M downloaded images × 3 methods → 1M selected. This measures each stage at three sizes
or more (each measured stage in a fresh subprocess: wall clock, user+system CPU, peak RSS
from wait4's ru_maxrss, output bytes on disk), fits how cost grows (the exponent b of
cost ∝ size^b between the smallest and largest sizes) and projects R1M.

Stages and sizes (default = full; `--quick` = a smoke run of seconds):
  ingest+geofilter  metadata rows 100k, 1M (+ --rows 10000000 if you have the time): the
                    synthetic YFCC rows of benchmarks/ingest_geofilter.py, manifests/r1m.yaml;
                    a plain pyarrow read of the largest file is the reference in the same run
  score             candidates 10k, 100k, 1M, 4.1M × 70 queries × 3 methods (benchmarks/score.py;
                    its ratio to the bare GEMMs is measured in the same child); 1,000 queries at
                    100k and 1M (GLDv2-like)
  select            N of a pool of 4.1·N (N = 10k, 100k, 1M): scores, decisions (11 × 2,000
                    reviewed), candidates' metadata; writes distractors.* and ATTRIBUTION.md/.csv
  evaluate          the same pools, 70 queries × 3 methods, 3 random seeds, ablation and curve
                    (mining.stages.evaluate.experiment on similarity blocks computed as a global store's
                    are: float16 rows × float32 queries; store file reading is not included);
                    the bare similarity GEMMs are the reference in the same child; 1,000 queries
                    at the two smaller pools
  review import     22 landmarks × 20, 200, 2,000 items
  report            report.html for the same pools (N selected): size in bytes, and how long
                    Python's html.parser takes to read it (a proxy for a browser opening it)
  extract           per method, CPU seconds per image on one core (affinity to one CPU), on
                    synthetic 1024×768 JPEGs (benchmarks/describe.py's photos), small sample
Prints one JSON object (also written to --out). On a shared machine absolute figures are
noisy: ratios against references measured in the same run are the comparable numbers.

    nice .venv/bin/python -m benchmarks.scale [--quick] [--workdir DIR] [--out scale.json] [--only score,select]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent

R1M = {"metadata_rows": 100_000_000, "sample": 5_000_000, "candidates": 4_100_000, "selected": 1_000_000,
       "queries": 70, "methods": 3, "review_items": 2_000 * 22}
# ILIAS's scale (CVPR 2025: 100M YFCC100M images as distractors): every row downloaded and
# described, N selected at R1M's pool ratio (the user's choice; select/evaluate/report scale with it)
P100M = {**R1M, "sample": 100_000_000, "candidates": 100_000_000, "selected": 24_400_000}
POOL_PER_SELECTED = 4.1
DIM = 512
CHUNK = 32768
METHODS = ("m0", "m1", "m2")
EXTRACT_METHODS = ("cnn-gem", "rsift-asmk", "rsift-vlad")

FULL = {"rows": [100_000, 1_000_000], "score": [10_000, 100_000, 1_000_000, 4_100_000],
        "score_q1000": [100_000, 1_000_000], "selected": [10_000, 100_000, 1_000_000],
        "evaluate_q1000": [10_000, 100_000], "review": [20, 200, 2_000], "extract_images": 6}
QUICK = {"rows": [1_000, 4_000], "score": [1_000, 4_000], "score_q1000": [], "selected": [200, 800],
         "evaluate_q1000": [], "review": [5, 20], "extract_images": 0}


# ----------------------------------------------------------------------------- measuring
def run_child(args: list[str], env: dict[str, str] | None = None, one_cpu: bool = False) -> dict[str, Any]:
    """Run a Python script (its last stdout line is JSON) and add the child's own wall time,
    CPU time (user + system, all its threads) and peak RSS, from wait4 (this child only)."""
    pre = (lambda: os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})) if one_cpu else None
    with tempfile.TemporaryFile(mode="w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT,
                             env={**os.environ, **(env or {})}, preexec_fn=pre)
        out = p.stdout.read() if p.stdout else ""
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(args[:3])} failed ({p.returncode}):\n{err.read()[-3000:]}")
    res = json.loads(out.strip().splitlines()[-1])
    res.update(wall_s=round(wall, 3), cpu_s=round(usage.ru_utime + usage.ru_stime, 2),
               ru_maxrss_mb=round(usage.ru_maxrss / 1024, 1))
    # the child's own peak (see vm_hwm_mb); ru_maxrss is a floor of the parent's peak at spawn
    res["peak_rss_mb"] = res.pop("vm_hwm_mb", None) or res["ru_maxrss_mb"]
    return res


def du(*paths: Path) -> int:
    total = 0
    for p in paths:
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total


def vm_hwm_mb() -> float | None:
    """This process's own peak RSS (VmHWM of its address space). Unlike ru_maxrss it does not
    inherit the parent's peak: on exec Linux folds the old (forked) address space's peak
    into ru_maxrss, so a child of a 2 GB parent would report at least 2 GB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def child_main(stage: str, params: dict[str, Any]) -> None:
    out = CHILDREN[stage](**params) or {}
    out["vm_hwm_mb"] = vm_hwm_mb()
    print(json.dumps(out, default=str))


def child(stage: str, one_cpu: bool = False, env: dict[str, str] | None = None, **params: Any) -> dict[str, Any]:
    return run_child(["-m", "benchmarks.scale", "--child", stage, json.dumps(params, default=str)], env=env, one_cpu=one_cpu)


# ----------------------------------------------------------------------------- synthetic inputs
def make_landmarks(root: Path, queries: int, landmarks: int, ndb: int = 5000, seed: int = 0) -> Path:
    """revisitop-style gnd (queries in `landmarks` groups, 5–150 easy/hard positives each) + query JPEGs."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder = root / f"landmarks-q{queries}"
    if (folder / "gnd_scale.pkl").is_file():
        return folder
    (folder / "jpg").mkdir(parents=True, exist_ok=True)
    imlist = [f"db_{i:06d}" for i in range(ndb)]
    qimlist = [f"lm{q % landmarks:03d}_{q:05d}" for q in range(queries)]
    per_lm = {lm: rng.choice(ndb, 300, replace=False) for lm in range(landmarks)}
    gnd = []
    for q in range(queries):
        items = per_lm[q % landmarks]
        ne, nh, nj = (int(v) for v in rng.integers(3, 75, 3))
        gnd.append({"bbx": [10.0, 10.0, 200.0, 150.0], "landmark": f"lm{q % landmarks:03d}",
                    "easy": items[:ne].tolist(), "hard": items[ne:ne + nh].tolist(), "junk": items[ne + nh:ne + nh + nj].tolist()})
    for q in range(landmarks):  # the report shows each landmark's first query
        Image.fromarray(rng.integers(0, 255, (240, 320, 3), dtype=np.uint8)).save(folder / "jpg" / f"{qimlist[q]}.jpg")
    (folder / "gnd_scale.pkl").write_bytes(pickle.dumps({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}))
    return folder


def make_run(root: Path, pool: int, landmarks_dir: Path, seed: int = 0) -> Path:
    """scores/, review/decisions.parquet and candidates/candidates.parquet for a pool of candidates."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mining.files.answers import Label, queue_digest
    from mining.datasets.landmarks import load_landmarks

    run = root / f"run-{pool}"
    if (run / "ready").is_file():
        return run
    ds = load_landmarks(landmarks_dir)
    lms = ds.landmarks
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(np.arange(10**9, 10**9 + 20 * pool), pool, replace=False)).astype(np.int64)
    per = rng.gamma(0.5, 2.0, (len(METHODS), pool))  # a long tail, like the real score
    score = per.sum(axis=0)
    closest = np.array(lms, dtype=object)[rng.integers(0, len(lms), pool)]
    (run / "scores").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"photo_id": ids, "score": score, **{f"score_{m}": per[i] for i, m in enumerate(METHODS)},
                             "closest_landmark": pa.array(closest.tolist(), pa.string()),
                             "methods_missing": pa.array([None] * pool, pa.string())}), run / "scores" / "scores.parquet")
    (run / "scores" / "stats.json").write_text(json.dumps({"landmarks_fingerprint": ds.fingerprint(), "landmarks": lms,
                                                         "candidates": pool}))
    # the review queue: top 2,000 per landmark (by score), 2 % confirmed landmark, 1 % unclear
    top = min(2000, pool // max(1, len(lms)))
    dec_rows = {"landmark": [], "photo_id": [], "decision": []}
    order = np.argsort(-score, kind="stable")
    for k, lm in enumerate(lms):
        pick = order[k::len(lms)][:top]
        u = rng.random(pick.size)
        dec_rows["landmark"] += [lm] * pick.size
        dec_rows["photo_id"] += ids[pick].tolist()
        dec_rows["decision"] += np.where(u < 0.02, "landmark", np.where(u < 0.03, "unclear", "not_landmark")).tolist()
    pq.write_table(pa.table({"landmark": dec_rows["landmark"], "photo_id": pa.array(dec_rows["photo_id"], pa.int64())}),
                   run / "scores" / "review_queue.parquet")  # the queue the answers answer (select checks it)
    (run / "review").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"landmark": dec_rows["landmark"], "photo_id": pa.array(dec_rows["photo_id"], pa.int64()),
                             "decision": dec_rows["decision"]}).replace_schema_metadata(  # labelled as an export
        Label("review", queue_digest(dec_rows["photo_id"]), ds.fingerprint()).metadata()),
        run / "review" / "decisions.parquet")
    # candidates' metadata: what select needs for URLs and attribution (strings as long as Flickr's)
    n = pool
    owners = np.array([f"{rng.integers(10**7, 10**8)}@N0{rng.integers(0, 9)}" for _ in range(min(n, 50_000))], dtype=object)
    owner = owners[rng.integers(0, owners.size, n)]
    lic = rng.integers(0, 3, n)
    lic_names = np.array(["Attribution License", "Attribution-ShareAlike License", "Attribution-NonCommercial License"], dtype=object)
    lic_urls = np.array(["http://creativecommons.org/licenses/by/2.0/", "http://creativecommons.org/licenses/by-sa/2.0/",
                         "http://creativecommons.org/licenses/by-nc/2.0/"], dtype=object)
    words = np.array(["view", "from", "the", "old", "bridge", "night", "street", "market", "café", "tour", "2009", "IMG"], dtype=object)
    titles = [" ".join(words[rng.integers(0, words.size, 3)]) for _ in range(min(n, 100_000))]
    secret = np.char.mod("%010x", rng.integers(0, 2**40, n))
    (run / "candidates").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({
        "photo_id": ids, "server_id": pa.array(rng.integers(1, 9000, n), pa.int64()), "secret": pa.array(secret.tolist()),
        "secret_original": pa.array(secret.tolist()), "extension": pa.array(["jpg"] * n),
        "license_name": pa.array(lic_names[lic].tolist()), "license_url": pa.array(lic_urls[lic].tolist()),
        "user_nsid": pa.array(owner.tolist()), "user_nickname": pa.array([f"user {o[:5]}" for o in owner.tolist()]),
        "title": pa.array([titles[i % len(titles)] for i in range(n)]), "page_url": pa.array([None] * n, pa.string()),
        "longitude": rng.uniform(-180, 180, n), "latitude": rng.uniform(-60, 75, n),
    }), run / "candidates" / "candidates.parquet", row_group_size=1 << 20)
    (run / "ready").write_text("")
    return run


# ----------------------------------------------------------------------------- children
def _ingest_geofilter(src: str, work: str) -> dict[str, Any]:
    from benchmarks.ingest_geofilter import _pipeline  # the ingest benchmark's own stage calls

    r = _pipeline(src, work)
    return {"ingest_s": round(r["ingest_s"], 3), "geofilter_s": round(r["geofilter_s"], 3),
            "rows_in": r["ingest"]["rows_in"], "candidates": r["geofilter"].get("photos_out", r["geofilter"].get("rows_out")),
            "disk_bytes": du(Path(work) / "metadata", Path(work) / "candidates")}


def _plain_read(src: str) -> dict[str, Any]:
    from benchmarks.ingest_geofilter import _plain_read as plain

    return {"seconds": round(plain(src)["seconds"], 3)}


def _select(run: str, n: int) -> dict[str, Any]:
    from dataclasses import replace

    from mining.settings.options import defaults
    from mining.stages.select.stage import Inputs, run as select

    r = Path(run)
    out = r / f"selected-{n}"
    inputs = Inputs(scores=r / "scores", decisions=r / "review" / "decisions.parquet",
                    candidates=r / "candidates" / "candidates.parquet")
    st = select(inputs=inputs, out=out, options=replace(defaults("select"), n=n))
    return {"n_selected": st["n_selected"], "disk_bytes": du(out), "attribution_md_bytes": (out / "ATTRIBUTION.md").stat().st_size}


def _evaluate(run: str, landmarks: str, n: int, queries: int) -> dict[str, Any]:
    """`mining evaluate`'s work minus reading store files: the sets, then per method its
    similarity blocks (float16 rows × float32 queries, as a global store's) tallied and every
    metric (mining.stages.evaluate.experiment); the bare similarity GEMMs are timed beside it.
    Writes RUN/evaluation-N-qQ.json for the report."""
    import pyarrow.parquet as pq

    from mining.retrieval.descriptors import as_float32
    from mining.stages.evaluate.experiment import build_sets, experiment_report, rankings_of
    from mining.stages.evaluate.histograms import reduce_method
    from mining.datasets.landmarks import load_landmarks
    from mining.retrieval.methodstores import LandmarkSims

    r = Path(run)
    ds = load_landmarks(landmarks)
    ids = np.sort(pq.read_table(r / "scores" / "scores.parquet", columns=["photo_id"]).column(0).to_numpy())
    rng = np.random.default_rng(1)
    nq, ndb = len(ds.qimlist), len(ds.imlist)
    timing = {"stage_s": 0.0, "bare_s": 0.0}
    t0 = time.perf_counter()
    sets = build_sets(r / "scores", r / f"selected-{n}", r / "review" / "decisions.parquet", n, (0, 1, 2))
    rankings, _ = rankings_of(sets)
    sets_s = time.perf_counter() - t0

    def blocks(pool: list[np.ndarray], q: np.ndarray):
        for c, a in enumerate(range(0, ids.size, CHUNK)):
            b = min(ids.size, a + CHUNK)
            yield [str(v) for v in ids[a:b]], q @ as_float32(pool[c % len(pool)][: b - a]).T

    def methods():
        for m in METHODS:
            q = _unit(rng.standard_normal((nq, DIM), dtype=np.float32))
            db = rng.standard_normal((ndb, DIM), dtype=np.float32)
            for i in range(nq):  # positives near their query, so thresholds sit where real ones do
                p = ds.positives(i)
                db[p] = q[i] + rng.standard_normal((len(p), DIM), dtype=np.float32) * 0.05
            pool = [_unit(rng.standard_normal((min(CHUNK, ids.size), DIM), dtype=np.float32)).astype(np.float16) for _ in range(2)]
            t = time.perf_counter()
            for _ in blocks(pool, q):
                pass
            timing["bare_s"] += time.perf_counter() - t
            t = time.perf_counter()
            landmark = LandmarkSims.from_ids(m, ds, ds.qimlist, ds.imlist, q @ _unit(db).T)
            yield reduce_method(m, ds, landmark, blocks(pool, q), rankings)
            timing["stage_s"] += time.perf_counter() - t  # resumes after the method was evaluated

    report = experiment_report(ds, sets, n, (0, 1, 2), ("medium", "hard"), methods())
    total = timing["stage_s"]
    path = r / f"evaluation-{n}-q{nq}.json"
    path.write_text(json.dumps(report))
    return {"pool": int(ids.size), "n": sets.n, "queries": nq, "methods": len(METHODS), "sets_s": round(sets_s, 3),
            "methods_s": round(total, 3), "bare_similarity_s": round(timing["bare_s"], 3),
            "ratio_to_bare_similarity": round((total + sets_s) / timing["bare_s"], 3),
            "mined_map_medium": {m: round(report["results"][m]["medium"]["mined"]["mAP"], 4) for m in report["methods"]},
            "evaluation": str(path)}


def _unit(v: np.ndarray) -> np.ndarray:
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def _review_import(work: str, landmarks: int, items: int) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mining.stages.review import database, queue_import

    root = Path(work) / f"review-{landmarks}x{items}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    rows = {"landmark": [f"lm{l:02d}" for l in range(landmarks) for _ in range(items)],
            "photo_id": pa.array([l * 10_000_000 + r for l in range(landmarks) for r in range(items)], pa.int64()),
            "rank": pa.array([r + 1 for _ in range(landmarks) for r in range(items)], pa.int64()),
            "score": [float(items - r) for _ in range(landmarks) for r in range(items)],
            "total_score": [1.0] * (landmarks * items), "best_query": [f"lm{l:02d}_001" for l in range(landmarks) for _ in range(items)]}
    pq.write_table(pa.table(rows), root / "queue.parquet")
    t0 = time.perf_counter()
    con = database.connect(root / "review.sqlite", create=True)
    queue_import.import_queue(con, root / "queue.parquet", scores_fingerprint=None)
    con.close()
    return {"items": landmarks * items, "import_s": round(time.perf_counter() - t0, 3), "disk_bytes": du(root / "review.sqlite")}


def _report(run: str, landmarks: str, n: int, evaluation: str | None) -> dict[str, Any]:
    from html.parser import HTMLParser

    from mining.stages.report import stage as report

    r = Path(run)
    out = r / f"report-{n}.html"
    inp = report.Inputs(candidates=r / "candidates", scores=r / "scores", decisions=r / "review" / "decisions.parquet",
                 selected=r / f"selected-{n}", images=r / "images", landmarks=Path(landmarks),
                 evaluation=Path(evaluation) if evaluation else None)
    t0 = time.perf_counter()
    missing = report.run(inputs=inp, out=out)["missing"]
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    HTMLParser().feed(out.read_text())
    return {"build_s": round(build_s, 3), "bytes": out.stat().st_size, "parse_s": round(time.perf_counter() - t0, 4),
            "sections_missing": missing}


def _extract(method: str, images: int, work: str) -> dict[str, Any]:
    """CPU seconds per image of `mining describe` (in-process) on one CPU, after a learning run
    on the same images (small codebook/PCA sizes, as benchmarks/describe.py uses)."""
    from dataclasses import replace

    from benchmarks.describe import DESCRIBE, SMALL_LEARNING, make_folder

    from mining.stages.describe import stage as describe

    root = Path(work) / f"extract-{images}"
    if not (root / "images" / "status").is_dir():
        make_folder(root / "images", images)
    model, stage = root / f"{method}-model", root / f"{method}-stage"
    for d in (model, stage):
        shutil.rmtree(d, ignore_errors=True)
    describe.run(inputs=describe.Inputs(images=root / "images", image_set="candidates"), methods=[method], out=model,
                 options=replace(DESCRIBE, shard_size=images, params={method: SMALL_LEARNING.get(method, {})}),
                 progress=False)
    before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    describe.run(inputs=describe.Inputs(images=root / "images", image_set="candidates", models=model),
                 methods=[method], out=stage, options=replace(DESCRIBE, shard_size=images), progress=False)
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"images": images, "stage_wall_s": round(wall, 3), "stage_cpu_s": round(cpu, 3),
            "cpu_s_per_image": round(cpu / images, 4), "cpus": len(os.sched_getaffinity(0))}


CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "ingest_geofilter": _ingest_geofilter, "plain_read": _plain_read, "select": _select, "evaluate": _evaluate,
    "review_import": _review_import, "report": _report, "extract": _extract,
}


# ----------------------------------------------------------------------------- growth and projection
# (result key, stage, size column, R1M size, what it parallelises over: "serial" = one core)
STAGES = [
    ("ingest_geofilter", "ingest+geofilter", "rows", "metadata_rows", "files"),
    ("score", "score (70 queries × 3 methods)", "candidates", "candidates", "threads"),
    ("score_q1000", "score (1,000 queries × 3 methods)", "candidates", "candidates", "threads"),
    ("select", "select + ATTRIBUTION", "n", "selected", "serial"),
    ("evaluate", "evaluate (70 queries × 3 methods)", "n", "selected", "methods"),
    ("evaluate_q1000", "evaluate (1,000 queries × 3 methods)", "n", "selected", "methods"),
    ("review_import", "review import", "items", "review_items", "serial"),
    ("report", "report", "n", "selected", "serial"),
]
def exponent(points: list[tuple[float, float]]) -> float | None:
    """b in cost ∝ size^b, least squares on log-log over the measured points (None if < 2)."""
    pts = [(s, c) for s, c in points if s > 0 and c and c > 0]
    if len(pts) < 2:
        return None
    x = np.log([p[0] for p in pts])
    y = np.log([p[1] for p in pts])
    return round(float(np.polyfit(x, y, 1)[0]), 3)


def project(points: list[tuple[float, float]], size: float) -> float | None:
    """Cost at `size` from the largest measured point and the fitted exponent (≥ 1: no
    extrapolation below linear, since every stage reads all of its input)."""
    pts = [(s, c) for s, c in points if s > 0 and c and c > 0]
    if not pts:
        return None
    b = max(1.0, exponent(pts) or 1.0)
    s0, c0 = max(pts)
    return c0 * (size / s0) ** b


def stage_cpu(r: dict[str, Any]) -> float:
    """CPU seconds of the stage alone. score and evaluate children also generate their inputs
    and time the bare GEMMs; their stage's share of the child's CPU is taken as its share of
    the child's wall time (the machine's load slows both alike)."""
    if "child_wall_s" in r and r.get("child_wall_s"):
        return round(r["cpu_s"] * min(1.0, r["wall_s"] / r["child_wall_s"]), 3)
    return r["cpu_s"]


def summary(res: dict[str, Any]) -> dict[str, Any]:
    """Per stage: exponents for wall, CPU and RSS, the R1M projection and what 32 cores / a cluster take."""
    out: dict[str, Any] = {}

    def add(name: str, rows: list[dict[str, Any]], size_key: str, r1m_size: float, parallel: str, scale_factor: float = 1.0):
        pts_cpu = [(r[size_key], stage_cpu(r)) for r in rows]
        pts_wall = [(r[size_key], r["wall_s"]) for r in rows]
        pts_rss = [(r[size_key], r["peak_rss_mb"]) for r in rows]
        cpu = project(pts_cpu, r1m_size)
        rss_b = exponent(pts_rss)
        s0, m0 = max(pts_rss)
        # memory: extrapolate with the measured exponent (a flat curve stays flat)
        mem = m0 * (r1m_size / s0) ** max(0.0, rss_b or 0.0) if rss_b is not None else m0
        disk = None
        if rows and "disk_bytes" in rows[-1]:
            disk = project([(r[size_key], r["disk_bytes"]) for r in rows], r1m_size)
        core_h = cpu * scale_factor / 3600 if cpu is not None else None
        out[name] = {
            "sizes": [r[size_key] for r in rows], "wall_s": [r["wall_s"] for r in rows], "cpu_s": [p[1] for p in pts_cpu],
            "peak_rss_mb": [r["peak_rss_mb"] for r in rows],
            "exponent_wall": exponent(pts_wall), "exponent_cpu": exponent(pts_cpu), "exponent_rss": rss_b,
            "r1m_size": r1m_size, "r1m_core_hours": round(core_h, 4) if core_h is not None else None,
            "r1m_peak_rss_gb": round(mem / 1024, 2), "r1m_disk_gb": round(disk * scale_factor / 1e9, 2) if disk else None,
            "parallel": parallel,
            "r1m_hours_32_cores": round(core_h / 32, 4) if core_h is not None and parallel != "serial" else
            (round(core_h, 4) if core_h is not None else None),
        }

    for key, name, size_key, r1m_size, parallel in STAGES:
        if res.get(key):
            add(name, res[key], size_key, R1M[r1m_size], parallel)
            cpu = project([(r[size_key], stage_cpu(r)) for r in res[key]], P100M[r1m_size])
            rss = out[name]["peak_rss_mb"][-1] * (P100M[r1m_size] / out[name]["sizes"][-1]) ** max(0.0, out[name]["exponent_rss"] or 0.0)
            out[name].update(p100m_size=P100M[r1m_size], p100m_core_hours=round(cpu / 3600, 3) if cpu else None,
                             p100m_peak_rss_gb=round(rss / 1024, 2))
    for m, r in (res.get("extract") or {}).items():
        if "error" in r:
            out[f"extract {m}"] = r
            continue
        cpu_per_image = r["cpu_s_per_image"]
        core_h = cpu_per_image * R1M["candidates"] / 3600
        out[f"extract {m}"] = {"cpu_s_per_image": round(cpu_per_image, 4), "r1m_size": R1M["candidates"],
                               "r1m_core_hours": round(core_h, 1), "r1m_hours_32_cores": round(core_h / 32, 2),
                               "peak_rss_mb": r["peak_rss_mb"], "parallel": "images", "p100m_size": P100M["candidates"],
                               "p100m_core_hours": round(cpu_per_image * P100M["candidates"] / 3600, 1)}
    return out


def markdown(summ: dict[str, Any]) -> str:
    """The README's table: per stage the measured sizes, CPU seconds and peak RSS, the growth
    exponent and the R1M projection (core-hours, memory, hours on a 32-core node)."""
    def num(v: Any) -> str:
        return "–" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}")

    lines = ["| stage | sizes measured | CPU s | peak RSS (MB) | b (CPU) | b (RSS) | R1M size | R1M core-hours | R1M peak RSS (GB) "
             "| 32-core node | 100M pool: size | core-hours | peak RSS (GB) |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in summ.items():
        if "sizes" in s:
            lines.append(f"| {name} | {' / '.join(num(x) for x in s['sizes'])} | {' / '.join(num(x) for x in s['cpu_s'])} "
                         f"| {' / '.join(num(x) for x in s['peak_rss_mb'])} | {num(s['exponent_cpu'])} | {num(s['exponent_rss'])} "
                         f"| {num(s['r1m_size'])} | {num(s['r1m_core_hours'])} | {num(s['r1m_peak_rss_gb'])} "
                         f"| {num(s['r1m_hours_32_cores'])} h ({s['parallel']}) | {num(s.get('p100m_size'))} "
                         f"| {num(s.get('p100m_core_hours'))} | {num(s.get('p100m_peak_rss_gb'))} |")
        elif "cpu_s_per_image" in s:
            lines.append(f"| {name} (per image, 1 core) | sample | {num(s['cpu_s_per_image'])} per image | {num(s['peak_rss_mb'])} | 1 | 0 "
                         f"| {num(s['r1m_size'])} | {num(s['r1m_core_hours'])} | {num(s['peak_rss_mb'] / 1024)} per worker "
                         f"| {num(s['r1m_hours_32_cores'])} h (images) | {num(s.get('p100m_size'))} "
                         f"| {num(s.get('p100m_core_hours'))} | {num(s['peak_rss_mb'] / 1024)} per worker |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of seconds")
    ap.add_argument("--workdir", type=Path, default=None, help="keep generated inputs here (default: a temp dir, removed)")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    ap.add_argument("--only", default=None, help="comma-separated stages: ingest,score,select,evaluate,review,report,extract")
    ap.add_argument("--rows", type=int, nargs="*", default=None, help="metadata row counts (override)")
    ap.add_argument("--selected", type=int, nargs="*", default=None, help="N selected (pool = 4.1 N) (override)")
    ap.add_argument("--score-candidates", type=int, nargs="*", default=None)
    ap.add_argument("--score-q1000", type=int, nargs="*", default=None, help="candidates for the 1,000-query score runs")
    ap.add_argument("--evaluate-q1000", type=int, nargs="*", default=None, help="N for the 1,000-query evaluate runs")
    ap.add_argument("--extract-images", type=int, default=None,
                    help="images per method for extract (default 6: minutes on a loaded machine; "
                         "more gives a steadier per-image figure)")
    ap.add_argument("--merge", type=Path, nargs="+", help="merge these result files (runs of different stages) and summarise")
    ap.add_argument("--markdown", action="store_true", help="with --merge: print the README's table instead of JSON")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child_main(a.child[0], json.loads(a.child[1]))
        return
    if a.merge:
        merged: dict[str, Any] = {}
        for f in a.merge:
            part = json.loads(f.read_text())
            for k, v in part.items():
                if k == "extract" and isinstance(v, dict):
                    merged.setdefault(k, {}).update(v)
                elif isinstance(v, list) and v and isinstance(v[0], dict):
                    merged.setdefault(k, []).extend(v)
                elif k.startswith("load_average"):
                    merged.setdefault(k + "_per_run", []).append(v)
                elif k not in ("summary", "total_s"):
                    merged.setdefault(k, v)
        for v in merged.values():
            if isinstance(v, list) and v and isinstance(v[0], dict):
                v.sort(key=lambda r: next((r[k] for k in ("rows", "candidates", "n", "items") if k in r), 0))
        merged["summary"] = summary(merged)
        text = json.dumps(merged, indent=2, default=str)
        if a.out:
            a.out.write_text(text + "\n")
        print(markdown(merged["summary"]) if a.markdown else text)
        return
    cfg = dict(QUICK if a.quick else FULL)
    if a.rows:
        cfg["rows"] = a.rows
    if a.selected:
        cfg["selected"] = a.selected
    if a.extract_images is not None:
        if a.extract_images < 1:
            sys.exit("--extract-images must be at least 1")
        cfg["extract_images"] = a.extract_images
    for key in ("score_candidates", "score_q1000", "evaluate_q1000"):
        if getattr(a, key) is not None:
            cfg[key.replace("score_candidates", "score")] = getattr(a, key)
    only = set(a.only.split(",")) if a.only else {"ingest", "score", "select", "evaluate", "review", "report", "extract"}
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"quick": a.quick, "cpus": len(os.sched_getaffinity(0)), "load_average_start": os.getloadavg(),
                           "r1m": R1M}
    t_start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[scale {time.perf_counter() - t_start:7.1f}s] {msg}", file=sys.stderr, flush=True)
        if a.out:  # what is measured so far, in case a long run is stopped
            a.out.with_suffix(".partial.json").write_text(json.dumps(res, indent=2, default=str) + "\n")

    try:
        if "ingest" in only:
            from benchmarks.ingest_geofilter import generate

            res["ingest_geofilter"] = []
            for rows in cfg["rows"]:
                src = work / f"yfcc-{rows}.tsv"
                if not src.exists():
                    log(f"generating {rows} metadata rows")
                    generate(src, rows)
                r = child("ingest_geofilter", src=str(src), work=str(work / f"ingest-{rows}"))
                r.update(rows=rows, input_bytes=src.stat().st_size)
                res["ingest_geofilter"].append(r)
                log(f"ingest+geofilter {rows}: {r['wall_s']} s, {r['peak_rss_mb']} MB")
                shutil.rmtree(work / f"ingest-{rows}", ignore_errors=True)
            big = work / f"yfcc-{cfg['rows'][-1]}.tsv"
            res["ingest_plain_read_reference"] = {"rows": cfg["rows"][-1], **child("plain_read", src=str(big))}
        if "score" in only:
            res["score"], res["score_q1000"] = [], []
            for key, sizes, extra in (("score", cfg["score"], []), ("score_q1000", cfg["score_q1000"], ["--queries", "1000", "--landmarks", "100"])):
                for n in sizes:
                    r = run_child([str(BENCH / "score.py"), "--candidates", str(n), "--chunk", str(min(32768, n)), "--pool", "2", *extra])
                    r.update(candidates=n, child_wall_s=r["wall_s"], wall_s=r["total_s"])  # total_s: scoring alone
                    res[key].append(r)
                    log(f"{key} {n}: {r['total_s']} s (bare GEMM {r['gemm_s']} s), {r['peak_rss_gb']} GB")
        landmarks = make_landmarks(work, 70, 11) if only & {"select", "evaluate", "report"} else None
        runs = {}
        if only & {"select", "evaluate", "report"}:
            for n in cfg["selected"]:
                pool = int(round(n * POOL_PER_SELECTED))
                log(f"generating a run of {pool} candidates")
                runs[n] = make_run(work, pool, landmarks)
        if "select" in only:  # evaluate and report read what select wrote (same --workdir)
            res["select"] = []
            for n in cfg["selected"]:
                r = child("select", run=str(runs[n]), n=n)
                r.update(n=n, pool=int(round(n * POOL_PER_SELECTED)))
                res["select"].append(r)
                log(f"select {n}: {r['wall_s']} s, {r['peak_rss_mb']} MB")
        evaluations = {}
        if "evaluate" in only:
            res["evaluate"], res["evaluate_q1000"] = [], []
            for n in cfg["selected"]:
                r = child("evaluate", run=str(runs[n]), landmarks=str(landmarks), n=n, queries=70)
                r.update(n=n, child_wall_s=r["wall_s"], wall_s=round(r["sets_s"] + r["methods_s"], 3))
                evaluations[n] = r["evaluation"]
                res["evaluate"].append(r)
                log(f"evaluate {n}: {r['wall_s']} s (bare similarity {r['bare_similarity_s']} s), {r['peak_rss_mb']} MB")
            lm1000 = make_landmarks(work, 1000, 100)
            for n in cfg["evaluate_q1000"]:
                r = child("evaluate", run=str(runs[n]), landmarks=str(lm1000), n=n, queries=1000)
                r.update(n=n, child_wall_s=r["wall_s"], wall_s=round(r["sets_s"] + r["methods_s"], 3))
                res["evaluate_q1000"].append(r)
                log(f"evaluate 1000 queries {n}: {r['wall_s']} s, {r['peak_rss_mb']} MB")
        if "report" in only:
            from PIL import Image
            import pyarrow.parquet as pq

            from mining.settings.layout import image_relpath

            res["report"] = []
            for n in cfg["selected"]:
                run = runs[n]
                sel = pq.read_table(run / f"selected-{n}" / "distractors.parquet", columns=["photo_id"]).column(0).to_numpy()
                rng = np.random.default_rng(0)
                for p in sel[:300]:  # the hardest ones get thumbnails: noise JPEGs (worst case for size)
                    path = run / "images" / image_relpath(int(p))
                    if not path.exists():
                        path.parent.mkdir(parents=True, exist_ok=True)
                        Image.fromarray(rng.integers(0, 255, (768, 1024, 3), dtype=np.uint8)).save(path, quality=90)
                ev = evaluations.get(n) or next((str(p) for p in [run / f"evaluation-{n}-q70.json"] if p.is_file()), None)
                r = child("report", run=str(run), landmarks=str(landmarks), n=n, evaluation=ev)
                r.update(n=n, disk_bytes=r["bytes"])
                res["report"].append(r)
                log(f"report {n}: {r['wall_s']} s, {r['bytes']} bytes")
        if "review" in only:
            res["review_import"] = []
            for items in cfg["review"]:
                r = child("review_import", work=str(work), landmarks=22, items=items)
                r.update(items=22 * items)
                res["review_import"].append(r)
                log(f"review import 22 × {items}: {r['import_s']} s")
        if "extract" in only and cfg["extract_images"]:
            res["extract"] = {}
            for m in EXTRACT_METHODS:
                try:  # another engineer may be rewriting describe: report, do not stop the run
                    r = child("extract", one_cpu=True, method=m, images=cfg["extract_images"], work=str(work),
                              env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
                except RuntimeError as exc:
                    r = {"error": str(exc)[-500:]}
                res["extract"][m] = r
                log(f"extract {m}: {r}")
        res["summary"] = summary(res)
        res["load_average_end"] = os.getloadavg()
        res["total_s"] = round(time.perf_counter() - t_start, 1)
    finally:
        if a.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(res, indent=2, default=str)
    if a.out:
        a.out.write_text(text + "\n")
        a.out.with_suffix(".partial.json").unlink(missing_ok=True)
    print(text)


if __name__ == "__main__":
    main()
