"""Benchmark: what the cascade loses, measured (docs/cascade.md).

A finished full run (every method described on every candidate; manifests/demo-small.yaml:
the `small` demo world, ~5,000 candidates, four mining methods) is the reference. For each
shortlist size K, a run of its own (RESULTS-cascade/K) takes the full run's world, images,
near-duplicates and the cheaper methods' stores (hard links: nothing is recomputed), and the
workflow then does the rest with `cascade: {methods: [METHOD], shortlist: K}`: the shortlist,
METHOD described on it, the check, score, review (simulated), select and evaluate. Then the
selection of each K is evaluated again with METHOD's *full* store, the truth the cascade
approximates. Printed, per K:
- the share of the candidates METHOD described, and its describe job's CPU seconds against the
  full run's (the same job);
- what `mining cascade check` estimated (the share of METHOD's score off the shortlist, its
  bound) against the truth (that share computed from the full store);
- `recovered`: the share of the full run's selected N that the cascade run selected too;
- mined − random (Medium, Easy, Hard; mAP points with the bootstrap's interval) for every
  method, with the full stores, and for METHOD also as the cascade run itself reports it.

    nice .venv/bin/python -m benchmarks.cascade --run results/demo-small \\
        --manifest manifests/demo-small.yaml --method cnn-gem-lite2 --shortlist 5 10 25 50 \\
        [--check 300] [--cores 2] [--out cascade.json] [--markdown] [--no-run]
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import yaml

from benchmarks.onnx_global import emit
from mining.datasets.benchmarks import as_list, demo_names, load_all
from mining.files.tables import load_shortlist
from mining.settings.layout import RunLayout
from mining.settings.manifest import load as load_manifest
from mining.settings import options
from mining.stages.cascade.stage import below_positive_scores, run_shortlist

ROOT = Path(__file__).resolve().parent.parent
# what a cascade run takes from the full one, unchanged (the rest it makes itself)
SHARED = ("world", "landmarks", "metadata", "candidates", "images", "neardup")
SETUPS = ("medium", "easy", "hard")


def cpu_seconds(tsv: Path) -> float | None:
    """A Snakemake benchmark file's CPU seconds (summed over its rows)."""
    if not tsv.is_file():
        return None
    with open(tsv, newline="") as f:
        return round(sum(float(r["cpu_time"]) for r in csv.DictReader(f, delimiter="\t")
                         if r.get("cpu_time") not in (None, "", "NA")), 1)


def prepare(full: Path, work: Path, cheap: list[str]) -> None:
    """The cascade run's folder: the full run's shared products and the cheaper methods' stores, hard-linked."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in SHARED:
        subprocess.run(["cp", "-al", str(full / name), str(work / name)], check=True)
    (work / "descriptors").mkdir()
    for m in cheap:
        subprocess.run(["cp", "-al", str(full / "descriptors" / m), str(work / "descriptors" / m)], check=True)
    for tsv in ("download", "neardup"):  # the shared jobs' benchmark files (Snakemake keeps them as outputs)
        src = full / "benchmarks" / f"{tsv}.tsv"
        if src.is_file():
            (work / "benchmarks").mkdir(exist_ok=True)
            shutil.copy2(src, work / "benchmarks" / src.name)


def mined_minus_random(evaluation: dict[str, Any], method: str) -> dict[str, Any]:
    """{setup: [diff, low, high]} in mAP points, from evaluation.json's bootstrap."""
    ci = (evaluation.get("ci") or {}).get(method) or {}
    out = {}
    for s in SETUPS:
        d = (ci.get(s) or {}).get("mined_minus_random")
        if d and d.get("diff") is not None:
            out[s] = [round(100 * d["diff"], 2), round(100 * d["ci"][0], 2), round(100 * d["ci"][1], 2)]
    return out


def selected_ids(run: Path) -> np.ndarray:
    return pq.read_table(RunLayout(str(run)).distractors_table, columns=["photo_id"]).column("photo_id").to_numpy()


def true_missed(full_store: Path, benchmarks: list, datasets: list, shortlist: Path) -> float:
    """The share of METHOD's score (its full store's) that lies on candidates off the shortlist."""
    ids, score = below_positive_scores(full_store, benchmarks, datasets)
    listed, is_check = load_shortlist(shortlist)
    on = np.isin(ids, listed[~is_check])
    total = float(score.sum())
    return round(float(score[~on].sum()) / total, 6) if total else 0.0


def evaluate_full(m: Any, run: Path, full: Path, landmarks: list[str], manifest: Path) -> dict[str, Any]:
    """The cascade run's selection evaluated with every method's full store."""
    L = RunLayout(str(run))
    out = run / "evaluation_full"
    cmd = ["mining", "evaluate", "--manifest", str(manifest), "--landmarks", *landmarks, "--descriptors",
           *[str(full / "descriptors" / d) for d in m.described], "--scores", L.scores, "--selected", L.selected,
           "--decisions", L.decisions, "--out", str(out), "--no-progress"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=_env())
    return json.loads((out / "evaluation.json").read_text())


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def one_size(args: argparse.Namespace, m: Any, full: Path, k: int, landmarks: list[str], benchmarks: list,
             datasets: list) -> dict[str, Any]:
    work = Path(f"{full}-cascade") / str(k)
    cheap = [x for x in m.described if x != args.method]
    if args.no_run:  # only read what a finished run of this K left
        return collect(args, m, full, work, landmarks, benchmarks, datasets, None)
    prepare(full, work, cheap)
    doc = yaml.safe_load(args.manifest.read_text())
    doc["results"] = str(work)
    doc["cascade"] = {"methods": [args.method], "shortlist": k, "check": args.check, "max_missed": 1.0}
    manifest = work / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
    old = (full / "world" / "world.json").stat().st_mtime - 60  # older than the shared products: nothing reruns
    os.utime(manifest, (old, old))
    L = RunLayout(str(work))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(args.cores), "--config", f"manifest={manifest}",
                    "--", L.evaluation_json, L.distractors_txt], cwd=ROOT, check=True, env=_env(),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = round(time.perf_counter() - t0, 1)
    return collect(args, m, full, work, landmarks, benchmarks, datasets, wall)


def collect(args: argparse.Namespace, m: Any, full: Path, work: Path, landmarks: list[str], benchmarks: list,
            datasets: list, wall: float | None) -> dict[str, Any]:
    """One K's figures from its finished run (its selection evaluated with the full stores once)."""
    L = RunLayout(str(work))
    manifest = work / "manifest.yaml"
    short = json.loads(Path(L.shortlist_stats).read_text())
    check = json.loads(Path(L.cascade_check).read_text())["methods"][args.method]
    own = json.loads(Path(L.evaluation_json).read_text())
    done = work / "evaluation_full" / "evaluation.json"
    ev = json.loads(done.read_text()) if done.is_file() else evaluate_full(m, work, full, landmarks, manifest)
    sel_full, sel = selected_ids(full), selected_ids(work)
    return {
        "shortlist": short["per_landmark"], "described": short["described"], "candidates": short["candidates"], "share": short["share"],
        "describe_cpu_s": cpu_seconds(work / "benchmarks" / "describe" / f"{args.method}_candidates.tsv"),
        "check": {key: check[key] for key in ("described", "escaped", "missed", "missed_upper")},
        "true_missed": true_missed(full / "descriptors" / args.method, benchmarks, datasets, Path(L.shortlist)),
        "recovered": round(np.intersect1d(sel, sel_full).size / max(1, sel_full.size), 4),
        "mined_minus_random": {meth: mined_minus_random(ev, meth) for meth in ev["methods"]},
        "as_reported": {args.method: mined_minus_random(own, args.method)},
        "wall_s": wall,
    }


def curve(args: argparse.Namespace, m: Any, full: Path, landmarks: list[str], benchmarks: list,
          datasets: list) -> list[dict[str, Any]]:
    """Without running anything: per K, the shortlist's share of the pool (by `mining cascade
    shortlist`'s own code), the true share of METHOD's score off it (from the full store), and
    the share of the full run's top N by score (review aside) that stays in the top N when
    METHOD's score is dropped off the shortlist."""
    cheap = [full / "descriptors" / x for x in m.methods if x != args.method]
    scores = pq.read_table(RunLayout(str(full)).scores_table, columns=["photo_id", "score", f"score_{args.method}"])
    pid, total = scores.column("photo_id").to_numpy(), scores.column("score").to_numpy()
    own = np.nan_to_num(scores.column(f"score_{args.method}").to_numpy())
    n = selected_ids(full).size
    top = set(pid[np.lexsort((pid, -total))][:n].tolist())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in args.curve:
            opts = options.build("cascade", {"methods": [args.method], "shortlist": k, "check": 0})
            st = run_shortlist(landmarks=landmarks, descriptors=cheap, out=Path(tmp), options=opts, progress=False)
            listed, _ = load_shortlist(Path(tmp) / "shortlist.parquet")
            cut = total - np.where(np.isin(pid, listed), 0.0, own)  # the method's part gone off the shortlist
            mine = set(pid[np.lexsort((pid, -cut))][:n].tolist())
            rows.append({"shortlist": k, "shortlisted": st["shortlisted"], "share": st["share"],
                         "true_missed": true_missed(full / "descriptors" / args.method, benchmarks, datasets,
                                                    Path(tmp) / "shortlist.parquet"),
                         "top_n_recovered": round(len(top & mine) / max(1, n), 4)})
    return rows


def markdown(res: dict[str, Any]) -> str:
    meths = list(res["full"]["mined_minus_random"])
    head = ("| shortlist per landmark | described | describe CPU s | missed (check, bound) | missed (truth) | "
            "recovered | " + " | ".join(f"{x} Medium m−r" for x in meths) + f" | {res['method']} as reported |")
    lines = [head, "|" + "---|" * (7 + len(meths))]
    f = res["full"]
    lines.append(f"| all (full run) | {f['candidates']:,} (100 %) | {f['describe_cpu_s']} | – | 0 | 1.000 | "
                 + " | ".join(_ci(f["mined_minus_random"][x].get("medium")) for x in meths) + " | – |")
    for r in res["sizes"]:
        lines.append(f"| {r['shortlist']} | {r['described']:,} ({100 * r['share']:.1f} %) | {r['describe_cpu_s']} | "
                     f"{100 * r['check']['missed']:.2f} % (≤ {100 * r['check']['missed_upper']:.2f} %) | "
                     f"{100 * r['true_missed']:.2f} % | {r['recovered']:.3f} | "
                     + " | ".join(_ci(r["mined_minus_random"].get(x, {}).get("medium")) for x in meths)
                     + f" | {_ci(r['as_reported'][res['method']].get('medium'))} |")
    return "\n".join(lines)


def _ci(v: list[float] | None) -> str:
    return f"{v[0]:+.2f} [{v[1]:+.2f}, {v[2]:+.2f}]" if v else "–"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, default=ROOT / "results" / "demo-small", help="the finished full run")
    p.add_argument("--manifest", type=Path, default=ROOT / "manifests" / "demo-small.yaml", help="its manifest")
    p.add_argument("--method", default="cnn-gem-lite2", help="the method to cascade (a mining method of the run)")
    p.add_argument("--shortlist", type=int, nargs="+", default=[5, 10, 25, 50], help="shortlist sizes K to measure")
    p.add_argument("--check", type=int, default=300, help="the check sample's size (cascade.check)")
    p.add_argument("--curve", type=int, nargs="*", default=[5, 10, 20, 40, 80, 160],
                   help="shortlist sizes whose share and true missed share are computed without a run")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    p.add_argument("--markdown", action="store_true", help="print a table after the JSON")
    p.add_argument("--no-run", action="store_true", help="only read the finished runs of each K")
    args = p.parse_args(argv)
    m = load_manifest(args.manifest)
    full = args.run.resolve()
    if args.method not in m.methods:
        raise SystemExit(f"--method {args.method}: not a mining method of {args.manifest}")
    lay = RunLayout(str(full))
    bench = m.benchmarks([(c, lay.world_city_gnd(c)) for c in demo_names(m.demo["benchmarks"])] if m.demo else ())
    landmarks = [b.gnd for b in bench] if len(bench) == 1 else [f"{b.name}={b.gnd}" for b in bench]
    benchmarks = as_list(landmarks)
    datasets = load_all(benchmarks)
    full_eval = json.loads(Path(RunLayout(str(full)).evaluation_json).read_text())
    res: dict[str, Any] = {
        "run": str(args.run), "manifest": str(args.manifest), "method": args.method, "check": args.check,
        "full": {"candidates": int(pq.read_metadata(RunLayout(str(full)).scores_table).num_rows),
                 "describe_cpu_s": cpu_seconds(full / "benchmarks" / "describe" / f"{args.method}_candidates.tsv"),
                 "mined_minus_random": {x: mined_minus_random(full_eval, x) for x in full_eval["methods"]}},
        "curve": curve(args, m, full, landmarks, benchmarks, datasets),
        "sizes": [one_size(args, m, full, k, landmarks, benchmarks, datasets) for k in args.shortlist],
    }
    emit(res, args.out)
    if args.markdown:
        print(markdown(res))
    return res


if __name__ == "__main__":
    main()
