"""YFCC's photo hash: the `yfcc100m_hash` file (`photoid<TAB>hash` lines) joined onto dataset
rows, and the count that compares each row's hash with the mirror's key.

The join is window.py's sliding-window merge, so the hash file must list the photos in the
dataset's order (the order of the dataset file(s) as given, rowid order for SQLite); one that
does not stops the ingest with one line (`ordered=True`). Lines whose id is not a positive
integer, or whose hash is not 1-64 hex digits, are skipped (counted).

`compare` is what stats.json's `photo_hash` section counts. The mirror (Multimedia Commons)
names an image by `flickr.yfcc_hash(download_url)`: the MD5 of the download URL with each byte
in hex *without* a leading zero. Whether the hash field of the 25-field file (or of the hash
file) is that key, the zero-padded MD5, or something else has not been checked on real data
here; the counts let a user see it on their own file.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mining.photos.flickr import yfcc_hash
from mining.stages.ingest.window import WindowJoin, read_pairs

HASH_COUNTS = ("same", "same_zero_padded", "different", "missing")


def parse_hash_block(data: bytes) -> tuple[np.ndarray, list[pa.Array], int]:
    """(photo ids, [hash], lines skipped) of one block of hash lines."""
    ids, hashes, keep, skipped = read_pairs(data)
    hashes = hashes.filter(pa.array(keep))
    hexes = pc.match_substring_regex(hashes, r"^[0-9A-Fa-f]{1,64}$").to_numpy(zero_copy_only=False)
    return ids[hexes], [hashes.filter(pa.array(hexes)).cast(pa.string())], skipped + int((~hexes).sum())


class HashJoin(WindowJoin):
    """Looks up the hash of successive batches of photo ids (the file in the dataset's order)."""

    def __init__(self, path: Path, block_size: int = 8 << 20, slack: int = 65536):
        super().__init__(path, parse_hash_block, [pa.string()], block_size, slack, ordered=True,
                         what="hash file", one_value=True)

    def fill(self, table: pa.Table) -> pa.Table:
        """The table with its null or empty photo_hash values filled from the file where it has
        the photo (a dataset file's own hash is kept)."""
        (found,) = self.lookup(table.column("photo_id").combine_chunks())
        own = table.column("photo_hash").combine_chunks()
        has_own = pc.fill_null(pc.greater(pc.utf8_length(own), 0), False)
        filled = pc.if_else(has_own, own, pc.coalesce(found, own))
        return table.set_column(table.schema.get_field_index("photo_hash"), "photo_hash", filled)


def _padded_hex(digests: np.ndarray) -> pa.Array:
    """The 32-digit hex of each row's 16 digest bytes, as an Arrow string array."""
    n = len(digests)
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(digests.tobytes().hex().encode())])


def compare(photo_hash: pa.Array, download_url: pa.Array) -> dict[str, int]:
    """Per row, the hash against `yfcc_hash(download_url)`: same, same_zero_padded (the 32-digit
    zero-padded MD5 of the URL; where no byte is below 0x10 both forms are the same text and
    the row counts as `same`), different, or missing (null or empty).

    One MD5 per row; the zero-padded form is compared column-wise, and `yfcc_hash` is called
    only for the rows whose hash could be it (the length it would have, not the padded form)."""
    counts = dict.fromkeys(HASH_COUNTS, 0)
    present = pc.fill_null(pc.greater(pc.utf8_length(photo_hash), 0), False)  # null or empty: missing
    hashes, urls = photo_hash.filter(present), download_url.filter(present)
    counts["missing"] = len(photo_hash) - len(hashes)
    if not len(hashes):
        return counts
    url_bytes = urls.cast(pa.binary()).to_pylist()  # UTF-8: the bytes yfcc_hash digests
    digests = np.frombuffer(b"".join(hashlib.md5(u).digest() for u in url_bytes), np.uint8).reshape(-1, 16)
    high = digests >= 16  # bytes whose hex has two digits either way
    padded = pc.equal(hashes, _padded_hex(digests)).to_numpy(zero_copy_only=False)
    same = padded & high.all(axis=1)
    counts["same_zero_padded"] = int((padded & ~same).sum())
    length = pc.utf8_length(hashes).to_numpy(zero_copy_only=False)
    maybe = np.flatnonzero(~padded & (length < 32) & (length == 16 + high.sum(axis=1)))
    given = hashes.take(pa.array(maybe)).to_pylist()
    unpadded = sum(given[k] == yfcc_hash(url_bytes[i].decode("utf-8")) for k, i in enumerate(maybe))
    counts["same"] = int(same.sum()) + unpadded
    counts["different"] = len(hashes) - counts["same"] - counts["same_zero_padded"]
    return counts
