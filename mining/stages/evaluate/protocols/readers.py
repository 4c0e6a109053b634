"""A user's results for `mining evaluate --protocol`: where they are (`Results`) and the
readers of their files (.npy ranks or descriptors, name lists, ranked-list text files).

Index forms (.npy) use revisitop's layout: ranks[:, j] are query j's 0-based database
indices, best first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mining.errors import UserError


_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".tif", ".tiff", ".webp"}


@dataclass(frozen=True)
class Results:
    """Where a user's results are: `ranks` (.npy or the protocol's text/CSV form) or descriptors."""

    ranks: Path | None = None
    queries: Path | None = None  # .npy, one row per query
    database: Path | None = None  # .npy, one row per database image
    imlist: Path | None = None  # database image names, one a line (row/index order)
    qimlist: Path | None = None  # query names, one a line (row/column order)


def _load_npy(path: Path, what: str) -> np.ndarray:
    if not path.is_file():
        raise UserError(f"{path}: {what} not found")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - any failure to read is the user's file
        raise UserError(f"{path}: not a readable .npy array ({exc})") from None
    if not isinstance(arr, np.ndarray):
        raise UserError(f"{path}: expected one .npy array, not an archive")
    return arr


def read_name_list(path: Path, what: str) -> list[str]:
    """Non-empty lines of a text file (one name a line), refused if empty or repeated."""
    if not path.is_file():
        raise UserError(f"{path}: {what} not found")
    try:
        lines = [(n, line.strip()) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file ({what}: one name a line)") from None
    if not lines:
        raise UserError(f"{path}: empty ({what}: one name a line)")
    seen: set[str] = set()
    for n, name in lines:
        if name in seen:
            raise UserError(f"{path}:{n}: {name!r} is listed twice")
        seen.add(name)
    return [name for _, name in lines]


def read_ranks(path: Path, n_queries: int) -> np.ndarray:
    """A (list length, n_queries) integer .npy of 0-based database indices, best first per column."""
    arr = _load_npy(path, "ranks")
    if arr.ndim != 2 or arr.shape[1] != n_queries:
        raise UserError(f"{path}: ranks must have shape (list length, {n_queries} queries): column j holds "
                        f"query j's database indices, best first; got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise UserError(f"{path}: ranks must hold integer database indices, not {arr.dtype}")
    arr = np.asarray(arr, dtype=np.int64)
    if arr.size and arr.min() < 0:
        raise UserError(f"{path}: negative database index {int(arr.min())}")
    srt = np.sort(arr, axis=0)
    dup = np.argwhere(srt[1:] == srt[:-1])
    if dup.size:
        r, j = (int(v) for v in dup[0])
        raise UserError(f"{path}: query column {j} lists database index {int(srt[r, j])} twice")
    return arr


def read_descriptors(path: Path, what: str, dim: int | None = None) -> np.ndarray:
    arr = _load_npy(path, what)
    if arr.ndim != 2 or arr.shape[0] == 0 or (dim is not None and arr.shape[1] != dim):
        want = f"(rows, {dim})" if dim is not None else "(rows, dimensions)"
        raise UserError(f"{path}: {what} must be a non-empty {want} array, got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise UserError(f"{path}: {what} must be numbers, not {arr.dtype}")
    out = np.asarray(arr, dtype=np.float64 if arr.dtype == np.float64 else np.float32)
    if not np.isfinite(out).all():
        raise UserError(f"{path}: {what} hold NaN or infinite values")
    return out


def read_ranked_lists(path: Path) -> dict[str, list[str]]:
    """Ranked image names per query: a folder of `<query>.txt` files (one name a line, best
    first: the original Oxford `compute_ap` input), or one file of `QUERY NAME NAME ...` lines."""
    if path.is_dir():
        files = sorted(path.glob("*.txt"))
        if not files:
            raise UserError(f"{path}: no <query>.txt ranked lists")
        return {f.stem: read_text(f).split() for f in files}
    out: dict[str, list[str]] = {}
    for n, line in enumerate(read_text(path).splitlines(), 1):
        toks = line.split()
        if not toks:
            continue
        if toks[0] in out:
            raise UserError(f"{path}:{n}: query {toks[0]!r} has a second line "
                            "(expected one `QUERY NAME NAME ...` line per query, best first)")
        out[toks[0]] = toks[1:]
    if not out:
        raise UserError(f"{path}: empty (expected `QUERY NAME NAME ...` lines, best first)")
    return out


def read_text(path: Path) -> str:
    if not path.is_file():
        raise UserError(f"{path}: {'a folder, not a file' if path.is_dir() else 'not found'}")
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file") from None


def image_names(gt: Path) -> list[str]:
    """Image names of a Holidays / UKBench ground truth: its image folder, or a list (one a line)."""
    if gt.is_dir():
        names = sorted(p.name for p in gt.iterdir() if p.suffix.lower() in _IMAGE_SUFFIXES)
        if not names:
            raise UserError(f"{gt}: no images (expected the benchmark's image folder)")
        return names
    return read_name_list(gt, "image list")


def name_number(name: str, pattern: str, example: str) -> int:
    m = re.fullmatch(pattern, Path(name).stem)
    if not m:
        raise UserError(f"{name}: expected image names like {example}")
    return int(m.group(1))
