"""CLI for `mining select`: scores + review decisions → the final distractor set."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mining.files.names import DECISIONS, DISTRACTORS, DISTRACTORS_TXT, IMAGE_INDEX, STATS
from mining.settings import options
from mining.flags import add_landmarks_flag


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "select",
        help="keep the N highest-scoring candidates that reviewers did not confirm as landmarks",
        description=(
            "Drops every candidate confirmed `landmark` (for any landmark; with --drop-unclear also "
            "`unclear` ones), keeps the N highest scores (ties: lower photo id first) and writes "
            f"OUT/{DISTRACTORS_TXT} (paths relative to the image root, as revisitop1m.txt), "
            f"OUT/{DISTRACTORS}, OUT/ATTRIBUTION.md, OUT/ATTRIBUTION.csv and OUT/{STATS}."
        ),
    )
    p.add_argument("--scores", required=True, type=Path, metavar="SCORES_DIR", help="output folder of `mining score`")
    p.add_argument("--decisions", required=True, type=Path, help=f"{DECISIONS} from `mining review export`")
    p.add_argument("--candidates", required=True, type=Path, help="candidates Parquet (file or folder) from geofilter")
    p.add_argument("--descriptors", nargs="+", type=Path, default=[], metavar="DESC/METHOD",
                   help="with --n auto: every method's descriptor folder (the curve is measured with each)")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    add_landmarks_flag(p, required=False, then="scores made for another landmark dataset are refused")
    p.add_argument("--images-root", type=Path, default=None,
                   help=f"download folder (with its {IMAGE_INDEX}): skip candidates whose image is not there; "
                   "the set's paths, photo hashes and sources come from its index")
    p.add_argument("--url-host", default=None, help="image host for the URLs (default live.staticflickr.com)")
    p.add_argument("--near-duplicates", type=Path, default=None, metavar="NEARDUP.parquet",
                   help="`mining neardup` output: near-copies of landmark images are kept only when reviewed "
                        "not_landmark, and near-duplicate groups are handled by --select-near-duplicates")
    p.add_argument("--leak-risk", type=Path, default=None, metavar="LEAKRISK.parquet",
                   help="`mining leakrisk` output: high-risk candidates that no reviewer decided on are left out")
    # after the input files: near_duplicates and leak_risk, whose --key is a file's, are --select-<key>
    options.add_flags(p, "select")
    # n: auto's curve is measured on evaluate's setups
    options.add_flags(p, "evaluate", keys=["setups"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.auto_n import select
    from mining.stages.select.stage import Inputs

    inputs = Inputs(scores=args.scores, decisions=args.decisions, candidates=args.candidates,
                    landmarks=args.landmarks, images_root=args.images_root, near_duplicates=args.near_duplicates,
                    leak_risk=args.leak_risk)
    stats = select(inputs=inputs, out=args.out, options=options.from_args(args, "select"),
                   descriptors=args.descriptors, setups=options.from_args(args, "evaluate").setups,
                   url_host=args.url_host)
    print(json.dumps({k: stats[k] for k in ("n_selected", "dropped", "warning")}))
    return 0
