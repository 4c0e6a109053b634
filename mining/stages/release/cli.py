"""CLI for `mining release`: the selection → a publishable set (faces blurred, licences chosen, a card)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from mining.files.names import AUDIT, DISTRACTORS, DISTRACTORS_TXT, EVALUATION, STATS
from mining.settings import options
from mining.flags import add_progress_flag


def register(sub: argparse._SubParsersAction) -> None:
    from mining.stages.release.blur import DEFAULT_MARGIN

    p = sub.add_parser(
        "release",
        help="make the selected distractors publishable: faces blurred, licences chosen, a dataset card",
        description=(
            "Writes OUT/jpg/<3 hex>/<key>.jpg (faces blurred; images without a face are byte copies), "
            f"OUT/{DISTRACTORS_TXT}, OUT/release.parquet, OUT/ATTRIBUTION.md/.csv, OUT/README.md (the dataset card), "
            f"OUT/{STATS}, OUT/SHA256SUMS and, with --tar, OUT/webdataset/*.tar. NoDerivs images are never "
            "modified: left out when a face is found, released as they are otherwise. A stopped run (killed, "
            "out of time) resumes: run the same command again and the images it finished are not checked again "
            "(other settings or inputs start over)."
        ),
    )
    p.add_argument("--selected", required=True, type=Path, metavar="SELECTED",
                   help=f"output folder of `mining select` (or its {DISTRACTORS})")
    p.add_argument("--images", required=True, type=Path, help="download root (IMAGES with jpg/<3 hex>/<key>.jpg)")
    p.add_argument("--out", required=True, type=Path, help="release folder (replaced as a whole when done)")
    licenses = options.section_schema("release")["properties"]["licenses"]
    p.add_argument("--licenses", nargs="+", action="extend", default=None, metavar="L",
                   help=f"`commercial`, `all` or licence names, URLs or codes (by, by-sa, by-nc, ...); also "
                        "`--licenses=L` once per licence (a value, never a flag) (default "
                        f"{licenses['default']}; manifest release.licenses)")
    p.add_argument("--candidates", type=Path, default=None, help="candidates Parquet: titles and pages for ATTRIBUTION")
    p.add_argument("--candidates-stats", type=Path, default=None, help=f"geofilter {STATS}: the funnel in the card")
    p.add_argument("--evaluation", type=Path, default=None, help=f"{EVALUATION}: the hardness table in the card")
    p.add_argument("--audit", type=Path, default=None,
                   help=f"AUDIT/{AUDIT} (`mining audit estimate`): the measured leak rate in the card; the "
                        f"selection must then be the set the audit left (AUDIT/{DISTRACTORS})")
    p.add_argument("--margin", type=float, default=DEFAULT_MARGIN,
                   help=f"blurred box growth on each side, as a fraction of the face box (default {DEFAULT_MARGIN})")
    p.add_argument("--workers", type=int, default=1, help="images checked in parallel (threads)")
    p.add_argument("--descriptors", nargs="+", type=Path, default=[], metavar="DESC/METHOD",
                   help="with --kit: the method folders the run evaluated (queries/, database/, candidates/)")
    options.add_flags(p, "release", keys=["blur_faces", "face_threshold", "min_face_px", "tar", "kit", "shard_size"],
                      manifest_help="the run's manifest: named and hashed in the card; its release: section "
                      "gives the settings below (a flag given here wins)")
    options.add_flags(p, "audit", keys=["max_leak_rate", "confidence", "over_target"])
    add_progress_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.stages.release.stage import Inputs, run

    settings = options.from_args(args, "release")
    if args.licenses:  # names and URLs too, not only the manifest's codes
        settings = replace(settings, licenses=args.licenses)
    inputs = Inputs(selected=args.selected, images=args.images, candidates=args.candidates,
                    candidates_stats=args.candidates_stats, evaluation=args.evaluation, manifest=args.manifest,
                    audit=args.audit, descriptors=tuple(args.descriptors))
    stats = run(inputs=inputs, out=args.out, options=settings, target=options.from_args(args, "audit"),
                workers=args.workers, margin=args.margin, progress=not args.no_progress)
    print(json.dumps({k: stats[k] for k in ("selected", "released", "blurred", "excluded")}))
    return 0
