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
from mining.stages.ingest.streams import iter_blocks, open_stream

# a block of lines -> (photo ids, one array per joined column, lines skipped)
Parse = Callable[[bytes], tuple[np.ndarray, list[pa.Array], int]]


def read_pairs(data: bytes) -> tuple[np.ndarray, pa.Array, np.ndarray, int]:
    """A block of `photoid<TAB>value` lines: (photo ids of the lines whose id is a positive
    integer, all values (unchecked text), mask of those lines, lines skipped)."""
    skipped = [0]

    def on_invalid(_row: pa.csv.InvalidRow) -> str:
        skipped[0] += 1
        return "skip"

    table = pa.csv.read_csv(
        pa.BufferReader(data),
        read_options=pa.csv.ReadOptions(column_names=["photo_id", "value"]),
        parse_options=pa.csv.ParseOptions(
            delimiter="\t", quote_char=False, escape_char=False, invalid_row_handler=on_invalid
        ),
        convert_options=pa.csv.ConvertOptions(
            column_types={"photo_id": pa.string(), "value": pa.string()}, strings_can_be_null=False,
            check_utf8=False,
        ),
    )
    ids_txt = table.column("photo_id").combine_chunks()
    ok = pc.match_substring_regex(ids_txt, r"^[0-9]{1,18}$")
    ids = pc.cast(pc.if_else(ok, ids_txt, pa.scalar(None, pa.string())), pa.int64())
    keep = ok.to_numpy(zero_copy_only=False)
    return (ids.to_numpy(zero_copy_only=False)[keep].astype(np.int64), table.column("value").combine_chunks(),
            keep, skipped[0] + int((~keep).sum()))


class WindowJoin:
    """Looks up the columns `parse` gives for successive batches of photo ids."""

    def __init__(self, path: Path, parse: Parse, types: list[pa.DataType], block_size: int = 8 << 20,
                 slack: int = 65536, ordered: bool = False, what: str = "file"):
        self.path, self._parse, self._slack, self._ordered, self._what = Path(path), parse, slack, ordered, what
        self._stream, self._raw = open_stream(self.path)
        self._blocks: Iterator[bytes] = iter_blocks(self._stream, block_size, 1 << 28)
        self._ids = np.zeros(0, dtype=np.int64)
        self._cols = [pa.array([], t) for t in types]
        self._eof = False
        self.matched = 0
        self.skipped = 0

    def _fill(self, want: int) -> None:
        while len(self._ids) < want and not self._eof:
            block = next(self._blocks, None)
            if block is None:
                self._eof = True
                break
            ids, cols, skipped = self._parse(block)
            self.skipped += skipped
            self._ids = np.concatenate([self._ids, ids])
            self._cols = [pa.concat_arrays([old, new]) for old, new in zip(self._cols, cols)]

    def lookup(self, photo_ids: pa.Array) -> list[pa.Array]:
        """The columns for each id (null where not found); the window then moves past the last match."""
        self._fill(len(photo_ids) + self._slack)
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
