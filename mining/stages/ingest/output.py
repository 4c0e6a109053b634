"""What `mining ingest` writes: Parquet parts in fixed row groups, and quarantine.tsv's escaping."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mining.errors import UserError

QUARANTINE_HEADER = b"file\tline\treason\traw_line\n"
_DICTIONARY = ["license_name", "license_url", "extension", "place_country"]
_STATISTICS = ["photo_id", "longitude", "latitude", "accuracy", "date_uploaded", "marker"]
# rows per Parquet row group (the last one of a part may be shorter): fixed, so that the parts'
# bytes depend on the rows alone, not on how the input was cut into blocks (block size, TSV
# or SQLite)
ROW_GROUP_ROWS = 65_536


# quarantine.tsv fields are escaped so that a record is one line of exactly four fields,
# whatever bytes a file name or a raw line holds (tabs, lone CRs, newlines in file names)
_ESCAPES = ((b"\\", b"\\\\"), (b"\t", b"\\t"), (b"\n", b"\\n"), (b"\r", b"\\r"))
_UNESCAPES = {b"\\": b"\\", b"t": b"\t", b"n": b"\n", b"r": b"\r"}


def escape_field(value: bytes) -> bytes:
    """A quarantine.tsv field: backslash, TAB, LF and CR written as `\\\\`, `\\t`, `\\n`, `\\r`."""
    for raw, escaped in _ESCAPES:
        if raw in value:
            value = value.replace(raw, escaped)
    return value


def unescape_field(value: bytes) -> bytes:
    """The inverse of `escape_field`."""
    if b"\\" not in value:
        return value
    return re.sub(rb"\\(.)", lambda m: _UNESCAPES.get(m.group(1), b"\\" + m.group(1)), value, flags=re.S)


def read_quarantine(folder_or_file: str | os.PathLike[str]) -> list[tuple[str, int, str, bytes]]:
    """The rows of an ingest output's quarantine.tsv: (file, line, reason, raw line), unescaped."""
    path = Path(folder_or_file)
    if path.is_dir():
        path = path / "quarantine.tsv"
    lines = path.read_bytes().split(b"\n")
    if lines[0] + b"\n" != QUARANTINE_HEADER:
        raise UserError(f"not a quarantine file (bad header): {path}")
    rows = []
    for line in lines[1:]:
        if not line:
            continue
        name, number, reason, raw = line.split(b"\t")
        rows.append((unescape_field(name).decode("utf-8", "surrogateescape"), int(number), reason.decode(),
                     unescape_field(raw)))
    return rows


class PartWriter:
    """Parquet parts of at most `rows_per_part` rows (part-00000.parquet, part-00001.parquet, ...)
    in row groups of ROW_GROUP_ROWS rows: tables are buffered and cut at fixed row counts."""

    def __init__(self, folder: Path, schema: pa.Schema, rows_per_part: int, compression: str,
                 group_rows: int | None = None):
        self.folder, self.schema, self.rows_per_part, self.compression = folder, schema, rows_per_part, compression
        self.group_rows = ROW_GROUP_ROWS if group_rows is None else group_rows
        self.parts: list[Path] = []
        self._writer: pq.ParquetWriter | None = None
        self._rows = 0  # rows in the open part
        self._buffer: list[pa.Table] = []
        self._buffered = 0

    def _open(self) -> None:
        path = self.folder / f"part-{len(self.parts):05d}.parquet"
        self.parts.append(path)
        self._writer = pq.ParquetWriter(
            path, self.schema, compression=self.compression,
            # dictionaries and min/max statistics only where they pay: few distinct values,
            # or columns that readers filter on; elsewhere they cost time and bytes
            use_dictionary=[n for n in _DICTIONARY if n in self.schema.names],
            write_statistics=[n for n in _STATISTICS if n in self.schema.names],
        )
        self._rows = 0

    def _next_group(self) -> int:
        """Rows of the next row group: a full group, or what is left of the open part."""
        left = self.rows_per_part - self._rows if self._writer is not None else self.rows_per_part
        return min(self.group_rows, left if left > 0 else self.rows_per_part)

    def _flush(self, final: bool) -> None:
        if not self._buffered or (not final and self._buffered < self._next_group()):
            return
        table = pa.concat_tables(self._buffer)
        self._buffer, self._buffered = [], 0
        while table.num_rows:
            take = self._next_group()
            if table.num_rows < take and not final:
                break
            if self._writer is None or self._rows >= self.rows_per_part:
                self.close()
                self._open()
            assert self._writer is not None
            take = min(take, table.num_rows)
            # one contiguous chunk per group: the pages' bytes must not depend on how the rows
            # arrived in pieces
            self._writer.write_table(table.slice(0, take).combine_chunks(), row_group_size=take)
            self._rows += take
            table = table.slice(take)
        if table.num_rows:
            self._buffer, self._buffered = [table], table.num_rows

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self._buffer.append(table)
            self._buffered += table.num_rows
            self._flush(final=False)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def finish(self) -> list[Path]:
        self._flush(final=True)
        if not self.parts:  # no rows at all: still a readable, typed (empty) dataset
            self._open()
        self.close()
        return self.parts
