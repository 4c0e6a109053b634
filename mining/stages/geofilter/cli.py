"""CLI for `mining geofilter`: metadata Parquet + manifest → candidates.parquet + stats.json."""

from __future__ import annotations

import argparse
import json

from mining.files.names import CANDIDATES, STATS
from mining.flags import add_progress_flag


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "geofilter",
        help="keep the metadata rows that may become distractors (countries, areas, licence, sample)",
        description=(
            "Filter a metadata dataset (the output of `mining ingest`) with the `geofilter:` section "
            f"of a manifest; write OUT/{CANDIDATES} (one row per photo id; a photo with any "
            f"excluded row is excluded) and OUT/{STATS} (the funnel in photos: rows_in, photos_in, "
            "duplicate_ids, excluded per reason, photos_out). The manifest is validated before any "
            "data is read."
        ),
    )
    p.add_argument("--metadata", required=True, metavar="METADATA_DIR", help="metadata Parquet directory (or one Parquet file), from `mining ingest`")
    p.add_argument("--manifest", required=True, metavar="M.yaml", help="run manifest with a geofilter: section")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    add_progress_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.stages.geofilter.stage import load, run

    stats = run(metadata=args.metadata, out=args.out, options=load(args.manifest), progress=not args.no_progress)
    print(json.dumps(stats, sort_keys=True))
    return 0
