"""One value cannot take the ingest's memory past the block size.

A line longer than `yfcc.MAX_LINE` (1 MiB; so any field longer than that) is quarantined as
`line_too_long`, its first `LONG_LINE_HEAD` bytes as its raw line, without being held whole: a
100 MB description used to be read, parsed and written to Parquet (1.16 GB peak). Its fate is
the same at every block size, as TSV (plain, .gz) and as SQLite; a line of exactly MAX_LINE
bytes is still a row.
"""

from __future__ import annotations

import gzip
import tracemalloc

import pytest
from ingested import ingested
from yfcc_rows import iter_lines, write_sqlite

from mining.stages.ingest import stage as ingest
from mining.stages.ingest.decompress import LongLine, iter_capped
from mining.stages.ingest.yfcc import LONG_LINE_HEAD, MAX_LINE

DESCRIPTION = 9  # field index in the 25-field layout (7 in the 23-field one)


def _lines(nfields: int) -> list[bytes]:
    """300 rows; row 100's description makes its line MAX_LINE + 1 bytes, row 200's MAX_LINE
    bytes exactly, row 250's 3 MiB; the last row's 2 MiB (the file's last line, no newline)."""
    lines = [line.split("\t") for line, _ in iter_lines(300, seed=9, nfields=nfields, malformed=0.0)]
    d = DESCRIPTION - (25 - nfields)
    out = []
    for i, f in enumerate(lines):
        size = {100: MAX_LINE + 1, 200: MAX_LINE, 250: 3 << 20, 299: 2 << 20}.get(i)
        if size is not None:
            f[d] = ""
            f[d] = "y" * (size - len("\t".join(f)))
        out.append("\t".join(f).encode())
    return out


@pytest.mark.parametrize("nfields", [25, 23])
def test_a_line_longer_than_the_limit_is_quarantined_at_every_block_size(tmp_path, nfields):
    lines = _lines(nfields)
    plain = tmp_path / "d.tsv"
    plain.write_bytes(b"\n".join(lines))  # no newline after the last line
    packed = tmp_path / "d.tsv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    runs = []
    for src, size, workers in [(plain, 16 << 20, 2), (plain, 64 << 10, 1), (plain, 1 << 20, 3), (packed, 256 << 10, 2)]:
        out = tmp_path / f"o-{src.suffix}-{size}-{workers}"
        ingest.run(paths=[src], out=out, options=ingest.IngestOptions(block_size=size), workers=workers, progress=False)
        runs.append(ingested(out))
    assert all(r == runs[0] for r in runs[1:])
    parts, quarantine, stats = runs[0]
    assert stats["rows_in"] == 300 and stats["rejected"]["line_too_long"] == 3 and stats["rows_out"] == 297
    assert [(n, r) for n, r, _ in quarantine] == [(101, "line_too_long"), (251, "line_too_long"),
                                                  (300, "line_too_long")]
    assert [raw for _, _, raw in quarantine] == [lines[i][:LONG_LINE_HEAD] for i in (100, 250, 299)]
    kept = ingest.open_dataset(tmp_path / "o-.tsv-16777216-2").to_table(columns=["description"])
    assert max(len(v) for v in kept.column("description").to_pylist()) > MAX_LINE - 1000  # row 200: a row


def test_sqlite_quarantines_the_same_rows(tmp_path):
    lines = _lines(23)
    tsv = tmp_path / "d.tsv"
    tsv.write_bytes(b"\n".join(lines) + b"\n")
    db = tmp_path / "d.sql"
    write_sqlite(db, [line.split(b"\t") for line in lines])
    ingest.run(paths=[tsv], out=tmp_path / "tsv", progress=False)
    ingest.run(paths=[db], out=tmp_path / "db", options=ingest.IngestOptions(block_size=64 << 10), progress=False)
    assert ingested(tmp_path / "db") == ingested(tmp_path / "tsv")


class _Endless:
    """A stream of one line of `n` bytes (made as it is read), then a short line."""

    def __init__(self, n: int):
        self.left, self.tail = n, b"\nshort line\n"

    def read(self, size: int) -> bytes:
        if self.left:
            k = min(size, self.left)
            self.left -= k
            return b"z" * k
        out, self.tail = self.tail[:size], self.tail[size:]
        return out


def test_reading_a_100_mb_line_holds_about_a_block():
    block = 1 << 20
    tracemalloc.start()
    try:
        items = [(type(x).__name__, x.length if isinstance(x, LongLine) else x)
                 for x in iter_capped(_Endless(100 << 20), block, MAX_LINE)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert items == [("LongLine", 100 << 20), ("bytes", b"short line\n")]
    assert peak < 4 * block + 2 * MAX_LINE  # the 100 MB line never held (it was, and more)


def test_a_sqlite_value_of_16_mib_is_never_held_whole(tmp_path):
    """The SQLite reader cuts a value longer than MAX_LINE in the query (its first LONG_LINE_HEAD
    characters), so a row holding it is quarantined as line_too_long, as its TSV line is, without
    the value reaching Python: a 100 MB description took ingest to ~600 MB."""
    from mining.stages.ingest import sqlite

    rows = [line.split(b"\t") for line in _lines(23)[:120]]
    rows[50][7] = b"y" * (16 << 20)
    db = tmp_path / "d.sql"
    write_sqlite(db, rows)
    source = sqlite.inspect(db)
    reader = sqlite.Reader(source)
    tracemalloc.start()
    try:
        block = reader.read(source.first, source.last)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        reader.close()
    line = b"\t".join(rows[50])
    assert [(n, why, raw) for n, why, raw in block.rejects if n == 51] == [(51, "line_too_long", line[:LONG_LINE_HEAD])]
    assert [n for n, why, _ in block.rejects if why == "line_too_long"] == [51, 101]  # row 100: MAX_LINE + 1
    assert peak < 4 * MAX_LINE + (1 << 20)  # row 100 (1 MiB) and the block; never the 16 MiB value
