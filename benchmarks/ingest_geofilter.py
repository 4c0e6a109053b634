"""Benchmark: `mining ingest` + `mining geofilter` (R1M manifest) vs a plain pyarrow CSV read,
and `.bz2`/`.gz` ingest vs Python's own single-threaded decompression of the same file.

Generates a synthetic 25-field yfcc100m_dataset file (default 2,000,000 rows: half geotagged,
3 % malformed unless --malformed says otherwise: the demo world's rows, from
fixtures/yfcc_rows.py) whose geotags follow a Flickr-like mix (Europe incl. the UK and
France, the US incl. Las Vegas, the rest of the world, some at sea), and (with --codecs) its
.bz2 (level 9) and .gz (level 6) copies, then
times, each in a fresh subprocess of the same run:
  (a) pyarrow.csv.read_csv of the file (tab-delimited, no quoting, bad rows skipped);
  (b) ingest + geofilter with manifests/r1m.yaml (or, --r1m-sample, its sample scaled to
      R1M's share of the rows);
  (c) per codec: Python's bz2/gzip module reading the compressed file to nowhere (one thread:
      decompression alone), and `ingest` of the compressed file (parallel decoder),
alternating --repeat times (the fastest of each counts; all times are printed too).
Prints JSON: rows, plain_read_s, ingest_s, geofilter_s, total_s, ratio (= total / plain),
rows_per_s, peak_rss_mb (of (b), the largest over repeats), CPU seconds, the stages' stats,
per codec {decompress_s, ingest_s, speedup = decompress_s / ingest_s, peak_rss_mb}, and the
load average before and after (the machine is shared). Targets: ratio <= 1.5,
bz2 speedup >= 1.6, peak_rss_mb < 1500.

    nice .venv/bin/python -m benchmarks.ingest_geofilter [--rows N] [--workdir DIR] [--codecs bz2,gz]
        [--malformed 0.03] [--r1m-sample]
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
YFCC_FIELDS = 25
LON, LAT = 12, 13  # 0-based indices in the 25-field layout

# (weight, lat0, lon0, spread in degrees): where Flickr geotags cluster.
CLUSTERS = [
    (0.12, 52.5, -1.5, 2.0),    # Great Britain
    (0.10, 47.0, 2.5, 2.5),     # France
    (0.02, 36.15, -115.15, 0.3),  # Las Vegas
    (0.15, 48.0, 12.0, 6.0),    # rest of Europe
    (0.18, 39.0, -95.0, 12.0),  # United States
    (0.10, 35.0, 135.0, 8.0),   # East Asia
    (0.05, 50.0, -25.0, 10.0),  # Atlantic (at sea)
]


def _geotag(rng: random.Random) -> tuple[float, float]:
    r = rng.random()
    for w, lat0, lon0, s in CLUSTERS:
        if r < w:
            return (max(-89.9, min(89.9, rng.gauss(lat0, s))), (rng.gauss(lon0, s) + 180) % 360 - 180)
        r -= w
    return rng.uniform(-60, 75), rng.uniform(-180, 180)


def generate(path: Path, rows: int, seed: int = 0, malformed: float = 0.03) -> None:
    """The tests' bulk rows (the demo world's), geotags moved to a realistic geographic mix;
    `malformed` of them (a fraction) carry one of the quarantine's defects."""
    from fixtures.yfcc_rows import iter_lines  # shared with the tests: run as `python -m benchmarks.ingest_geofilter`

    rng = random.Random(seed + 1)
    with open(path, "w", encoding="utf-8") as f:
        buf = []
        for line, kind in iter_lines(rows, seed=seed, nfields=YFCC_FIELDS, malformed=malformed):
            if kind is None:
                fields = line.split("\t")
                if fields[LAT]:
                    lat, lon = _geotag(rng)
                    fields[LON], fields[LAT] = f"{lon:.6f}", f"{lat:.6f}"
                    line = "\t".join(fields)
            buf.append(line)
            if len(buf) >= 20000:
                f.write("\n".join(buf) + "\n")
                buf = []
        if buf:
            f.write("\n".join(buf) + "\n")


def _plain_read(src: str) -> dict:
    import pyarrow.csv as csv

    t = time.perf_counter()
    table = csv.read_csv(
        src,
        read_options=csv.ReadOptions(column_names=[f"f{i}" for i in range(YFCC_FIELDS)], block_size=16 << 20),
        parse_options=csv.ParseOptions(delimiter="\t", quote_char=False, invalid_row_handler=lambda row: "skip"),
    )
    return {"seconds": time.perf_counter() - t, "rows": table.num_rows}


R1M_ROWS, R1M_SAMPLE = 100_000_000, 5_000_000  # YFCC100M's rows, and the photos R1M drew at random


def _manifest(work: Path, src: Path, r1m_sample: bool) -> tuple[Path, int]:
    """(manifest, its sample's n): manifests/r1m.yaml itself, or (r1m_sample) a copy whose random
    sample keeps R1M's share of `src`'s rows (5M of 100M: 5 %), so that geofilter writes what it
    would at R1M's size, not every photo that passes the rules (the whole 5M sample is larger
    than any test file)."""
    original = ROOT / "manifests" / "r1m.yaml"
    manifest = yaml.safe_load(original.read_text())
    if not r1m_sample:
        return original, manifest["geofilter"]["sample"]["n"]
    with open(src, "rb") as f:  # the file's own rows: a kept --workdir may hold another size
        rows = sum(block.count(b"\n") for block in iter(lambda: f.read(16 << 20), b""))
    manifest["geofilter"]["sample"]["n"] = max(1, rows * R1M_SAMPLE // R1M_ROWS)
    path = work / "r1m-scaled.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path, manifest["geofilter"]["sample"]["n"]


def _pipeline(src: str, work: str, workers: int | None = None) -> dict:
    from mining.stages.geofilter import stage as geofilter
    from mining.stages.ingest import stage as ingest

    meta, cand = Path(work) / "metadata", Path(work) / "candidates"
    for d in (meta, cand):  # time real work, not ingest's "already complete" shortcut
        shutil.rmtree(d, ignore_errors=True)
    t0 = time.perf_counter()
    ingest_stats = ingest.run(paths=[src], out=meta, progress=False, workers=workers)
    t1 = time.perf_counter()
    geo_stats = geofilter.run(metadata=meta, out=cand, options=geofilter.load(os.environ["BENCH_MANIFEST"]),
                              progress=False)
    t2 = time.perf_counter()
    ingest_stats.pop("fingerprint", None)
    return {"ingest_s": t1 - t0, "geofilter_s": t2 - t1, "ingest": ingest_stats, "geofilter": geo_stats}


def _decompress(src: str) -> dict:
    """Python's single-threaded decompressor reading the whole file to nowhere."""
    t = time.perf_counter()
    n = 0
    with (bz2.open if src.endswith(".bz2") else gzip.open)(src, "rb") as f:
        while piece := f.read(4 << 20):
            n += len(piece)
    return {"seconds": time.perf_counter() - t, "bytes": n}


def _ingest_only(src: str, work: str, workers: int | None) -> dict:
    from mining.stages.ingest import stage as ingest

    meta = Path(work) / f"metadata-{Path(src).suffix.lstrip('.')}"
    shutil.rmtree(meta, ignore_errors=True)
    t = time.perf_counter()
    stats = ingest.run(paths=[src], out=meta, progress=False, workers=workers)
    seconds = time.perf_counter() - t
    shutil.rmtree(meta, ignore_errors=True)
    return {"seconds": seconds, "rows": stats["rows_in"]}


def _child(kind: str, src: str, work: str) -> None:
    workers = int(os.environ["BENCH_WORKERS"]) if os.environ.get("BENCH_WORKERS") else None
    if kind == "plain":
        out = _plain_read(src)
    elif kind == "decompress":
        out = _decompress(src)
    elif kind == "ingest":
        out = _ingest_only(src, work, workers)
    else:
        out = _pipeline(src, work, workers)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # lbzip2, when ingest uses it
    out["peak_rss_mb"] = usage.ru_maxrss / 1024  # KiB on Linux
    out["cpu_s"] = usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime
    print(json.dumps(out, default=str))


def _run_child(kind: str, src: Path, work: Path, workers: int | None = None, manifest: Path | None = None) -> dict:
    env = dict(os.environ, BENCH_WORKERS=str(workers or ""), BENCH_MANIFEST=str(manifest or ""))
    r = subprocess.run([sys.executable, "-m", "benchmarks.ingest_geofilter", "--child", kind, str(src), str(work)],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    if r.returncode != 0:
        sys.exit(f"{kind} run failed:\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=2,
                    help="alternate the two measurements this many times; the fastest of each counts "
                         "(a shared machine's load otherwise decides the ratio)")
    ap.add_argument("--workdir", type=Path, default=None, help="keep files here (default: a temp dir, removed)")
    ap.add_argument("--codecs", default="bz2,gz",
                    help="compressed copies to time ingest on against Python's decompressor ('' for none)")
    ap.add_argument("--workers", type=int, default=None, help="ingest workers (default: ingest's)")
    ap.add_argument("--malformed", type=float, default=0.03,
                    help="fraction of malformed rows in the generated file (default 0.03, a stress level: "
                         "every 16 MiB block then holds ~1,000 rows to quarantine)")
    ap.add_argument("--r1m-sample", action="store_true",
                    help="scale the manifest's random sample to R1M's share of the rows (5M of 100M), "
                         "so that geofilter writes as much per input row as at R1M's size; "
                         "default: manifests/r1m.yaml as it is (on a test file every photo that "
                         "passes the rules is kept, ~8x R1M's share)")
    ap.add_argument("--skip-pipeline", action="store_true", help="only the compressed-input measurements")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-ingest-geofilter-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if not 0 <= args.malformed < 1:
            sys.exit("--malformed must be a fraction in [0, 1)")
        # the rate is in the name, so that a kept --workdir never times a file of another rate
        src = work / ("yfcc100m_dataset.tsv" if args.malformed == 0.03 else f"yfcc100m_dataset-m{args.malformed:g}.tsv")
        t = time.perf_counter()
        if not src.exists():
            generate(src, args.rows, malformed=args.malformed)
        codecs = [c for c in args.codecs.split(",") if c]
        packed = {c: src.with_name(f"{src.name}.{c}") for c in codecs}
        for c, path in packed.items():
            if not path.exists():
                with open(src, "rb") as f_in, (bz2.open if c == "bz2" else gzip.open)(path, "wb") as f_out:
                    shutil.copyfileobj(f_in, f_out, 16 << 20)
        gen_s = time.perf_counter() - t
        if not args.skip_pipeline:
            manifest, sample_n = _manifest(work, src, args.r1m_sample)
        load_before = os.getloadavg()
        plains, pipes = [], []
        timed: dict[str, dict[str, list[dict]]] = {c: {"decompress": [], "ingest": []} for c in codecs}
        for _ in range(max(1, args.repeat)):
            if not args.skip_pipeline:
                plains.append(_run_child("plain", src, work))
                pipes.append(_run_child("pipeline", src, work, args.workers, manifest))
            for c, path in packed.items():
                timed[c]["decompress"].append(_run_child("decompress", path, work))
                timed[c]["ingest"].append(_run_child("ingest", path, work, args.workers))
        compressed = {}
        for c, runs in timed.items():
            dec = min(runs["decompress"], key=lambda r: r["seconds"])
            ing = min(runs["ingest"], key=lambda r: r["seconds"])
            compressed[c] = {
                "file_mb": round(packed[c].stat().st_size / 2**20, 1),
                "decompress_s": round(dec["seconds"], 3),
                "decompress_all_s": [round(r["seconds"], 2) for r in runs["decompress"]],
                "decompress_cpu_s": round(dec["cpu_s"], 2),
                "ingest_s": round(ing["seconds"], 3),
                "ingest_all_s": [round(r["seconds"], 2) for r in runs["ingest"]],
                "ingest_cpu_s": round(ing["cpu_s"], 2),
                "speedup": round(dec["seconds"] / ing["seconds"], 3),
                # CPU seconds of the whole child (imports included): with every thread on a
                # core of its own, the wall-clock speedup on C cores is at most C / cpu_ratio
                "cpu_ratio": round(ing["cpu_s"] / dec["cpu_s"], 3),
                "ingest_rows_per_s": round(ing["rows"] / ing["seconds"]),
                "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs["ingest"]), 1),
            }
        load = {"before": [round(x, 1) for x in load_before], "after": [round(x, 1) for x in os.getloadavg()]}
        if args.skip_pipeline:
            print(json.dumps({"compressed": compressed, "loadavg": load, "cpus": os.cpu_count()}, indent=2))
            return
        plain = min(plains, key=lambda r: r["seconds"])
        pipe = min(pipes, key=lambda r: r["ingest_s"] + r["geofilter_s"])
        total = pipe["ingest_s"] + pipe["geofilter_s"]
        rows = pipe["ingest"]["rows_in"]  # the file's, even if --workdir held an older one
        print(json.dumps({
            "rows": rows,
            "malformed": args.malformed,
            "manifest": str(manifest.relative_to(ROOT) if manifest.is_relative_to(ROOT) else manifest.name),
            "sample_n": sample_n,
            "file_mb": round(src.stat().st_size / 2**20, 1),
            "generate_s": round(gen_s, 2),
            "repeat": len(plains),
            "plain_read_s": round(plain["seconds"], 3),
            "plain_read_all_s": [round(r["seconds"], 2) for r in plains],
            "plain_read_cpu_s": round(plain["cpu_s"], 2),
            "plain_read_peak_rss_mb": round(plain["peak_rss_mb"], 1),
            "ingest_s": round(pipe["ingest_s"], 3),
            "geofilter_s": round(pipe["geofilter_s"], 3),
            "total_s": round(total, 3),
            "total_all_s": [round(r["ingest_s"] + r["geofilter_s"], 2) for r in pipes],
            "total_cpu_s": round(pipe["cpu_s"], 2),
            "ratio": round(total / plain["seconds"], 3),
            "cpu_ratio": round(pipe["cpu_s"] / plain["cpu_s"], 3),
            "rows_per_s": round(rows / total),
            "plain_rows_per_s": round(rows / plain["seconds"]),
            "peak_rss_mb": round(max(r["peak_rss_mb"] for r in pipes), 1),
            "targets": {"ratio_max": 1.5, "bz2_speedup_min": 1.6, "peak_rss_mb_max": 1500},
            "compressed": compressed,
            "loadavg": load,
            "cpus": os.cpu_count(),
            "ingest_stats": pipe["ingest"],
            "geofilter_stats": pipe["geofilter"],
        }, indent=2))
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
