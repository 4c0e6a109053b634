"""Vectorised form-URL decoding (`+` = space, `%XX` = byte) and UTF-8 checks of Arrow columns.

Why not `urllib.parse.unquote_plus` per value: YFCC100M has ~100M rows with several encoded
text fields each; a Python call per value would dominate the ingest. Here a column's data
buffer is decoded in a few numpy passes, and a `%` not followed by two hex digits (which
`urllib` would silently keep) marks its row as broken instead. Tag lists are split at their
raw commas in the same pass (split first, then decode: `%2C` is a comma inside a tag).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mining.compute.jit import compiled

# each byte's value as a hex digit (either case); -1 for a byte that is not one
HEX_DIGITS = np.full(256, -1, dtype=np.int16)
for _i, _c in enumerate(b"0123456789"):
    HEX_DIGITS[_c] = _i
for _i, _c in enumerate(b"abcdef"):
    HEX_DIGITS[_c] = 10 + _i
    HEX_DIGITS[_c - 32] = 10 + _i  # upper case

# UTF-8: how many continuation bytes each lead byte needs; -1 = never valid in UTF-8
_NEED = np.zeros(256, dtype=np.int8)
_NEED[0xC2:0xE0], _NEED[0xE0:0xF0], _NEED[0xF0:0xF5] = 1, 2, 3
_NEED[[0xC0, 0xC1]] = -1
_NEED[0xF5:] = -1
# second-byte limits that rule out overlong forms and surrogates: lead -> (lo, hi)
_SECOND = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F), 0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}

_PCT, _PLUS, _SPACE, _COMMA = 37, 43, 32, 44


def binary_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets starting at 0, data bytes) of a binary array, honouring its slice offset."""
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    data = data[offsets[0] : offsets[-1]]
    return offsets - offsets[0], data


def _binary(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(
        pa.binary(), len(offsets) - 1, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )


@compiled
def _decode_values(offsets, data, split, hexv, out, starts, bad, counts):  # pragma: no cover (compiled)
    """One pass over every value: `+` -> space, `%XX` -> byte (a `%` without two hex digits
    inside the same value stays and marks its value bad), and with `split` a raw comma ends
    an output value (an empty input value gives none). Returns (output bytes, output values)."""
    o = 0
    v = 0
    for i in range(offsets.size - 1):
        s, e = offsets[i], offsets[i + 1]
        if split and e == s:
            counts[i] = 0
            continue
        starts[v] = o
        v += 1
        c = 1
        j = s
        while j < e:
            b = data[j]
            if b == 37:  # %
                if j + 2 < e and hexv[data[j + 1]] >= 0 and hexv[data[j + 2]] >= 0:
                    out[o] = hexv[data[j + 1]] * 16 + hexv[data[j + 2]]
                    o += 1
                    j += 3
                    continue
                bad[i] = True
                out[o] = b
            elif b == 43:  # +
                out[o] = 32
            elif split and b == 44:  # a raw comma: the next value starts
                starts[v] = o
                v += 1
                c += 1
                j += 1
                continue
            else:
                out[o] = b
            o += 1
            j += 1
        counts[i] = c
    starts[v] = o
    return o, v


def _decode(offsets: np.ndarray, data: np.ndarray, split: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode the values between `offsets`; optionally split each value at its raw commas.

    Returns (decoded data, offsets of the output values, per input value: bad escape?,
    per input value: number of output values). A compiled single pass (`_decode_values`):
    about 4x the numpy passes it replaced (same results; tests compare with urllib).
    """
    n = len(offsets) - 1
    bad = np.zeros(n, dtype=bool)
    counts = np.ones(n, dtype=np.int64)
    if not split and not np.any((data == _PCT) | (data == _PLUS)):
        return data, offsets.astype(np.int64), bad, counts
    out = np.empty(len(data), dtype=np.uint8)
    starts = np.empty(n + 1 + (int(np.count_nonzero(data == _COMMA)) if split else 0), dtype=np.int64)
    size, values = _decode_values(offsets.astype(np.int64), data, split, HEX_DIGITS, out, starts, bad, counts)
    return out[:size], starts[: values + 1], bad, counts


def form_decode(arr: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Decode every value of a binary column; return (binary column, bool mask of bad %-escapes).

    The output may still hold invalid UTF-8 (a valid escape can encode any byte): callers
    validate that when casting to string.
    """
    arr = arr.cast(pa.binary()) if arr.type != pa.binary() else arr
    offsets, data = binary_buffers(arr)
    data, new_offsets, bad, _ = _decode(offsets, data, split=False)
    out = _binary(new_offsets, data)
    if arr.null_count:  # keep the nulls where they were
        out = pc.if_else(pc.is_valid(arr), out, pa.scalar(None, pa.binary()))
    return out, bad


def split_decode(arr: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Comma-separated, form-encoded values → list<string> (split first, then decode).

    An empty value is an empty list. Returns (lists, bool mask of bad escapes or UTF-8).
    """
    offsets, data = binary_buffers(arr.cast(pa.binary()) if arr.type != pa.binary() else arr)
    data, value_offsets, bad, counts = _decode(offsets, data, split=True)
    values = _binary(value_offsets, data)
    text, bad_values = to_utf8(values)
    if bad_values.any():
        bad[np.repeat(np.arange(len(counts)), counts)[bad_values]] = True
    list_offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(list_offsets), text), bad


def utf8_bad_rows(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Bool mask of the values between `offsets` that are not valid UTF-8 (vectorised)."""
    n = len(offsets) - 1
    bad = np.zeros(n, dtype=bool)
    if not len(data):
        return bad
    need = _NEED[data]
    cont = (data & 0xC0) == 0x80
    errors = [np.flatnonzero(need < 0)]
    leads = np.flatnonzero(need > 0)
    lrow = np.searchsorted(offsets, leads, side="right") - 1
    lend = offsets[lrow + 1]
    lneed = need[leads]
    expected = np.zeros(len(data), dtype=bool)
    for k in (1, 2, 3):
        has = lneed >= k
        fits = has & (leads + k < lend)
        expected[leads[fits] + k] = True
        errors.append(leads[has & ~fits])  # truncated at the end of its value
    errors.append(np.flatnonzero(cont != expected))
    for lead, (lo, hi) in _SECOND.items():
        at = leads[(data[leads] == lead) & (leads + 1 < lend)]
        second = data[at + 1]
        errors.append(at[(second < lo) | (second > hi)])
    pos = np.concatenate(errors)
    if len(pos):
        bad[np.searchsorted(offsets, pos, side="right") - 1] = True
    return bad


def to_utf8(arr: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Cast a binary column to string; return (string column, bool mask of invalid UTF-8 rows).

    Invalid values become null. The whole-column cast validates in C++; only a column that
    fails is checked again (vectorised) to find its bad rows.
    """
    if arr.type == pa.string():  # already checked (the fast path validates whole blocks)
        return arr, np.zeros(len(arr), dtype=bool)
    try:
        return pc.cast(arr, pa.string()), np.zeros(len(arr), dtype=bool)
    except pa.ArrowInvalid:
        pass
    offsets, data = binary_buffers(arr)
    bad = utf8_bad_rows(offsets, data)
    cleaned = pc.if_else(pa.array(~bad), arr, pa.scalar(None, arr.type))
    return pc.cast(cleaned, pa.string()), bad
