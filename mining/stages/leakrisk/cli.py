"""CLI for `mining leakrisk`: each candidate's risk of showing a landmark, and who is outside the queue."""

from __future__ import annotations

import argparse
from pathlib import Path

from mining.files.names import LEAKRISK, REVIEW_QUEUE, STATS
from mining.flags import add_landmarks_flag


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "leakrisk",
        help="rank candidates by their risk of showing a landmark; count high-risk ones outside the review queue",
        description=(
            "risk = the best cosine (a global descriptor) of a candidate to any query crop or positive "
            "(Easy ∪ Hard) of a landmark; high when it reaches that landmark's threshold (the median "
            "cosine of its positives to their nearest other image of the landmark). Writes "
            f"OUT/{LEAKRISK} and OUT/{STATS} (high_risk_outside_queue); `mining select --leak-risk` "
            "leaves out high-risk candidates nobody reviewed (see mining/stages/leakrisk/stage.py)."
        ),
    )
    add_landmarks_flag(p)
    p.add_argument("--descriptors", required=True, type=Path, metavar="DESC/METHOD",
                   help="a global method's folder holding queries/, database/ and candidates/ stores (e.g. DESC/cnn-gem)")
    p.add_argument("--scores", required=True, type=Path, help=f"`mining score` output folder ({REVIEW_QUEUE})")
    p.add_argument("--candidates", type=Path, default=None, metavar="CANDIDATES",
                   help="candidates Parquet (date_taken): no risk for a landmark whose `since` date (in the "
                        "ground truth) is after the photo was taken (mining/evidence/since.py)")
    p.add_argument("--geometry", type=Path, default=None, metavar="DESC/METHOD",
                   help="a method's folder whose stores keep keypoints (spatial_verification): the riskiest "
                        "candidates get their best inliers against their nearest landmark, and enough inliers "
                        "flag a candidate as high risk too (mining/evidence/geometry.py)")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.stages.leakrisk.stage import run

    st = run(landmarks=args.landmarks, descriptors=args.descriptors, scores=args.scores, out=args.out,
             candidates=args.candidates, geometry=args.geometry)
    print(f"{st['candidates']} candidates: {st['high_risk']} at high risk of showing a landmark, "
          f"{st['high_risk_outside_queue']} of them outside the review queue: {args.out / LEAKRISK}")
    return 0
