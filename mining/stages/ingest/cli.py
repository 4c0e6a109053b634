"""CLI for `mining ingest`: parse arguments, call `mining.stages.ingest.stage.run`, print a summary."""

from __future__ import annotations

import argparse
from pathlib import Path

from mining.files.names import STATS
from mining.flags import add_progress_flag

DESCRIPTION = f"""\
Read YFCC100M `yfcc100m_dataset` files and write a typed Parquet dataset to --out:
  OUT/part-NNNNN.parquet  one row per good input row (schema: docs/formats.md)
  OUT/quarantine.tsv      file, line, reason, raw line of every rejected row (TAB, LF... escaped)
  OUT/{STATS}          rows_in, rows_out, rows_rejected, rejected {{reason: count}}, per file;
                          photo_hash: each row's hash against the mirror's key (md5 of the URL)
Accepted, told apart automatically: the TSV files in both layouts (25 fields with line
number and hash; the 23-field Webscope files without them), plain, .bz2 or .gz; and the
SQLite file the Multimedia Commons distributes today (yfcc100m_dataset.sql, table
yfcc100m_dataset, recognised by its header; it gives the TSV's output for the same rows,
line numbers being row positions in rowid order). Rows with the wrong field count, a TAB,
LF or CR inside a SQLite value, a NUL byte, a photo id that is not a positive integer, bad
coordinates, URL fields outside their domains (secret not hex, server/farm not digits,
unknown extension), broken encoding, unparsable numbers, a marker/accuracy outside
0-1/0-16, or a line longer than 1 MiB are quarantined, never dropped silently:
rows_in == rows_out + rows_rejected; a row's fate never depends on --block-size-mb or --workers.
An empty input is warned about; an input none of whose rows is kept stops the run with
one line saying what it looks like, as does a truncated .gz/.bz2 (naming the line
reached); nothing is written then. Memory stays bounded whatever the input size.
Rerunning on unchanged inputs does nothing (use --force).
"""

EPILOG = """\
examples:
  mining ingest yfcc100m_dataset.bz2 --out work/metadata
  mining ingest yfcc100m_dataset-{0..9}.bz2 --places yfcc100m_places.bz2 --out work/metadata
  mining ingest yfcc100m_dataset.sql --hash yfcc100m_hash.bz2 --out work/metadata
"""


def register(sub: argparse._SubParsersAction) -> None:
    from mining.stages.ingest.stage import IngestOptions

    p = sub.add_parser(
        "ingest", help="YFCC100M metadata files -> typed Parquet dataset (+ quarantine, stats)",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="yfcc100m_dataset file(s): TSV (plain, .bz2 or .gz) or SQLite; read in the order given")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder")
    p.add_argument("--places", type=Path, metavar="FILE",
                   help="yfcc100m_places file for the same rows, in the same order: "
                        "adds place_country and place_locality")
    p.add_argument("--hash", type=Path, metavar="FILE", dest="hash_file",
                   help="yfcc100m_hash file (photoid<TAB>hash; plain, .bz2 or .gz) listing the photos in "
                        "the dataset's order: fills photo_hash where the input has none (23-field TSV, "
                        "SQLite); a file in another order is refused")
    p.add_argument("--rows-per-part", type=int, default=IngestOptions.rows_per_part, metavar="N",
                   help="rows per Parquet part file (default: %(default)s)")
    p.add_argument("--compression", default=IngestOptions.compression,
                   choices=["snappy", "zstd", "lz4", "gzip", "none"], help="Parquet compression (default: %(default)s)")
    p.add_argument("--block-size-mb", type=int, default=IngestOptions.block_size >> 20, metavar="MB",
                   help="input is parsed in blocks of about this size; bounds memory (default: %(default)s)")
    p.add_argument("--force", action="store_true", help="rebuild even if --out is complete for these inputs")
    p.add_argument("--workers", type=int, metavar="N",
                   help="parser threads, and decoder threads of a .bz2 input (default: min(4, CPUs)); "
                        "the output bytes do not depend on it")
    add_progress_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from mining.stages.ingest.stage import IngestOptions, run

    stats = run(paths=args.paths, out=args.out, places=args.places, hash_file=args.hash_file,
                options=IngestOptions(rows_per_part=args.rows_per_part, block_size=args.block_size_mb << 20,
                                      compression=args.compression),
                force=args.force, progress=not args.no_progress, workers=args.workers)
    rejected = ", ".join(f"{k}={v}" for k, v in stats["rejected"].items() if v) or "none"
    print(f"ingest: {stats['rows_in']} rows in, {stats['rows_out']} out, "
          f"{stats['rows_rejected']} rejected ({rejected}) -> {args.out}", file=sys.stderr)
    hashes = stats.get("photo_hash", {})
    if any(v for k, v in hashes.items() if k != "missing"):
        print("ingest: photo_hash against the mirror's key (md5 of the download URL): "
              + ", ".join(f"{k}={v}" for k, v in hashes.items()), file=sys.stderr)
    return 0
