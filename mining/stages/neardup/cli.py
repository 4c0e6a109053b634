"""CLI for `mining neardup`: near-duplicate groups among candidates, copies of landmark images."""

from __future__ import annotations

import argparse
from pathlib import Path

from mining.files.names import NEARDUP, STATS
from mining.settings import options
from mining.flags import add_landmarks_flag, add_progress_flag


def register(sub: argparse._SubParsersAction) -> None:
    from mining.stages.neardup import stage as nd

    p = sub.add_parser(
        "neardup",
        help="near-duplicate groups among candidates and candidates that copy a landmark image",
        description=(
            "Two candidates are near-duplicates when their 64-bit dHash differ in at most "
            "--max-hash-distance bits AND their global descriptors' cosine is at least --min-cosine; "
            "groups are the connected components. A candidate as close to a landmark query or "
            f"database image (landmark thresholds) is a probable landmark. Writes OUT/{NEARDUP} "
            f"and OUT/{STATS}. The thresholds are the manifest's neardup: section (see mining/stages/neardup/stage.py "
            "for the criterion and how the defaults were measured)."
        ),
    )
    p.add_argument("--images", required=True, type=Path, help="`mining download` output folder (jpg/ layout)")
    add_landmarks_flag(p)
    p.add_argument("--descriptors", required=True, type=Path, metavar="DESC/METHOD",
                   help="a global method's folder holding queries/, database/ and candidates/ stores (e.g. DESC/cnn-gem)")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    options.add_flags(p, "neardup")
    p.add_argument("--threads", type=int, default=nd.THREADS, help="threads hashing images (default %(default)s)")
    add_progress_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.stages.neardup import stage as nd

    st = nd.run(images=args.images, landmarks=args.landmarks, descriptors=args.descriptors, out=args.out,
                options=options.from_args(args, "neardup"), threads=args.threads, progress=not args.no_progress)
    print(f"{st['candidates']} candidates: {st['groups']} near-duplicate groups ({st['redundant']} redundant images), "
          f"{st['copies_of_landmark_images']} copies of landmark images: {args.out / NEARDUP}")
    return 0
