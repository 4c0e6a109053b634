"""How far a damaged `.gz`/`.bz2` input can be read: the line its error message names.

The fast decoders (ISA-L on a thread, lbzip2, indexed_bzip2) decode ahead and drop what they
decoded when they meet the damage, so the lines they handed out can be far fewer than the
file's readable lines (none, in a small file). Python's own streaming decompressors hand out
every byte before the damage; counting their newlines gives the line reached exactly. They
stop at the damage, so the count costs about as much as decoding the file up to it.
"""

from __future__ import annotations

import bz2
import zlib
from pathlib import Path

import numpy as np

# counting is exact but single-threaded: beyond this many compressed bytes, a fast reader's own
# count (within a block of the truth) is kept unless it is 0
EXACT_UP_TO = 64 << 20


def readable_lines(path: Path, kind: str) -> int:
    """Whole lines that decode before the first damage in a gzip or bz2 file (all members/streams)."""
    new = (lambda: zlib.decompressobj(31)) if kind == "gzip" else bz2.BZ2Decompressor
    lines, d = 0, new()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                return lines
            while chunk:
                try:
                    out = d.decompress(chunk)
                except (OSError, EOFError, ValueError, zlib.error):
                    return lines
                lines += int(np.count_nonzero(np.frombuffer(out, np.uint8) == 10))
                chunk = b""
                if d.eof:  # another member (gzip) or stream (bz2) follows
                    chunk, d = d.unused_data, new()


def line_reached(path: Path, kind: str | None, counted: int) -> int:
    """The line a read error happened after: `counted` (a fast reader's own count) in a large
    file where it is not 0; otherwise the exact count from Python's decompressors."""
    if kind in ("gzip", "bz2") and (counted == 0 or path.stat().st_size <= EXACT_UP_TO):
        return max(counted, readable_lines(path, kind))
    return counted
