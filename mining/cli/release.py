"""CLI for `mining release`: the selection → a publishable set (faces blurred, licences chosen, a card)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mining.cli import add_input, add_progress_flag, main_input


def register(sub: argparse._SubParsersAction) -> None:
    from mining.release import DEFAULT_MARGIN, DEFAULT_MIN_FACE, DEFAULT_SHARD, DEFAULT_THRESHOLD

    p = sub.add_parser(
        "release",
        help="make the selected distractors publishable: faces blurred, licences chosen, a dataset card",
        description=(
            "Writes OUT/jpg/<3 hex>/<key>.jpg (faces blurred; images without a face are byte copies), "
            "OUT/distractors.txt, OUT/release.parquet, OUT/ATTRIBUTION.md/.csv, OUT/README.md (the dataset card), "
            "OUT/stats.json, OUT/SHA256SUMS and, with --tar, OUT/webdataset/*.tar. NoDerivs images are never "
            "modified: left out when a face is found, released as they are otherwise. A stopped run (killed, "
            "out of time) resumes: run the same command again and the images it finished are not checked again "
            "(other settings or inputs start over)."
        ),
    )
    add_input(p, "selected", type=Path, metavar="SELECTED",
              help="output folder of `mining select` (or its distractors.parquet)")
    p.add_argument("--images", required=True, type=Path, help="download root (IMAGES with jpg/<3 hex>/<key>.jpg)")
    p.add_argument("--out", required=True, type=Path, help="release folder (replaced as a whole when done)")
    p.add_argument("--licenses", nargs="+", action="extend", default=None, metavar="L",
                   help="`commercial`, `all` (default) or licence names, URLs or codes (by, by-sa, by-nc, ...); "
                        "also `--licenses=L` once per licence (how the workflow passes them: a value, never a flag)")
    p.add_argument("--candidates", type=Path, default=None, help="candidates Parquet: titles and pages for ATTRIBUTION")
    p.add_argument("--candidates-stats", type=Path, default=None, help="geofilter stats.json: the funnel in the card")
    p.add_argument("--evaluation", type=Path, default=None, help="evaluation.json: the hardness table in the card")
    p.add_argument("--audit", type=Path, default=None,
                   help="AUDIT/audit.json (`mining audit estimate`): the measured leak rate in the card; the "
                        "selection must then be the set the audit left (AUDIT/distractors.parquet)")
    p.add_argument("--allow-over-target", action="store_true",
                   help="release even when the audit's upper bound is above its target (refused by default)")
    p.add_argument("--manifest", type=Path, default=None, help="the run's manifest, named and hashed in the card")
    p.add_argument("--no-blur", action="store_true", help="do not look for faces (the card says so)")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                   help=f"face confidence threshold (default {DEFAULT_THRESHOLD})")
    p.add_argument("--min-face", type=int, default=DEFAULT_MIN_FACE,
                   help=f"smallest face looked for, in px (default {DEFAULT_MIN_FACE})")
    p.add_argument("--margin", type=float, default=DEFAULT_MARGIN,
                   help=f"blurred box growth on each side, as a fraction of the face box (default {DEFAULT_MARGIN})")
    p.add_argument("--workers", type=int, default=1, help="images checked in parallel (threads)")
    p.add_argument("--kit", action="store_true",
                   help="also write OUT/kit/: the evaluation kit (the selection's, queries' and database's descriptors "
                        "per method, with their models, settings and checksums; needs --evaluation and --descriptors)")
    p.add_argument("--descriptors", nargs="+", type=Path, default=[], metavar="DESC/METHOD",
                   help="with --kit: the method folders the run evaluated (queries/, database/, candidates/)")
    p.add_argument("--tar", action="store_true", help="also write WebDataset tar shards")
    p.add_argument("--shard-size", type=int, default=DEFAULT_SHARD, help=f"images per tar shard (default {DEFAULT_SHARD})")
    add_progress_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.release import run_release

    stats = run_release(main_input(args, "selected"), args.images, args.out, licenses=args.licenses or ["all"], candidates=args.candidates,
                        candidates_stats=args.candidates_stats, evaluation=args.evaluation, manifest=args.manifest,
                        blur=not args.no_blur, threshold=args.threshold, min_face=args.min_face, margin=args.margin,
                        workers=args.workers, tar=args.tar, shard_size=args.shard_size,
                        progress=not args.no_progress, audit=args.audit,
                        allow_over_target=args.allow_over_target, kit=args.kit, descriptors=args.descriptors)
    print(json.dumps({k: stats[k] for k in ("selected", "released", "blurred", "excluded")}))
    return 0
