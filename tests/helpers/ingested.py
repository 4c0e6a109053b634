"""What an ingest output holds, less what names its inputs or times the run: two runs on the
same rows (other files, formats, workers, block sizes) must give equal `ingested(out)`."""

from __future__ import annotations

import json
from pathlib import Path

from mining.stages.ingest.output import read_quarantine

# per-file stats that name or describe the input file, not its rows
FILE_KEYS = ("path", "compression", "format", "table")


def ingested(out: Path) -> tuple[dict[str, bytes], list[tuple[int, str, bytes]], dict]:
    """(Parquet parts' bytes by name, quarantine rows without the file name, stats without
    elapsed_s, fingerprint and the files' FILE_KEYS)."""
    parts = {p.name: p.read_bytes() for p in sorted(out.glob("part-*.parquet"))}
    q = [(n, reason, raw) for _, n, reason, raw in read_quarantine(out)]
    stats = json.loads((out / "stats.json").read_text())
    for key in ("elapsed_s", "fingerprint"):
        stats.pop(key)
    for f in stats["files"]:
        for key in FILE_KEYS:
            f.pop(key, None)
    return parts, q, stats
