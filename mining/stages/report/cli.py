"""CLI for `mining report`: one static HTML file with the run's funnel, plots and evaluation."""

from __future__ import annotations

import argparse
from pathlib import Path

_INPUTS = {
    "metadata": "ingest output folder (stats.json, part-*.parquet)",
    "candidates": "geofilter output folder (stats.json, candidates.parquet)",
    "images": "download output folder (summary.json, jpg/)",
    "descriptors": "DESC folder holding <method>/<set>/ stores",
    "scores": "score output folder (scores.parquet)",
    "decisions": "review decisions.parquet",
    "selected": "select output folder (distractors.parquet)",
    "evaluation": "evaluate's evaluation.json",
    "audit": "mining audit's output folder (audit.json: the measured leak rate)",
    "landmarks": "gnd_<name>.pkl or its folder (query crops)",
    "benchmarks": "folder of snakemake benchmark TSVs (timings)",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="single static HTML report (funnel, geotags, scores, hardest distractors, mAP, timings)",
        description=(
            "Build one self-contained HTML file (images embedded). Inputs come from a run folder "
            "laid out like the workflow's (--run RUN) and/or explicit paths; a missing input makes "
            "its section say 'not available'."
        ),
    )
    p.add_argument("--run", type=Path, help="run folder (RUN/metadata, RUN/candidates, ...)")
    p.add_argument("--manifest", type=Path, help="the run's manifest (shown as settings; landmarks/decisions paths)")
    for name, text in _INPUTS.items():
        p.add_argument(f"--{name}", type=Path, help=text)
    p.add_argument("--out", required=True, type=Path, help="output HTML file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.stages.report.stage import inputs_from_run, run

    inputs = inputs_from_run(args.run, manifest=args.manifest, **{k: getattr(args, k) for k in _INPUTS})
    missing = run(inputs=inputs, out=args.out)["missing"]
    print(f"wrote {args.out}" + (f" (not available: {', '.join(missing)})" if missing else ""))
    return 0
