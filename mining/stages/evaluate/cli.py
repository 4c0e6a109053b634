"""CLI for `mining evaluate`: retrieval metrics with no / random / mined / all distractors,
or (`--protocol`) a standard benchmark's metrics on a user's own rankings or descriptors."""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import replace
from pathlib import Path

from mining.files.names import DECISIONS, DISTRACTORS, EVALUATION, EVALUATION_MD, SCORES
from mining.settings import options
from mining.flags import add_landmarks_flag, add_progress_flag
from mining.stages.evaluate.protocols.registry import protocol_names


def register(sub: argparse._SubParsersAction) -> None:
    from mining.stages.evaluate.bootstrap import DEFAULT_LEVEL, DEFAULT_SAMPLES, DEFAULT_SEED

    p = sub.add_parser(
        "evaluate",
        help="mAP and mP@1/5/10 with no, random, mined and all distractors (+ leave-one-method-out)",
        description=textwrap.fill(
            "Evaluate every method on the landmark dataset alone, with a random N candidates "
            "(several seeds: mean and std), with the mined N (select's output) and with all "
            "candidates; plus the set selected with each method left out. Exact revisitop "
            f"metrics, computed without ranking the distractors. Writes OUT/{EVALUATION} "
            f"and OUT/{EVALUATION_MD}. With --protocol instead: score your own rankings or "
            "descriptors on a standard benchmark (see PROTOCOL MODE below).", 88
        ),
        epilog=_PROTOCOL_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pipe = p.add_argument_group("pipeline evaluation (required unless --protocol)")
    add_landmarks_flag(pipe, required=False, then="the set is evaluated on each")
    pipe.add_argument("--descriptors", nargs="+", type=Path, metavar="DESC/METHOD",
                      help="method folders holding queries/, database/ and candidates/ stores")
    pipe.add_argument("--scores", type=Path, help=f"`mining score` output folder ({SCORES})")
    pipe.add_argument("--selected", type=Path, help=f"`mining select` output folder ({DISTRACTORS})")
    pipe.add_argument("--out", type=Path, help="output folder")
    p.add_argument("--decisions", type=Path, help=f"review {DECISIONS} (confirmed landmark images are never distractors)")
    options.add_flags(p, "evaluate", manifest_help="a run manifest: its evaluate: section gives the settings below (n: null takes "
                      "select.n when that is a number; a flag given here wins)")
    p.add_argument("--bootstrap-samples", type=int, default=DEFAULT_SAMPLES, metavar="B",
                   help="resamples of the queries for the confidence intervals of every mAP (default %(default)s; 0 = none)")
    p.add_argument("--bootstrap-seed", type=int, default=DEFAULT_SEED, metavar="SEED",
                   help="seed of the resampling (default %(default)s)")
    p.add_argument("--confidence", type=float, default=DEFAULT_LEVEL, metavar="LEVEL",
                   help="interval level (default %(default)s)")
    add_progress_flag(p)
    kit = p.add_argument_group("kit mode: from an evaluation kit alone, no image (docs/formats.md)")
    kit.add_argument("--kit", type=Path, metavar="KIT",
                     help="RELEASE/kit of `mining release --kit`: reproduce the run's table (none and mined N, per "
                          "method and setup) with --landmarks; with --queries, evaluate your own query descriptors")
    kit.add_argument("--method", metavar="M", help="with --kit --queries Q.npy: the kit's method the rows are from")
    own = p.add_argument_group("protocol mode: your own results (see below)")
    own.add_argument("--protocol", choices=protocol_names(),
                     help="score --ranks or descriptors on this benchmark instead of the pipeline evaluation")
    own.add_argument("--gt", type=Path, metavar="PATH", help="the benchmark's ground truth (formats below)")
    own.add_argument("--ranks", type=Path, metavar="PATH", help="your rankings: a .npy or the benchmark's text/CSV form")
    own.add_argument("--queries", type=Path, metavar="Q.npy", help="query descriptors, one row per query (with --kit: "
                     "also a `mining describe --set queries --model KIT/methods/M/distractors` store folder)")
    own.add_argument("--database", type=Path, metavar="X.npy", help="database descriptors, one row per image")
    own.add_argument("--imlist", type=Path, metavar="NAMES.txt", help="database image names, one a line, in index order")
    own.add_argument("--qimlist", type=Path, metavar="NAMES.txt", help="query names, one a line, in column/row order")
    own.add_argument("--json", type=Path, metavar="PATH", help="also write the metrics (and per-query values) as JSON")
    p.set_defaults(func=run)


_PIPELINE = ("landmarks", "descriptors", "scores", "selected", "out")
_OWN = ("gt", "ranks", "queries", "database", "imlist", "qimlist", "json")

_PROTOCOL_HELP = """\
PROTOCOL MODE (docs/protocols.md has the exact definitions)
  mining evaluate --protocol P --gt GT (--ranks R | --database X.npy [--queries Q.npy])
                  [--json OUT.json]
Prints a table (mAP etc. in %, UKBench's score 0-4). Index forms, for every protocol:
  --ranks R.npy       integers, shape (list length, queries): column j = query j's 0-based
                      database indices, best first (revisitop's `ranks`); may be truncated
  --database X.npy    (images, dim) and --queries Q.npy (queries, dim): ranked by dot
                      product (L2-normalise for cosine); equal scores keep index order
P = oxford (Revisited Oxford/Paris, or the original Oxford/Paris protocol):
  --gt gnd_roxford5k.pkl|.mat  revisited: mAP and mP@1/5/10 in Easy/Medium/Hard (or
                      --setups); queries in qimlist order, database indices = imlist
                      order; indices/rows past imlist are distractors (R1M-style)
  --gt gt_files/      original: <q>_good/_ok/_junk/_query.txt; mAP, junk ignored;
                      --ranks RANKED/ (one <q>.txt per query, one image name a line, best
                      first) or a file of `QUERY NAME NAME ...` lines; index forms need
                      --imlist (queries in sorted name order unless --qimlist)
P = gldv2 (Google Landmarks v2):
  --gt retrieval_solution.csv (id,images,Usage; Ignored rows dropped): mAP@100;
                      --ranks submission.csv (id,images: space-separated index ids, best
                      first), or index forms with --imlist (index ids) and --qimlist
                      (test ids)
  --gt recognition_solution.csv (id,landmarks,Usage): GAP from --ranks predictions.csv
                      (id,landmarks = "<label> <confidence>")
P = holidays (INRIA Holidays):
  --gt jpg/ (or a list of image names): NNNNNN.jpg, group = NNNN, first image = query;
                      the query is ignored if returned; every query must be answered;
                      --ranks results.txt (`query.jpg 0 img.jpg 1 img.jpg ...` lines),
                      or index forms over the images in number order (queries: the
                      groups' first images; --database alone takes the query vectors
                      from its rows)
P = ukbench (UKBench):
  --gt full/ (or a list of image names): ukbenchNNNNN.jpg, object = NNNNN // 4; every
                      image is a query; score = mean of the object's 4 images (the query
                      itself included) in the top 4, 0-4; --ranks results.txt (`QUERY
                      NAME NAME NAME NAME ...` lines) or index forms over the images in
                      number order
"""


def run(args: argparse.Namespace) -> int:
    from mining.errors import UserError

    if args.kit is not None:
        return run_kit(args)
    if args.method is not None:
        raise UserError("--method belongs to --kit mode")
    if args.protocol is not None:
        return run_protocol(args)
    given = [f"--{name}" for name in _OWN if getattr(args, name) is not None]
    if given:
        raise UserError(f"{given[0]} belongs to --protocol mode (add --protocol oxford|gldv2|holidays|ukbench)")
    missing = [f"--{name}" for name in _PIPELINE if getattr(args, name) is None]
    if missing:
        raise UserError(f"the following arguments are required: {', '.join(missing)} (or use --protocol)")
    from mining.stages.evaluate.bootstrap import Spec
    from mining.stages.evaluate.stage import Inputs, run

    boot = Spec(args.bootstrap_samples, args.bootstrap_seed, args.confidence) if args.bootstrap_samples else None
    inputs = Inputs(landmarks=args.landmarks, descriptors=args.descriptors, scores=args.scores, selected=args.selected,
                    decisions=args.decisions)
    report = run(inputs=inputs, out=args.out, options=evaluate_options(args), progress=not args.no_progress, boot=boot)
    per = report.get("per_benchmark") or {"": report}
    methods = len(next(iter(per.values()))["methods"])
    where = f" on {len(per)} benchmarks" if len(per) > 1 else ""
    print(f"evaluated {methods} method(s){where} with N = {report['n']}: {args.out / EVALUATION_MD}")
    return 0


def evaluate_options(args: argparse.Namespace) -> options.EvaluateOptions:
    """The evaluate: section's settings; with n: null, the manifest's select.n when it is a
    number (with n: auto, the selected set's size)."""
    settings = options.from_args(args, "evaluate")
    if settings.n is None and args.manifest is not None:
        n = options.from_args(argparse.Namespace(manifest=args.manifest), "select").n
        if isinstance(n, int):
            settings = replace(settings, n=n)
    return settings


def run_protocol(args: argparse.Namespace) -> int:
    from mining.errors import UserError
    from mining.stages.evaluate.protocols.readers import Results
    from mining.stages.evaluate.protocols.report import protocol_table
    from mining.stages.evaluate.stage import run_protocol

    named = {**{name: f"--{name}" for name in (*_PIPELINE, "decisions", "manifest")}, options.dest("evaluate", "n"): "--n"}
    given = [flag for name, flag in named.items() if getattr(args, name) is not None]
    if given:
        raise UserError(f"{given[0]} is for the pipeline evaluation, not --protocol")
    if args.gt is None:
        raise UserError("--protocol needs --gt (the benchmark's ground truth)")
    # the benchmark's own setups, checked by the protocol (not a manifest setting here)
    setups = getattr(args, options.dest("evaluate", "setups")) or options.defaults("evaluate").setups
    results = Results(ranks=args.ranks, queries=args.queries, database=args.database, imlist=args.imlist,
                      qimlist=args.qimlist)
    report = run_protocol(protocol=args.protocol, gt=args.gt, results=results, out=args.json, setups=setups)
    print(protocol_table(report))
    return 0


def run_kit(args: argparse.Namespace) -> int:
    """`mining evaluate --kit`: exit 1 when the kit does not reproduce the run's table to 1e-6."""
    from mining.errors import UserError
    from mining.stages.evaluate.from_kit import markdown
    from mining.stages.evaluate.stage import run_kit

    given = [f"--{name}" for name in ("descriptors", "scores", "selected", "decisions", "protocol", "gt", "ranks",
                                      "database", "imlist", "qimlist", "json") if getattr(args, name) is not None]
    given += [args.flags_evaluate[key] for key in options.given(args, "evaluate")]  # --n, --setups, --random-seeds
    if given:
        raise UserError(f"{given[0]} does not go with --kit (the kit holds the descriptors and the selection)")
    if not args.landmarks:
        raise UserError("--kit needs --landmarks GND (the landmark dataset's ground truth, gnd_<name>.pkl)")
    report = run_kit(kit=args.kit, landmarks=args.landmarks, out=args.out, queries=args.queries, method=args.method)
    print(markdown(report), end="")
    per = report.get("per_benchmark") or {None: report}
    return 0 if all(r.get("reproduced", {"ok": True})["ok"] for r in per.values()) else 1
