"""Vectorised form-URL decoding (`+` = space, `%XX` = byte) of whole Arrow columns.

Why not `urllib.parse.unquote_plus` per value: YFCC100M has ~100M rows with several encoded
text fields each; a Python call per value would dominate the ingest. Here a column's data
buffer is decoded in a few numpy passes, and a `%` not followed by two hex digits (which
`urllib` would silently keep) marks its row as broken instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_HEX = np.full(256, -1, dtype=np.int16)
for _i, _c in enumerate(b"0123456789"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"abcdef"):
    _HEX[_c] = 10 + _i
    _HEX[_c - 32] = 10 + _i  # upper case

_PCT = 37  # '%'
_PLUS = 43  # '+'
_SPACE = 32


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets starting at 0, data bytes) of a binary array, honouring its slice offset."""
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    data = data[offsets[0] : offsets[-1]]
    return offsets - offsets[0], data


def form_decode(arr: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Decode every value of a binary column; return (binary column, bool mask of bad %-escapes).

    The output may still hold invalid UTF-8 (a valid escape can encode any byte): callers
    validate that when casting to string.
    """
    arr = arr.cast(pa.binary()) if arr.type != pa.binary() else arr
    n = len(arr)
    bad = np.zeros(n, dtype=bool)
    offsets, data = _buffers(arr)
    if not len(data):
        return arr, bad
    pct = np.flatnonzero(data == _PCT)
    plus = data == _PLUS
    has_plus = bool(plus.any())
    if not len(pct) and not has_plus:
        return arr, bad
    data = data.copy()
    if has_plus:
        np.putmask(data, plus, _SPACE)
    if len(pct):
        nbytes = len(data)
        row = np.searchsorted(offsets, pct, side="right") - 1
        inside = pct + 2 < offsets[row + 1]  # both hex digits belong to the same value
        hi = np.full(len(pct), -1, dtype=np.int16)
        lo = np.full(len(pct), -1, dtype=np.int16)
        hi[inside] = _HEX[data[pct[inside] + 1]]
        lo[inside] = _HEX[data[np.minimum(pct[inside] + 2, nbytes - 1)]]
        ok = inside & (hi >= 0) & (lo >= 0)
        bad[row[~ok]] = True
        good = pct[ok]
        if len(good):
            data[good] = (hi[ok] * 16 + lo[ok]).astype(np.uint8)
            keep = np.ones(nbytes, dtype=bool)
            keep[good + 1] = False
            keep[good + 2] = False
            data = data[keep]
            # every escape before a value's start shrank the data by 2 bytes
            offsets = (offsets - 2 * np.searchsorted(good, offsets, side="left")).astype(np.int32)
    out = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if arr.null_count:  # keep the nulls where they were
        out = pc.if_else(pc.is_valid(arr), out, pa.scalar(None, pa.binary()))
    return out, bad


def to_utf8(arr: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Cast a binary column to string; return (string column, bool mask of invalid UTF-8 rows).

    Invalid values become null. The whole-column cast validates in C++; only a column that
    fails is checked value by value (rare: broken rows are a few percent at most).
    """
    try:
        return pc.cast(arr, pa.string()), np.zeros(len(arr), dtype=bool)
    except pa.ArrowInvalid:
        pass
    values = arr.to_pylist()
    bad = np.zeros(len(arr), dtype=bool)
    for i, v in enumerate(values):
        if v is not None:
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                bad[i] = True
    cleaned = pc.if_else(pa.array(~bad), arr, pa.scalar(None, arr.type))
    return pc.cast(cleaned, pa.string()), bad
