"""Numeric fields (text) → numbers, the same for a value whatever the other values of its block.

A value is a number when it is made of the bytes a decimal number is written with (integers:
digits and `-`; floats: digits, `+`, `-`, `.`, `e`, `E`) and Arrow's cast takes it: `0x1F`
(which the cast would read as 31), `+5`, ` 5`, `inf` or `nan` are not numbers here; a 19-digit
id up to 2^63 - 1 is, and `1e0001` is 10. A whole column is cast at once; only when that fails
is it cut in halves until each value the cast refuses is found, so the answer for a value never
depends on which values share its block (as a regex fallback for failed blocks would).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mining.stages.ingest.formdecode import binary_buffers


def _bytes_of(text: bytes) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[list(text)] = True
    return table


INT_BYTES = _bytes_of(b"0123456789-")
FLOAT_BYTES = _bytes_of(b"0123456789+-.eE")
_INT_RANGE = {pa.int8(): (-128, 127), pa.int32(): (-(2**31), 2**31 - 1), pa.int64(): (None, None)}


def foreign(col: pa.Array, allowed: np.ndarray) -> np.ndarray:
    """Rows of a binary or string column holding a byte outside `allowed` (a numpy pass over its bytes)."""
    offsets, data = binary_buffers(col)
    bad = np.zeros(len(col), dtype=bool)
    pos = np.flatnonzero(~allowed[data])
    if pos.size:
        bad[np.searchsorted(offsets, pos, side="right") - 1] = True
    return bad


def cast_each(col: pa.Array, typ: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """`col` cast to `typ`, with the values the cast refuses as nulls, and the mask of those."""
    try:
        return pc.cast(col, typ), np.zeros(len(col), dtype=bool)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if len(col) <= 1:
            return pa.nulls(len(col), typ), np.ones(len(col), dtype=bool)
    mid = len(col) // 2
    (a, bad_a), (b, bad_b) = cast_each(col.slice(0, mid), typ), cast_each(col.slice(mid), typ)
    return pa.concat_arrays([a, b]), np.concatenate([bad_a, bad_b])


def _cast(col: pa.Array, typ: pa.DataType, allowed: np.ndarray) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """(values, empty mask, bad mask): empty values are null and not bad; values with a byte
    outside `allowed` or that the cast refuses are null and bad."""
    empty = pc.equal(pc.binary_length(col), 0).to_numpy(zero_copy_only=False)
    bad = foreign(col, allowed) & ~empty
    skip = empty | bad
    src = pc.if_else(pa.array(skip), pa.scalar(None, col.type), col) if skip.any() else col
    values, refused = cast_each(src, typ)
    return values, empty, bad | refused


def parse_ints(col: pa.Array, typ: pa.DataType, nullable: bool) -> tuple[pa.Array, np.ndarray]:
    """Integers of type `typ` (empty values are nulls when `nullable`, else bad); bad = not a
    decimal integer, or outside `typ`'s range."""
    ints, empty, bad = _cast(col, pa.int64(), INT_BYTES)
    if not nullable:
        bad |= empty
    lo, hi = _INT_RANGE[typ]
    if lo is not None:
        out_of = pc.or_(pc.less(ints, lo), pc.greater(ints, hi)).fill_null(False)
        oor = out_of.to_numpy(zero_copy_only=False)
        if oor.any():
            bad |= oor
            ints = pc.if_else(out_of, pa.scalar(None, pa.int64()), ints)
        ints = pc.cast(ints, typ)
    return ints, bad


def parse_floats(col: pa.Array) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """(float64 with nulls for empty values, present mask, unparsable mask)."""
    vals, empty, bad = _cast(col, pa.float64(), FLOAT_BYTES)
    return vals, ~empty, bad
