"""Descriptor stores: what `describe` writes and `score`/`evaluate` read.

Layout of a store folder:
  store.json                 {"method", "kind", "set", "dim", "params", ...}, written when complete
  describe.json              the settings the store is being written with (what a resume checks)
  shards/<NNNNN>.ids.parquet column `id` (string): one row per described image, in order
  shards/<NNNNN>.npy         kind "global": float16 array (n, dim), L2-normalised rows
  shards/<NNNNN>.<other>     other kinds: whatever their method's payload is
A shard is complete iff its `.ids.parquet` exists (written last, atomically).

The store knows no method: a global store's rows are plain data (kind, dim), and a store of
another kind reads, joins and compares its payloads with the method its opener hands it
(`method_of`: a method's name -> an object with `load_payload`, `concat_payloads` and
`similarity`, which the stages take from the method registry, `mining.methods.get_method`).

Why one module: the store format is the contract between describe and its readers, and
`iter_similarities` is the one place where "similarity of queries to a database" is
computed, whatever the method (a GEMM for global descriptors, the method's own kernel for
local ones).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from mining.files import atomic
from mining.errors import UserError
from mining.files.names import STORE
from mining.files.npyfile import npy_file
from mining.files.tables import read_file, read_json

GLOBAL = "global"  # the store kind of global descriptors (a method of another kind names its own)
MODEL_FILE = "model.npz"  # a learning method's state (whitening, codebook), in its candidates store
DAMAGED = "; the store was changed or damaged: describe this set again"


@dataclass
class Store:
    """A read-only view of a descriptor store folder."""

    path: Path
    info: dict[str, Any]
    method_of: Callable[[str], Any] | None = field(default=None, repr=False)
    _ids_cache: list[str] | None = field(default=None, repr=False)

    @property
    def method(self) -> str:
        return str(self.info["method"])

    @property
    def kind(self) -> str:
        return str(self.info.get("kind", GLOBAL))

    def method_impl(self) -> Any:
        """The method that reads this (non-global) store's payloads, as its opener handed it."""
        if self.method_of is None:
            raise ValueError(f"{self.path}: the payloads of a store of kind {self.kind!r} are read by its method; "
                             "open it with method_of (mining.methods.get_method)")
        return self.method_of(self.method)

    def shard_names(self) -> list[str]:
        """Complete shards, in order."""
        return sorted(p.name[: -len(".ids.parquet")] for p in (self.path / "shards").glob("*.ids.parquet"))

    def shard_ids(self, shard: str) -> list[str]:
        return read_file(self.path / "shards" / f"{shard}.ids.parquet", ["id"]).column("id").to_pylist()

    def ids(self) -> list[str]:
        if self._ids_cache is None:
            out: list[str] = []
            for s in self.shard_names():
                out.extend(self.shard_ids(s))
            self._ids_cache = out
        return self._ids_cache

    def load_payload(self, shard: str) -> Any:
        if self.kind == GLOBAL:
            path = self.path / "shards" / f"{shard}.npy"
            npy_file(path, damaged=DAMAGED)  # its header against its size, before numpy allocates
            return self._checked(shard, np.load(path, allow_pickle=False))

        return self.method_impl().load_payload(self.path / "shards", shard, self.info)

    def _checked(self, shard: str, rows: np.ndarray) -> np.ndarray:
        """A global shard's rows, refused in one line when a row is not a direction (NaN, inf,
        zeros): every similarity with it would be NaN or 0, and the scores a silent wrong answer."""
        bad = ~np.isfinite(rows).all(axis=1) if rows.ndim == 2 else np.zeros(0, bool)
        zero = ~rows.any(axis=1) if rows.ndim == 2 else np.zeros(0, bool)
        if bad.any() or zero.any():
            row = int(np.flatnonzero(bad | zero)[0])
            what = "has NaN or infinite values" if bad[row] else "is all zeros"
            raise UserError(f"{self.path}: shard {shard} row {row} ({self.shard_ids(shard)[row]}) {what} "
                            f"({int(bad.sum())} row(s) not finite, {int(zero.sum())} of zeros): not a descriptor; "
                            "describe this set again with a current `mining describe`, which refuses such rows")
        return rows

    def iter_blocks(self) -> Iterator[tuple[list[str], Any]]:
        """(ids, payload) per shard; memory stays at one shard."""
        for s in self.shard_names():
            yield self.shard_ids(s), self.load_payload(s)

    def load_all(self, as_stored: bool = False) -> tuple[list[str], Any]:
        """All ids and, for global stores, one stacked float32 matrix (for small sets: queries).

        `as_stored`: the global rows as the store keeps them (float16: half the memory, for a
        caller that decodes a tile at a time)."""
        ids: list[str] = []
        blocks: list[Any] = []
        for i, b in self.iter_blocks():
            ids.extend(i)
            blocks.append(b)
        if self.kind == GLOBAL:
            dim = int(self.info.get("dim", 0))
            if not blocks:
                return ids, np.zeros((0, dim), np.float16 if as_stored else np.float32)
            mat = np.concatenate(blocks)
            del blocks  # the shards' copies: one stacked matrix in memory at a time after this
            return ids, mat if as_stored else as_float32(mat)

        return ids, self.method_impl().concat_payloads(blocks, self.info)


def open_store(path: str | Path, method_of: Callable[[str], Any] | None = None) -> Store:
    """The store at `path`; `method_of` reads a non-global store's payloads (the class docstring)."""
    p = Path(path)
    meta = p / STORE
    if not meta.is_file():
        raise UserError(f"{p}: not a descriptor store (no {STORE}; run `mining describe` first)")
    info = read_json(meta, STORE)
    if not isinstance(info, dict) or not isinstance(info.get("method"), str):
        raise UserError(f"{meta}: not a descriptor store's {STORE} (no method name); describe the images again")
    return Store(p, info, method_of)


def payload_digest(path: str | Path) -> str:
    """sha256 of a store's bytes that do not name a machine: every shard file and the learned
    state (model.npz), by relative path (store.json, which records the folders it read, is left
    out). Two rebuilds of one store agree on it wherever they ran (docs/reproducibility.md)."""
    root = Path(path)
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink() and (p.parent.name == "shards" or p.name == "model.npz"):
            h.update(str(p.relative_to(root)).encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def write_store_info(path: str | Path, info: dict[str, Any]) -> None:
    atomic.write_json(Path(path) / STORE, info)


def write_global_shard(path: str | Path, shard: str, ids: list[str], vectors: np.ndarray) -> None:
    """Write one shard of a global store: payload first, ids last (the completion marker)."""
    shards = Path(path) / "shards"
    shards.mkdir(parents=True, exist_ok=True)
    with atomic.atomic_path(shards / f"{shard}.npy") as tmp:
        with open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(vectors, dtype=np.float16))
    write_ids(path, shard, ids)


def write_shard(method: Any, path: str | Path, shard: str, ids: list[str], payloads: list[Any]) -> None:
    """Write one described shard of `method` into the store at `path`: its extras, its payloads,
    then the ids (the completion marker)."""
    shards = Path(path) / "shards"
    shards.mkdir(parents=True, exist_ok=True)
    payloads = method.write_extras(shards, shard, payloads)
    if method.kind == GLOBAL:
        vecs = np.stack(payloads) if payloads else np.zeros((0, method.dim()), np.float32)
        write_global_shard(path, shard, ids, vecs)
    else:
        method.write_payloads(shards, shard, payloads)
        write_ids(path, shard, ids)


def write_ids(path: str | Path, shard: str, ids: list[str]) -> None:
    """The shard's completion marker; call after its payload is written."""
    atomic.write_parquet(Path(path) / "shards" / f"{shard}.ids.parquet", pa.table({"id": pa.array(ids, pa.string())}))


def l2_normalize(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Unit rows; zero rows stay zero (an image without features matches nothing)."""
    n = np.linalg.norm(x, axis=axis, keepdims=True)
    return x / np.maximum(n, 1e-12)


def as_float32(block: Any, out: np.ndarray | None = None) -> np.ndarray:
    """Rows as float32 for BLAS. float16 rows (how stores keep them) are decoded by a compiled
    loop on the CPU's conversion instruction: equal to numpy's cast for every non-NaN value
    and ~8x faster, which matters because for a few dozen queries the cast would cost more
    than the matrix product itself. `out` (same shape, float32): decode into it instead of
    a new array."""
    a = np.asarray(block)
    if a.dtype != np.float16:
        return np.asarray(a, np.float32)

    out = np.empty(a.shape, np.float32) if out is None else out
    from mining.retrieval.kernels import decode_f16  # numba: ~0.5 CPU s to import, not needed to write a store

    decode_f16(np.ascontiguousarray(a).view(np.uint16), out)
    return out


def similarity_rows(vectors: np.ndarray, queries_t: np.ndarray, out: np.ndarray,
                    scratch: np.ndarray | None = None) -> np.ndarray:
    """`out[i, q] = vectors[i] · queries[q]` for global descriptors, candidate-major (n, n_q),
    `queries_t` being (dim, n_q) float32. float16 rows are decoded into `scratch` (≥ n rows)
    when given: the score loop passes a small per-thread buffer so the decoded rows are
    still in cache for the GEMM (measured: decode + GEMM this way is faster than a float32
    GEMM reading twice the bytes)."""
    v = np.asarray(vectors)
    buf = scratch[: v.shape[0]] if scratch is not None and v.dtype == np.float16 else None
    np.matmul(as_float32(v, buf), queries_t, out=out)
    return out


def similarity_function(queries: Store, database: Store) -> Callable[[Any, Any], np.ndarray]:
    """The kernel that maps (query payload, database payload) to a float32 (nq, n) matrix."""
    if queries.method != database.method:
        raise UserError(f"query store is {queries.method!r} but database store is {database.method!r}")
    if queries.kind == GLOBAL:
        return lambda q, d: as_float32(q) @ as_float32(d).T

    method = queries.method_impl()
    return lambda q, d: method.similarity(q, d, database.info)


def iter_similarities(queries: Store, database: Store) -> Iterator[tuple[list[str], np.ndarray]]:
    """Stream (database ids, similarities (n_queries, n_block) float32) one shard at a time."""
    _, q = queries.load_all()
    sim = similarity_function(queries, database)
    for ids, block in database.iter_blocks():
        yield ids, sim(q, block)
