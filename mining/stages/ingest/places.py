"""The `yfcc100m_places` expansion (`photoid<TAB>woeid:Name:Type,...`) joined onto dataset rows
(a sliding-window merge by photo id: mining/stages/ingest/window.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mining.stages.ingest.formdecode import form_decode, to_utf8
from mining.stages.ingest.window import WindowJoin, read_pairs

_COUNTRY = r"(?:^|,)[0-9]+:(?P<name>[^:,]*):Country(?:,|$)"
_LOCALITY = r"(?:^|,)[0-9]+:(?P<name>[^:,]*):(?:Locality|Town)(?:,|$)"


def _place_name(places: pa.Array, pattern: str) -> pa.Array:
    """The decoded name of the first place of a type in each row's place list (null if none)."""
    names = pc.struct_field(pc.extract_regex(places, pattern), "name")
    decoded, bad = form_decode(names.cast(pa.binary()))
    text, bad_utf = to_utf8(decoded)
    empty = pc.equal(pc.utf8_length(text), 0).fill_null(True)
    return pc.if_else(pc.or_(empty, pa.array(bad | bad_utf)), pa.scalar(None, pa.string()), text)


def parse_places_block(data: bytes) -> tuple[np.ndarray, list[pa.Array], int]:
    """(photo ids, [country, locality], lines skipped) of one block of places lines."""
    ids, places, keep, skipped = read_pairs(data)  # places not UTF-8-checked: names are, once decoded
    ok = pa.array(keep)
    return ids, [_place_name(places, _COUNTRY).filter(ok), _place_name(places, _LOCALITY).filter(ok)], skipped


class PlacesJoin(WindowJoin):
    """Looks up place_country / place_locality for successive batches of photo ids."""

    def __init__(self, path: Path, block_size: int = 8 << 20, slack: int = 65536):
        super().__init__(path, parse_places_block, [pa.string(), pa.string()], block_size, slack,
                         what="places file")

    def lookup(self, photo_ids: pa.Array) -> tuple[pa.Array, pa.Array]:  # type: ignore[override]
        country, locality = super().lookup(photo_ids)
        return country, locality
