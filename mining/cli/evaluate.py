"""CLI for `mining evaluate`: retrieval metrics with no / random / mined / all distractors."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help="mAP and mP@1/5/10 with no, random, mined and all distractors (+ leave-one-method-out)",
        description=(
            "Evaluate every method on the landmark dataset alone, with a random N candidates "
            "(several seeds: mean and std), with the mined N (select's output) and with all "
            "candidates; plus the set selected with each method left out. Exact revisitop "
            "metrics, computed without ranking the distractors. Writes OUT/evaluation.json "
            "and OUT/evaluation.md."
        ),
    )
    p.add_argument("--landmarks", required=True, type=Path, help="gnd_<name>.pkl (or its folder)")
    p.add_argument("--descriptors", required=True, nargs="+", type=Path, metavar="DESC/METHOD",
                   help="method folders holding queries/, database/ and candidates/ stores")
    p.add_argument("--scores", required=True, type=Path, help="`mining score` output folder (scores.parquet)")
    p.add_argument("--selected", required=True, type=Path, help="`mining select` output folder (distractors.parquet)")
    p.add_argument("--decisions", type=Path, help="review decisions.parquet (confirmed landmark images are never distractors)")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--n", type=int, help="number of distractors (default: size of the selected set; capped at all candidates)")
    p.add_argument("--random-seeds", nargs="+", type=int, default=[0, 1, 2], metavar="SEED")
    p.add_argument("--setups", nargs="+", default=["easy", "medium", "hard"], metavar="SETUP",
                   help="revisited setups: easy, medium, hard (default: all three, as the revisited protocol reports them)")
    p.add_argument("--bootstrap-samples", type=int, default=2000, metavar="B",
                   help="resamples of the queries for the confidence intervals of every mAP (default 2000; 0 = none)")
    p.add_argument("--bootstrap-seed", type=int, default=0, metavar="SEED", help="seed of the resampling (default 0)")
    p.add_argument("--confidence", type=float, default=0.95, metavar="LEVEL", help="interval level (default 0.95)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.evaluate.bootstrap import Spec
    from mining.evaluate.experiment import run_evaluate

    boot = Spec(args.bootstrap_samples, args.bootstrap_seed, args.confidence) if args.bootstrap_samples else None
    report = run_evaluate(args.landmarks, args.descriptors, args.scores, args.selected, args.decisions, args.out,
                          n=args.n, seeds=args.random_seeds, setups=args.setups, progress=not args.no_progress,
                          boot=boot)
    print(f"evaluated {len(report['methods'])} method(s) with N = {report['n']}: {args.out / 'evaluation.md'}")
    return 0
