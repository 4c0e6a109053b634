"""The `yfcc100m_places` expansion (`photoid<TAB>woeid:Name:Type,...`) joined onto dataset rows.

Why a streaming merge and not a hash join: the places file has one line per dataset row, in
the same order, and is as large as the dataset; loading it whole would break the bounded
memory promise. Rows are matched by photo id inside a sliding window of the places file, so
dataset rows that were rejected (or places lines that are missing) do not derail the join.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv  # noqa: F401  (pa.csv)

from mining.ingest.formdecode import form_decode, to_utf8
from mining.ingest.yfcc import iter_blocks, open_stream

_COUNTRY = r"(?:^|,)[0-9]+:(?P<name>[^:,]*):Country(?:,|$)"
_LOCALITY = r"(?:^|,)[0-9]+:(?P<name>[^:,]*):(?:Locality|Town)(?:,|$)"


def _place_name(places: pa.Array, pattern: str) -> pa.Array:
    """The decoded name of the first place of a type in each row's place list (null if none)."""
    names = pc.struct_field(pc.extract_regex(places, pattern), "name")
    decoded, bad = form_decode(names.cast(pa.binary()))
    text, bad_utf = to_utf8(decoded)
    empty = pc.equal(pc.utf8_length(text), 0).fill_null(True)
    return pc.if_else(pc.or_(empty, pa.array(bad | bad_utf)), pa.scalar(None, pa.string()), text)


def parse_places_block(data: bytes) -> tuple[np.ndarray, pa.Array, pa.Array, int]:
    """(photo ids, country, locality, lines skipped) of one block of places lines."""
    skipped = [0]

    def on_invalid(_row: pa.csv.InvalidRow) -> str:
        skipped[0] += 1
        return "skip"

    table = pa.csv.read_csv(
        pa.BufferReader(data),
        read_options=pa.csv.ReadOptions(column_names=["photo_id", "places"]),
        parse_options=pa.csv.ParseOptions(
            delimiter="\t", quote_char=False, escape_char=False, invalid_row_handler=on_invalid
        ),
        convert_options=pa.csv.ConvertOptions(
            column_types={"photo_id": pa.string(), "places": pa.string()}, strings_can_be_null=False,
            check_utf8=False,
        ),
    )
    ids_txt = table.column("photo_id").combine_chunks()
    ok = pc.match_substring_regex(ids_txt, r"^[0-9]{1,18}$")
    ids = pc.cast(pc.if_else(ok, ids_txt, pa.scalar(None, pa.string())), pa.int64())
    places = table.column("places").combine_chunks()  # not UTF-8-checked: names are validated once decoded
    keep = ok.to_numpy(zero_copy_only=False)
    return (
        ids.to_numpy(zero_copy_only=False)[keep].astype(np.int64),
        _place_name(places, _COUNTRY).filter(ok),
        _place_name(places, _LOCALITY).filter(ok),
        skipped[0] + int((~keep).sum()),
    )


class PlacesJoin:
    """Looks up place_country / place_locality for successive batches of photo ids."""

    def __init__(self, path: Path, block_size: int = 8 << 20, slack: int = 65536):
        self.path = Path(path)
        self._stream, self._raw = open_stream(self.path)
        self._blocks: Iterator[bytes] = iter_blocks(self._stream, block_size, 1 << 28)
        self._slack = slack
        self._ids = np.zeros(0, dtype=np.int64)
        self._country = pa.array([], pa.string())
        self._locality = pa.array([], pa.string())
        self._eof = False
        self.matched = 0
        self.skipped = 0

    def _fill(self, want: int) -> None:
        while len(self._ids) < want and not self._eof:
            block = next(self._blocks, None)
            if block is None:
                self._eof = True
                break
            ids, country, locality, skipped = parse_places_block(block)
            self.skipped += skipped
            self._ids = np.concatenate([self._ids, ids])
            self._country = pa.concat_arrays([self._country, country])
            self._locality = pa.concat_arrays([self._locality, locality])

    def lookup(self, photo_ids: pa.Array) -> tuple[pa.Array, pa.Array]:
        """(country, locality) for each id; the window then moves past the last match."""
        self._fill(len(photo_ids) + self._slack)
        pos = pc.index_in(photo_ids, value_set=pa.array(self._ids))
        country = self._country.take(pos)
        locality = self._locality.take(pos)
        found = pos.drop_null()
        self.matched += len(found)
        if len(found):
            done = int(pc.max(found).as_py()) + 1
            self._ids = self._ids[done:]
            self._country = self._country.slice(done)
            self._locality = self._locality.slice(done)
        return country, locality

    def close(self) -> None:
        self._stream.close()
        self._raw.close()
