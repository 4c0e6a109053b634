"""CLI for `mining select`: scores + review decisions → the final distractor set."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "select",
        help="keep the N highest-scoring candidates that reviewers did not confirm as landmarks",
        description=(
            "Drops every candidate confirmed `landmark` (for any landmark; with --drop-unclear also "
            "`unclear` ones), keeps the N highest scores (ties: lower photo id first) and writes "
            "OUT/distractors.txt (paths relative to the image root, as revisitop1m.txt), "
            "OUT/distractors.parquet, OUT/ATTRIBUTION.md, OUT/ATTRIBUTION.csv and OUT/stats.json."
        ),
    )
    p.add_argument("scores", type=Path, metavar="SCORES_DIR", help="output folder of `mining score`")
    p.add_argument("--decisions", required=True, type=Path, help="decisions.parquet from `mining review export`")
    p.add_argument("--candidates", required=True, type=Path, help="candidates Parquet (file or folder) from geofilter")
    p.add_argument("--n", type=int, default=1_000_000, help="distractors to keep (default 1,000,000)")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--drop-unclear", action="store_true", help="also drop candidates reviewers marked unclear")
    p.add_argument("--landmarks", type=Path, default=None,
                   help="gnd_<name>.pkl (or its folder): refuse scores made for another landmark dataset")
    p.add_argument("--images-root", type=Path, default=None,
                   help="download root: skip candidates whose image file is not there")
    p.add_argument("--url-host", default=None, help="image host for the URLs (default live.staticflickr.com)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.select import run_select

    stats = run_select(args.scores, args.decisions, args.candidates, args.out, n=args.n,
                       drop_unclear=args.drop_unclear, images_root=args.images_root,
                       landmarks=args.landmarks, url_host=args.url_host)
    print(json.dumps({k: stats[k] for k in ("n_selected", "dropped", "warning")}))
    return 0
