"""CLI for `mining score`: descriptor stores → per-candidate distractor scores + review queue."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mining.files.names import REVIEW_QUEUE, SCORES, STATS
from mining.settings import options
from mining.flags import add_landmarks_flag, add_progress_flag


def register(sub: argparse._SubParsersAction) -> None:
    from mining.stages.score.loop import DEFAULT_CHUNK

    p = sub.add_parser(
        "score",
        help="score every candidate by the fraction of landmark positives it outranks",
        description=(
            "For every method and landmark query, the fraction of the query's positives (Easy ∪ Hard) "
            "whose similarity is below the candidate's (a tie counts one half), summed over queries and "
            f"methods. Writes OUT/{SCORES}, OUT/{REVIEW_QUEUE} (top K per landmark), OUT/{STATS}."
        ),
    )
    add_landmarks_flag(p)
    p.add_argument("--descriptors", required=True, nargs="+", type=Path, metavar="DESC/METHOD",
                   help="one folder per method holding queries/, database/ and candidates/ stores")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    options.add_flags(p, "review", keys=["budget", "min_per_landmark"])
    p.add_argument("--chunk", type=int, default=DEFAULT_CHUNK, metavar="N",
                   help="candidates per processing chunk (memory vs. overhead; default %(default)s; "
                        "keep it ≥ 2048 × threads so every thread has work); the result does not depend on it")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="threads for the similarities and the counting (default: the CPUs this process may "
                        "use); the result does not depend on it")
    p.add_argument("--candidates", type=Path, default=None, metavar="CANDIDATES",
                   help="candidates Parquet (date_taken): a photo taken before a landmark's `since` date (in the "
                        "ground truth) stays out of that landmark's review queue (mining/evidence/since.py)")
    p.add_argument("--near-duplicates", type=Path, default=None, metavar="NEARDUP.parquet",
                   help="`mining neardup` output: each landmark's probable landmark images (near-copies of its "
                        "images) head its review queue, marked probable_landmark")
    options.add_flags(p, "score")
    add_progress_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.stages.score import Inputs, run

    inputs = Inputs(landmarks=args.landmarks, descriptors=args.descriptors, near_duplicates=args.near_duplicates,
                    candidates=args.candidates)
    stats = run(inputs=inputs, out=args.out, options=options.from_args(args, "score"),
                review=options.from_args(args, "review"), chunk=args.chunk, threads=args.threads,
                progress=not args.no_progress)
    summary = {k: stats[k] for k in ("candidates", "candidates_missing_some_method", "queries_with_positives",
                                     "review_queue_rows")}
    print(json.dumps(summary))
    return 0
