"""CLI for `mining report`: one static HTML file with the run's funnel, plots and evaluation."""

from __future__ import annotations

import argparse
from pathlib import Path

from mining.files.names import AUDIT, CANDIDATES, DECISIONS, DISTRACTORS, EVALUATION, IMAGES_SUMMARY, SCORES, STATS

_INPUTS = {
    "metadata": f"ingest output folder ({STATS}, part-*.parquet)",
    "candidates": f"geofilter output folder ({STATS}, {CANDIDATES})",
    "images": f"download output folder ({IMAGES_SUMMARY}, jpg/)",
    "descriptors": "DESC folder holding <method>/<set>/ stores",
    "scores": f"score output folder ({SCORES})",
    "decisions": f"review {DECISIONS}",
    "selected": f"select output folder ({DISTRACTORS})",
    "evaluation": f"evaluate's {EVALUATION}",
    "audit": f"mining audit's output folder ({AUDIT}: the measured leak rate)",
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
