"""CLI for `mining select`: scores + review decisions → the final distractor set."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mining.cli import add_input, main_input


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
    add_input(p, "scores", type=Path, metavar="SCORES_DIR", help="output folder of `mining score`")
    p.add_argument("--decisions", required=True, type=Path, help="decisions.parquet from `mining review export`")
    p.add_argument("--candidates", required=True, type=Path, help="candidates Parquet (file or folder) from geofilter")
    p.add_argument("--n", default="1000000", metavar="N|auto",
                   help="distractors to keep (default 1,000,000); auto: from the mined mAP-vs-N curve "
                        "(needs --descriptors; writes OUT/auto_n.json, see mining/evaluate/choose_n.py)")
    p.add_argument("--descriptors", nargs="+", type=Path, default=[], metavar="DESC/METHOD",
                   help="with --n auto: every method's descriptor folder (the curve is measured with each)")
    p.add_argument("--auto-tolerance", type=float, default=0.05, metavar="F",
                   help="with --n auto: mined mAP within (1 + F) x the all-candidates mAP (default 0.05)")
    p.add_argument("--setups", nargs="+", default=["easy", "medium", "hard"], metavar="SETUP",
                   help="with --n auto: the revisited setups the rule must hold for (default: all three)")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--drop-unclear", action="store_true", help="also drop candidates reviewers marked unclear")
    p.add_argument("--landmarks", nargs="+", default=None, metavar="[NAME=]GND",
                   help="gnd_<name>.pkl (or its folder): refuse scores made for another landmark dataset; "
                        "several benchmarks: one each, as `mining score` was given them")
    p.add_argument("--images-root", type=Path, default=None,
                   help="download folder (with its index.parquet): skip candidates whose image is not there; "
                   "the set's paths, photo hashes and sources come from its index")
    p.add_argument("--require-full-res", action="store_true",
                   help="with --images-root: leave out images that only a low_res source (the mirror's ~500 px "
                   "copies) had")
    p.add_argument("--url-host", default=None, help="image host for the URLs (default live.staticflickr.com)")
    p.add_argument("--near-duplicates", type=Path, default=None, metavar="NEARDUP.parquet",
                   help="`mining neardup` output: near-copies of landmark images are kept only when reviewed "
                        "not_landmark, and near-duplicate groups are handled by --near-duplicates-policy")
    p.add_argument("--leak-risk", type=Path, default=None, metavar="LEAKRISK.parquet",
                   help="`mining leakrisk` output: high-risk candidates that no reviewer decided on are left out")
    p.add_argument("--allow-unreviewed-risk", action="store_true",
                   help="with --leak-risk: keep high-risk unreviewed candidates (only count them)")
    p.add_argument("--near-duplicates-policy", choices=["one_per_group", "keep"], default="one_per_group",
                   help="one_per_group (default): keep the best-ranked image of each near-duplicate group; keep: all")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.errors import UserError
    from mining.select import run_select

    scores = main_input(args, "scores")
    n = args.n
    r = None
    if n == "auto":
        if not args.landmarks:
            raise UserError("--n auto needs --landmarks and --descriptors")
        if len(args.landmarks) > 1:
            raise UserError("--n auto measures one benchmark's curve; with several benchmarks give --n")
        from mining.evaluate.choose_n import check_args, run_choose_n
        from mining.select import ranked

        check_args(args.auto_tolerance, args.descriptors, args.setups)
        # select's ranking, evaluate's curve: the CLI joins the two stages
        r = ranked(scores, args.decisions, args.landmarks, args.drop_unclear, args.near_duplicates,
                   args.near_duplicates_policy, args.leak_risk,
                   "allow" if args.allow_unreviewed_risk else "refuse")
        n = run_choose_n(args.landmarks[0], args.descriptors, r.pid[r.order], args.out,
                         tolerance=args.auto_tolerance, setups=args.setups)["n"]
    elif not n.isdigit():
        raise UserError(f"--n must be a positive integer or auto, not {n!r}")
    stats = run_select(scores, args.decisions, args.candidates, args.out, n=int(n),
                       drop_unclear=args.drop_unclear, images_root=args.images_root,
                       landmarks=args.landmarks, url_host=args.url_host, near_duplicates=args.near_duplicates,
                       near_duplicates_policy=args.near_duplicates_policy, leak_risk=args.leak_risk,
                       leak_risk_policy="allow" if args.allow_unreviewed_risk else "refuse", ranking=r,
                       require_full_res=args.require_full_res)
    print(json.dumps({k: stats[k] for k in ("n_selected", "dropped", "warning")}))
    return 0
