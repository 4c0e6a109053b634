"""Side files keyed by photo id (`yfcc100m_places`, `yfcc100m_hash`: `photoid<TAB>value` lines)
joined onto dataset rows in a sliding window.

Why a streaming merge and not a hash join: such a file has one line per dataset row, in the
same order, and is as large as the dataset; loading it whole would break the bounded memory
promise. Rows are matched by photo id inside a window of the file's next lines (the batch's
size plus `slack`), so dataset rows that were rejected (or lines that are missing) do not
derail the join; the window then moves past the last match. A line beyond the window, or
behind it, is not found: the file must be in the dataset's order. `ordered=True` checks that
(the matches of each batch must come in the file's order) and stops with one line otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv  # noqa: F401  (pa.csv)

from mining.errors import UserError
from mining.stages.ingest.numbers import parse_ints
from mining.stages.ingest.decompress import READ_ERRORS, iter_blocks, open_stream, sniff_compression
from mining.stages.ingest.yfcc import MAX_LINE, is_utf8

# a block of lines -> (photo ids, one array per joined column, lines skipped)
Parse = Callable[[bytes], tuple[np.ndarray, list[pa.Array], int]]


def read_pairs(data: bytes) -> tuple[np.ndarray, pa.Array, np.ndarray, int]:
    """A block of `photoid<TAB>value` lines: (photo ids of the lines whose id is a positive
    integer (`numbers.parse_ints`, as the dataset's), all values (unchecked text), mask of those
    lines, lines skipped). NotText when a line cannot be read as text (a binary file)."""
    skipped = [0]

    def on_invalid(_row: pa.csv.InvalidRow) -> str:
        skipped[0] += 1
        return "skip"

    if b"\x00" in data or not is_utf8(data):
        raise NotText("NUL or bytes that are not UTF-8")
    try:
        table = pa.csv.read_csv(
            pa.BufferReader(data),
            read_options=pa.csv.ReadOptions(column_names=["photo_id", "value"]),
            parse_options=pa.csv.ParseOptions(
                delimiter="\t", quote_char=False, escape_char=False, invalid_row_handler=on_invalid
            ),
            convert_options=pa.csv.ConvertOptions(
                column_types={"photo_id": pa.binary(), "value": pa.string()}, strings_can_be_null=False,
                check_utf8=False,
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:  # a line the CSV reader cannot hand over
        raise NotText(str(exc).split("\n")[0][:120]) from None
    ids, bad = parse_ints(table.column("photo_id").combine_chunks(), pa.int64(), nullable=False)
    keep = ~bad & pc.fill_null(pc.greater(ids, 0), False).to_numpy(zero_copy_only=False)
    return (ids.to_numpy(zero_copy_only=False)[keep].astype(np.int64), table.column("value").combine_chunks(),
            keep, skipped[0] + int((~keep).sum()))


class NotText(Exception):
    """A block of a side file that is not `photoid<TAB>value` text lines (binary bytes)."""


class WindowJoin:
    """Looks up the columns `parse` gives for successive batches of photo ids."""

    def __init__(self, path: Path, parse: Parse, types: list[pa.DataType], block_size: int = 8 << 20,
                 slack: int = 65536, ordered: bool = False, what: str = "file", one_value: bool = False):
        self.path, self._parse, self.slack, self._ordered, self._what = Path(path), parse, slack, ordered, what
        self._one_value = one_value  # two lines of one photo id with different values: refused
        self.lines = 0  # lines read so far
        self._stream, self._raw = open_stream(self.path)
        self._blocks: Iterator[bytes] = iter_blocks(self._stream, block_size, MAX_LINE)
        self._ids = np.zeros(0, dtype=np.int64)
        self._cols = [pa.array([], t) for t in types]
        self._eof = False
        self.matched = 0
        self.skipped = 0

    def _fill(self, want: int) -> None:
        while len(self._ids) < want and not self._eof:
            try:
                block = next(self._blocks, None)
            except UserError as exc:  # a line longer than MAX_LINE: not such a file
                raise UserError(f"{self.path}: the {self._what}: {exc}") from None
            except READ_ERRORS as exc:
                kind = sniff_compression(self.path)
                how = f"its {kind} stream is truncated or corrupt" if kind else "a read error"
                raise UserError(f"{self.path}: the {self._what} cannot be read after line {self.lines}: "
                                f"{how} ({exc})") from None
            if block is None:
                self._eof = True
                break
            upto = self.lines + block.count(b"\n")
            try:
                ids, cols, skipped = self._parse(block)
            except NotText as exc:
                raise UserError(f"{self.path}: the {self._what} is not text lines of photoid<TAB>value "
                                f"({exc} in lines {self.lines + 1}-{upto})") from None
            if self._one_value:
                self._refuse_conflicts(ids, cols[0], upto)
            self.lines = upto
            self.skipped += skipped
            self._ids = np.concatenate([self._ids, ids])
            self._cols = [pa.concat_arrays([old, new]) for old, new in zip(self._cols, cols)]

    def _refuse_conflicts(self, ids: np.ndarray, values: pa.Array, upto: int) -> None:
        """Stop when a photo id of the new lines has two different values among them and the
        lines still in the window (a file in the dataset's order has one line per photo; lines
        that far apart are not compared: memory stays bounded)."""
        every = np.concatenate([self._ids, ids])
        order = np.argsort(every, kind="stable")
        twice = np.flatnonzero(every[order][1:] == every[order][:-1])
        if not twice.size:
            return
        first, second = pa.array(order[twice]), pa.array(order[twice + 1])
        text = pa.concat_arrays([self._cols[0], values]).cast(pa.string())
        differ = pc.not_equal(pc.utf8_lower(text.take(first)), pc.utf8_lower(text.take(second)))
        conflicts = np.flatnonzero(differ.fill_null(True).to_numpy(zero_copy_only=False))
        if conflicts.size:
            k = conflicts[0]
            a, b = text.take(first)[k].as_py(), text.take(second)[k].as_py()
            raise UserError(f"{self.path}: the {self._what} gives photo {every[order[twice[k]]]} two different "
                            f"values ({a!r} and {b!r}; {conflicts.size} photo(s) with two values in its lines up to {upto}); "
                            "it must have one value per photo")

    def lookup(self, photo_ids: pa.Array) -> list[pa.Array]:
        """The columns for each id (null where not found); the window then moves past the last match."""
        self._fill(len(photo_ids) + self.slack)
        pos = pc.index_in(photo_ids, value_set=pa.array(self._ids))
        cols = [c.take(pos) for c in self._cols]
        found = pos.drop_null().to_numpy()
        if self._ordered and len(found) > 1 and (np.diff(found) < 0).any():
            k = int(np.flatnonzero(np.diff(found) < 0)[0])
            ids = photo_ids.filter(pos.is_valid()).to_numpy(zero_copy_only=False)
            raise UserError(f"{self.path}: the {self._what} is not in the dataset's row order (photo "
                            f"{ids[k + 1]} comes before photo {ids[k]} in it, after it in the dataset); "
                            "it must list the photos in the dataset's order")
        self.matched += len(found)
        if len(found):
            done = int(found.max()) + 1
            self._ids = self._ids[done:]
            self._cols = [c.slice(done) for c in self._cols]
        return cols

    def close(self) -> None:
        self._stream.close()
        self._raw.close()
