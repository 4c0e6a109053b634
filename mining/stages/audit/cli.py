"""CLI for `mining audit`: a reviewed random sample of the selection → its leak rate with a bound."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mining.files.names import AUDIT, AUDIT_PLAN, AUDIT_QUEUE, DECISIONS, DISTRACTORS, NEARDUP
from mining.settings import options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit",
        help="measure the selection's leak rate: draw a sample to review, then estimate with a bound",
        description=(
            "`draw`: a seeded random sample of the selection, stratified by rank, sized from the target "
            f"(0 landmark images found bounds the rate at --max-leak-rate) → OUT/{AUDIT_QUEUE} (import "
            f"it with `mining review import` into its own database) and OUT/{AUDIT_PLAN}. `estimate`: the "
            f"exported answers → OUT/{AUDIT} (share of landmark images, one-sided upper bound, method) and "
            f"OUT/{DISTRACTORS}/.txt: the selection less the leaks found and their near-duplicates "
            "(see mining/stages/audit/stage.py, docs/protocols.md)."
        ),
    )
    verbs = p.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    dr = verbs.add_parser("draw", help="draw the audit sample (a review queue of its own)")
    dr.add_argument("--selected", required=True, type=Path, metavar="SELECTED", help="output folder of `mining select`")
    dr.add_argument("--out", required=True, type=Path, help="audit folder")
    options.add_flags(dr, "audit", keys=["max_leak_rate", "confidence", "seed"])
    dr.set_defaults(func=run_draw)
    es = verbs.add_parser("estimate", help="the answers → leak rate, bound, and the set less what was found")
    es.add_argument("--selected", required=True, type=Path, metavar="SELECTED", help="output folder of `mining select`")
    es.add_argument("--decisions", required=True, type=Path,
                    help=f"the audit review's {DECISIONS} (`mining review export` of its database)")
    es.add_argument("--audit", required=True, type=Path, help=f"the folder `mining audit draw` wrote ({AUDIT_PLAN})")
    es.add_argument("--near-duplicates", type=Path, default=None,
                    help=f"NEARDUP/{NEARDUP}: a leak's near-duplicate group leaves the set with it")
    es.add_argument("--out", required=True, type=Path, help=f"output folder ({AUDIT}, {DISTRACTORS}/.txt)")
    es.set_defaults(func=run_estimate)


def run_draw(args: argparse.Namespace) -> int:
    from mining.stages.audit.stage import run_draw

    plan = run_draw(selected=args.selected, out=args.out, options=options.from_args(args, "audit"))
    print(f"audit sample: {sum(plan['sample'])} of {plan['set_size']} selected images "
          f"({'all of them' if plan['census'] else 'strata ' + str(plan['sample'])}): {args.out / AUDIT_QUEUE}")
    return 0


def run_estimate(args: argparse.Namespace) -> int:
    from mining.stages.audit.stage import run_estimate

    r = run_estimate(selected=args.selected, decisions=args.decisions, audit=args.audit, out=args.out,
                     near_duplicates=args.near_duplicates)
    print(json.dumps({k: r[k] for k in ("sampled", "leaks", "estimate", "upper", "method", "removed", "released_upper", "passes")}))
    return 0
