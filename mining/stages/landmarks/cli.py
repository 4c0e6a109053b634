"""CLI for `mining landmarks check` (validate a landmark dataset and show its landmarks) and
`mining landmarks build` (make one from a CSV table of annotations)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "landmarks",
        help="build a landmark dataset (gnd_<name>.pkl + jpg/) from a CSV table, or check one and show its landmarks",
        description="Landmark datasets in revisitop's format. `mining landmarks build TABLE --out DIR` makes one "
                    "from a table of annotations; `mining landmarks check GND` runs first in the workflow.",
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
    c.add_argument("gnd", nargs="+", metavar="[NAME=]GND",
                   help="gnd_<name>.pkl (or .mat, or the folder holding the .pkl); several benchmarks of one run: "
                        "each is checked, and together (distinct names, no ground truth twice); NAME defaults to <name>")
    c.add_argument("--json", action="store_true",
                   help='print {"landmarks": [{"name", "queries"}], "queries", "database", "problems"} as JSON')
    c.add_argument("--no-images", action="store_true", help="do not look for the images on disk")
    c.set_defaults(func=run_check)
    b = verbs.add_parser(
        "build",
        help="make a landmark dataset (gnd_<name>.pkl + jpg/) from a CSV table of annotations",
        description=(
            "Builds a revisitop ground truth from one CSV table with the columns image, landmark, role "
            "(query, easy, hard, junk or negative), query (optional: the label holds for that query only) and "
            "x1, y1, x2, y2 (a query's box, pixels of the image as shown). Writes OUT/jpg/<image name>.jpg "
            "(copies) and OUT/gnd_<name>.pkl, then runs `mining landmarks check` on it. A bad row (image "
            "missing, not a JPEG or not decoding whole, a name that is not a plain file name, a box outside its "
            "image or under 8 px at a 768-px long side, an unknown landmark or query, a duplicate query, an "
            "image labelled twice) exits 2 naming the file and line before anything is written. "
            "The table's format: docs/formats.md."
        ),
    )
    b.add_argument("table", type=Path, help="the annotations, a CSV file (UTF-8, header row)")
    b.add_argument("--out", type=Path, required=True, help="output folder (gnd_<name>.pkl and jpg/ go there)")
    b.add_argument("--name", help="the benchmark's name: gnd_<name>.pkl (default: OUT's folder name)")
    b.add_argument("--images", type=Path, help="folder the table's relative image paths start from "
                                                "(default: the table's folder)")
    b.set_defaults(func=run_build)


def run_check(args: argparse.Namespace) -> int:
    from mining.stages.landmarks.stage import run_check

    checked = run_check(gnd=args.gnd, images=not args.no_images)
    print(json.dumps(checked.doc, indent=1, ensure_ascii=False) if args.json else checked.text)
    checked.raise_errors()
    return 0


def run_build(args: argparse.Namespace) -> int:
    from mining.stages.landmarks.stage import run_build

    gnd, report = run_build(table=args.table, out=args.out, name=args.name, images=args.images)
    print(report.text(gnd))
    report.raise_errors(gnd)
    return 0
