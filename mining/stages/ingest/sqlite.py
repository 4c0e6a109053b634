"""The `yfcc100m_dataset` table of a SQLite file (the Multimedia Commons' `yfcc100m_dataset.sql`)
read as the blocks `mining ingest` parses.

The values are the 23-field TSV's strings (text form-URL-encoded, ...), but the column types
are not documented: a value may come back as bytes (TEXT is read as bytes, undecoded, so bad
UTF-8 reaches the parser as it would in the TSV), int, float, None or a blob. Each row is turned
back into its 23-field TSV line (None -> empty, int -> decimal, float -> the shortest text
that parses back to the same float64, written without a trailing `.0`; text and blobs as they
are) and the lines go through `yfcc.parse_block`: a row gives exactly the Parquet row, or the
quarantine reason, that its TSV line gives. A value holding a TAB, LF or CR cannot be a TSV
field: its row is quarantined as `control_character`, the raw line being the row's values
joined by TABs. Line numbers are rows' 1-based positions in rowid order. A value longer than
MAX_LINE (so its row's line is too) is cut to its first LONG_LINE_HEAD characters by the query
itself and its row quarantined as `line_too_long`, as the TSV line is: it never reaches Python
(SQLite still reads it once, as any value it returns).

Rows are read by rowid ranges (`rowid BETWEEN lo AND hi`, at most `rows` rowids each), one
range per task on the parser threads, each thread with a read-only connection of its own:
memory stays bounded and SQLite's page reads run outside the GIL.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from mining.errors import UserError
from mining.stages.ingest.yfcc import (CONTROL_CHARACTER, FIELDS_23, LINE_TOO_LONG, LONG_LINE_HEAD, MAX_LINE, SCHEMA,
                                       Block, parse_block)

log = logging.getLogger(__name__)

HEADER = b"SQLite format 3\x00"
TABLE = "yfcc100m_dataset"
# the table's columns, in the order of the 23-field TSV (FIELDS_23)
COLUMNS = (
    "photoid", "uid", "unickname", "datetaken", "dateuploaded", "capturedevice", "title", "description",
    "usertags", "machinetags", "longitude", "latitude", "accuracy", "pageurl", "downloadurl", "licensename",
    "licenseurl", "serverid", "farmid", "secret", "secretoriginal", "ext", "marker",
)
assert len(COLUMNS) == len(FIELDS_23)
_TABS = len(COLUMNS) - 1
_MAX_ROWID = 2**63 - 1


def is_sqlite(path: Path) -> bool:
    """Whether a file is a SQLite database (its header bytes, whatever its name)."""
    with open(path, "rb") as f:
        return f.read(len(HEADER)) == HEADER


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _connect(path: Path) -> sqlite3.Connection:
    uri = "file:" + urllib.parse.quote(os.fsencode(Path(path).resolve())) + "?mode=ro"  # any bytes in the name
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)  # one thread at a time (_Pool)
    conn.text_factory = bytes
    return conn


@dataclass(frozen=True)
class Source:
    """A checked SQLite input: its table, the 23 columns as the file names them (FIELDS_23
    order), the columns it has beyond those, and its first and last rowid (None: no rows)."""

    path: Path
    table: str
    columns: tuple[str, ...]
    extra: tuple[str, ...]
    first: int | None
    last: int | None


def inspect(path: Path) -> Source:
    """Check that `path` holds table yfcc100m_dataset with the 23 columns (one-line UserError
    naming what was found otherwise)."""
    try:
        conn = _connect(path)
        try:
            tables = [r[0].decode("utf-8", "replace") for r in
                      conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            table = next((t for t in tables if t.lower() == TABLE), None)
            if table is None:
                raise UserError(f"{path}: a SQLite database without table {TABLE} (tables: "
                                f"{', '.join(tables) or 'none'}); is this the yfcc100m_dataset file?")
            names = [r[1].decode("utf-8", "replace") for r in conn.execute(f"PRAGMA table_info({_quote(table)})")]
            by_lower = {n.lower(): n for n in names}
            missing = [c for c in COLUMNS if c not in by_lower]
            if missing:
                raise UserError(f"{path}: table {table} lacks column(s) {', '.join(missing)} "
                                f"(columns: {', '.join(names)})")
            try:  # two queries: min and max together are a full scan, each alone a b-tree seek
                first = conn.execute(f"SELECT min(rowid) FROM {_quote(table)}").fetchone()[0]
                last = conn.execute(f"SELECT max(rowid) FROM {_quote(table)}").fetchone()[0]
            except sqlite3.OperationalError:
                raise UserError(f"{path}: table {table} has no rowid (a WITHOUT ROWID table); "
                                "not supported") from None
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise UserError(f"{path}: cannot be read as a SQLite database: {exc}") from None
    extra = tuple(n for n in names if n.lower() not in COLUMNS)
    return Source(Path(path), table, tuple(by_lower[c] for c in COLUMNS), extra, first, last)


def _text(value: Any) -> bytes:
    """One value as its TSV field's bytes."""
    if value is None:
        return b""
    if isinstance(value, int):
        return b"%d" % value
    if isinstance(value, float):
        text = repr(value)  # the shortest text that parses back to the same float64
        return (text[:-2] if text.endswith(".0") else text).encode()  # 7088065.0 in a REAL column -> 7088065
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    return bytes(value)


def to_lines(rows: list[tuple[Any, ...]]) -> list[bytes]:
    """The rows as TSV lines (without their newline)."""
    lines = []
    for row in rows:
        try:
            lines.append(b"\t".join(row))  # all values are text: the common case, fast
        except TypeError:
            lines.append(b"\t".join([v if type(v) is bytes else _text(v) for v in row]))
    return lines


def rows_block(rows: list[tuple[Any, ...]], cut: frozenset[int] = frozenset()) -> Block:
    """Parse rows of the 23 columns as `parse_block` parses their TSV lines; rows with a TAB,
    LF or CR in a value are quarantined as control_character. Lines are numbered from 1. `cut`:
    the (0-based) rows whose values the query cut (`Reader`): line_too_long, their heads as raw."""
    lines = to_lines(rows)
    n = len(lines)
    if not n:
        return Block(table=SCHEMA.empty_table(), rejects=[], lines=0)
    data = b"\n".join(lines) + b"\n"
    longest = max(map(len, lines))
    if (data.count(b"\t") == _TABS * n and data.count(b"\n") == n and b"\r" not in data and longest <= MAX_LINE
            and not cut):
        return parse_block(data, len(COLUMNS))
    kept: list[int] = []
    bad: list[tuple[int, str, bytes]] = []
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_LINE or number - 1 in cut:  # as the TSV line would be
            bad.append((number, LINE_TOO_LONG, line[:LONG_LINE_HEAD]))
        elif line.count(b"\t") != _TABS or b"\n" in line or b"\r" in line:
            bad.append((number, CONTROL_CHARACTER, line))
        else:
            kept.append(number)
    if kept:
        parsed = parse_block(b"".join(lines[k - 1] + b"\n" for k in kept), len(COLUMNS))
    else:
        parsed = Block(table=SCHEMA.empty_table(), rejects=[], lines=0)
    rejects = sorted(bad + [(kept[number - 1], why, text) for number, why, text in parsed.rejects])
    return Block(table=parsed.table, rejects=rejects, lines=n)


class Reader:
    """The rows of a Source by rowid ranges; a connection per concurrent read, reused."""

    def __init__(self, source: Source):
        self.source = source
        table = _quote(source.table)
        cols = [_quote(c) for c in source.columns]
        # a value over MAX_LINE characters (so bytes) is cut to its head here, and its row flagged: never fetched whole
        cut = ", ".join(f"CASE WHEN length({c}) > {MAX_LINE} THEN substr({c}, 1, {LONG_LINE_HEAD}) ELSE {c} END"
                        for c in cols)
        longest = f"max({', '.join(f'coalesce(length({c}), 0)' for c in cols)}) > {MAX_LINE}"
        self._select = f"SELECT {longest}, {cut} FROM {table} WHERE rowid BETWEEN ? AND ? ORDER BY rowid"
        self._next = f"SELECT min(rowid) FROM {table} WHERE rowid > ?"
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def _take(self) -> sqlite3.Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _connect(self.source.path)

    def _give(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                return
        conn.close()  # handed back by a read still running when the reader was closed

    def _error(self, exc: sqlite3.Error, where: str) -> UserError:
        return UserError(f"{self.source.path}: SQLite read error {where}: {exc}")

    def ranges(self, rows: int) -> Iterator[tuple[int, int]]:
        """Consecutive rowid ranges in rowid order, each holding 1 to `rows` rows (gaps in the
        rowids are skipped: each range starts at a rowid that exists)."""
        lo, last = self.source.first, self.source.last
        if lo is None or last is None:
            return
        conn = self._take()
        try:
            while True:
                hi = min(lo + rows - 1, _MAX_ROWID)
                yield lo, hi
                if hi >= last:
                    return
                try:
                    lo = conn.execute(self._next, (hi,)).fetchone()[0]
                except sqlite3.Error as exc:
                    raise self._error(exc, f"after rowid {hi}") from None
                if lo is None:
                    return
        finally:
            self._give(conn)

    def read(self, lo: int, hi: int) -> Block:
        """The parsed rows with rowid in [lo, hi] (runs on a parser thread)."""
        conn = self._take()
        try:
            rows = conn.execute(self._select, (lo, hi)).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc, f"in rowids {lo}-{hi}") from None
        finally:
            self._give(conn)
        return rows_block([r[1:] for r in rows], frozenset(k for k, r in enumerate(rows) if r[0]))

    def close(self) -> None:
        """Close the idle connections; one in use (a read still running after an error) is
        closed when it is handed back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
