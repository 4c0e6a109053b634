"""A .npy array read by its header first: its dtype and shape checked against the bytes that
follow before numpy allocates any (a header may claim terabytes in a 200-byte file), and no
pickle or object. Used on whatever another hand made: a kit, a user's --queries store, a
descriptor store's shards."""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

import numpy as np

from mining.errors import UserError

_MAX_HEADER = 10_000  # bytes of a .npy header (numpy's own limit)


def npy_header(f: BinaryIO, path: Path | str, size: int, damaged: str = "") -> tuple[np.dtype, tuple[int, ...]]:
    """(dtype, shape) of the .npy array that starts at f's position, from its header only; its
    data must be the `size` bytes that follow the header exactly. No pickle, no object.
    `path`: what the message names; `damaged`: what it ends with."""
    try:
        start = f.tell()
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f, max_header_size=_MAX_HEADER)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f, max_header_size=_MAX_HEADER)
        else:
            raise ValueError(f"format version {version}")
    except (ValueError, OSError, SyntaxError, TypeError) as exc:
        raise UserError(f"{path}: not a .npy array ({exc}){damaged}") from None
    if dtype.hasobject or dtype.fields is not None or dtype.kind not in "biufcUS":
        raise UserError(f"{path}: holds {dtype} values, not numbers or text (objects and pickles are refused){damaged}")
    if fortran and len(shape) > 1:
        raise UserError(f"{path}: holds a Fortran-ordered array, not C order{damaged}")
    data = size - (f.tell() - start)
    need = int(np.prod(shape, dtype=object)) * dtype.itemsize  # Python ints: no overflow
    if need != data:
        raise UserError(f"{path}: its header declares a {dtype} array of shape {shape} ({need:,} bytes) but "
                        f"{data:,} bytes follow it{damaged}")
    return dtype, tuple(int(s) for s in shape)


def npy_file(path: Path, name: Path | str | None = None, damaged: str = "") -> tuple[np.dtype, tuple[int, ...]]:
    """(dtype, shape) of the .npy file `path` by its header (`npy_header`), checked against the
    file's real size before numpy allocates a byte; `name`: what a refusal names (the path)."""
    try:
        with open(path, "rb") as f:
            return npy_header(f, path if name is None else name, os.fstat(f.fileno()).st_size, damaged)
    except FileNotFoundError:
        raise UserError(f"{path if name is None else name}: missing{damaged}") from None
