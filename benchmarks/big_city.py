"""Benchmark: the whole pipeline on a generated city with many landmarks (manifests/demo-city100.yaml:
100 landmarks, 500 queries, 600 candidates, cnn-gem alone, a review budget of 1,000 items).

Runs the workflow (unless --no-run: then it only reads a finished run), then prints one JSON
object: per rule (describe: per method and set) its wall and CPU seconds from the Snakemake
benchmark files, the world's size, and how the review budget was spent (from
SCORES/stats.json: items per phase, the per-landmark distribution). docs/big-city.md holds a run.

    nice .venv/bin/python -m benchmarks.big_city [--manifest manifests/demo-city100.yaml] [--cores 2]
        [--no-run] [--out big_city.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from mining.settings.manifest import load as load_manifest

ROOT = Path(__file__).resolve().parent.parent


def stage_costs(bench_dir: Path) -> dict[str, dict[str, float]]:
    """Per benchmark file (a rule, or `describe/<method>_<set>`): wall and CPU seconds summed
    over its rows (one per job that wrote it)."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"wall_s": 0.0, "cpu_s": 0.0, "jobs": 0})
    for tsv in sorted(bench_dir.rglob("*.tsv")):
        rule = str(tsv.relative_to(bench_dir).with_suffix(""))
        with open(tsv, newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                out[rule]["wall_s"] = round(out[rule]["wall_s"] + float(row["s"]), 2)
                cpu = row.get("cpu_time", "NA")
                out[rule]["cpu_s"] = round(out[rule]["cpu_s"] + (float(cpu) if cpu not in ("", "NA") else 0.0), 2)
                out[rule]["jobs"] += 1
    return dict(out)


def budget_spent(scores_stats: dict) -> dict | None:
    """The review budget's spending, with the per-landmark distribution summarised."""
    b = scores_stats.get("review_budget")
    if not b:
        return None
    per = list(b["per_landmark"].values())
    return {k: b[k] for k in ("budget", "min_per_landmark", "items", "available", "first_items", "risk_items",
                              "risk_cutoff", "landmarks_with_items")} | {
        "items_per_landmark": {"min": min(per), "median": statistics.median(per), "max": max(per),
                               "landmarks": len(per)},
        "top_landmarks": sorted(b["per_landmark"].items(), key=lambda kv: (-kv[1], kv[0]))[:5]}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--manifest", type=Path, default=ROOT / "manifests" / "demo-city100.yaml")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--no-run", action="store_true", help="only read the finished run's files")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    m = load_manifest(args.manifest)
    results = Path(m["results"]) if Path(m["results"]).is_absolute() else ROOT / m["results"]
    wall = None
    if not args.no_run:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(args.cores), "--config",
                        f"manifest={args.manifest}"], cwd=ROOT, check=True)
        wall = round(time.perf_counter() - t0, 1)
    world = json.loads((results / "world" / "world.json").read_text())
    scores = json.loads((results / "scores" / "stats.json").read_text())
    costs = stage_costs(results / "benchmarks")
    res = {
        "manifest": str(args.manifest), "workflow_wall_s": wall,
        "world": {k: world["counts"][k] for k in ("landmarks", "queries", "database", "candidate_images")},
        "candidates_scored": scores["candidates"], "review_queue_rows": scores["review_queue_rows"],
        "stages": costs,
        "total": {"wall_s": round(sum(c["wall_s"] for c in costs.values()), 1),
                  "cpu_s": round(sum(c["cpu_s"] for c in costs.values()), 1)},
        "review_budget": budget_spent(scores),
    }
    text = json.dumps(res, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return res


if __name__ == "__main__":
    main()
