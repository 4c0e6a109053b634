"""CLI for `mining landmarks check`: validate a landmark dataset and show its landmarks."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "landmarks",
        help="check a landmark dataset (gnd_<name>.pkl + jpg/) and show the landmarks found in it",
        description="Landmark datasets in revisitop's format. `mining landmarks check GND` runs first in the workflow.",
    )
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    c = verbs.add_parser(
        "check",
        help="validate a gnd file and its images; print its landmarks",
        description=(
            "Validates a landmark dataset: keys, index ranges (easy/hard/junk/ok inside imlist), each query's "
            "bbx (4 finite numbers, x1 < x2, y1 < y2), query and database images present in jpg/ beside the "
            "file, queries without positives, and landmark groups that look wrong. Prints the landmarks: a "
            "query's `landmark` key when the file has one, otherwise the queries whose positives (easy ∪ hard) "
            "are the same set or nearly so (Jaccard ≥ 0.5). Exits 2 naming the query and the key when the "
            "file is broken; warnings alone exit 0."
        ),
    )
    c.add_argument("gnd", type=Path, metavar="GND", help="gnd_<name>.pkl (or .mat, or the folder holding the .pkl)")
    c.add_argument("--json", action="store_true",
                   help='print {"landmarks": [{"name", "queries"}], "queries", "database", "problems"} as JSON')
    c.add_argument("--no-images", action="store_true", help="do not look for the images on disk")
    c.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    from mining.landmarks import check_dataset

    report = check_dataset(args.gnd, images=not args.no_images)
    print(json.dumps(report.as_dict(), indent=1, ensure_ascii=False) if args.json else report.text(args.gnd))
    report.raise_errors(args.gnd)
    return 0
