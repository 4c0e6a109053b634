"""CLI for `mining cascade`: an expensive method described only on a shortlist, and the check of it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mining.files.names import CASCADE_CHECK, SHORTLIST, SHORTLIST_STATS
from mining.flags import add_landmarks_flag, add_progress_flag
from mining.settings import options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cascade",
        help="describe an expensive method only for the candidates cheaper methods rank high (and check it)",
        description=(
            f"`shortlist`: the cheaper methods' stores → OUT/{SHORTLIST}: per method and landmark the "
            "--shortlist candidates most similar to its queries, their union, and --check more drawn at random "
            f"from the rest (describe the expensive method with `mining describe --shortlist OUT/{SHORTLIST}`). "
            f"`check`: the expensive method's stores → OUT/{CASCADE_CHECK}: the share of the random check candidates "
            "that outrank a positive (what the shortlist missed), with a one-sided upper bound; refused above "
            "--max-missed (see mining/stages/cascade/stage.py, docs/cascade.md)."
        ),
    )
    verbs = p.add_subparsers(dest="cascade_command", required=True, metavar="ACTION")
    sh = verbs.add_parser("shortlist", help="the cheaper methods' rankings → the shortlist to describe")
    add_landmarks_flag(sh)
    sh.add_argument("--descriptors", required=True, nargs="+", type=Path, metavar="DESC/METHOD",
                    help="the cheaper methods' descriptor folders (cascade.by)")
    sh.add_argument("--out", required=True, type=Path, help=f"cascade folder ({SHORTLIST}, {SHORTLIST_STATS})")
    options.add_flags(sh, "cascade", keys=["shortlist", "check", "seed"])
    add_progress_flag(sh)
    sh.set_defaults(func=run_shortlist)
    ch = verbs.add_parser("check", help="the expensive method's stores → the share of distractors the shortlist missed")
    add_landmarks_flag(ch)
    ch.add_argument("--descriptors", required=True, nargs="+", type=Path, metavar="DESC/METHOD",
                    help="the cascaded methods' descriptor folders (cascade.methods)")
    ch.add_argument("--shortlist", required=True, type=Path, help=f"the {SHORTLIST} they were described with")
    ch.add_argument("--out", required=True, type=Path, help=f"cascade folder ({CASCADE_CHECK})")
    options.add_flags(ch, "cascade", keys=["max_missed", "confidence"])
    ch.set_defaults(func=run_check)


def run_shortlist(args: argparse.Namespace) -> int:
    from mining.stages.cascade.stage import run_shortlist

    st = run_shortlist(landmarks=args.landmarks, descriptors=args.descriptors, out=args.out,
                       options=options.from_args(args, "cascade"), progress=not args.no_progress)
    print(json.dumps({k: st[k] for k in ("candidates", "shortlisted", "check", "described", "share")}))
    return 0


def run_check(args: argparse.Namespace) -> int:
    from mining.stages.cascade.stage import run_check

    r = run_check(landmarks=args.landmarks, descriptors=args.descriptors, shortlist=args.shortlist, out=args.out,
                  options=options.from_args(args, "cascade"))
    print(json.dumps(r["methods"]))
    return 0
