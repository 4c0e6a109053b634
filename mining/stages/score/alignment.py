"""Stream alignment: every method's candidates delivered in one common order, chunk by chunk.

Stores of different methods may hold different ids in different orders. `common_order` is
the first method's order, then the ids only later methods have. A method whose own order
agrees (the usual case: the same describe run) is streamed: `Cursor` hands out consecutive
runs of its blocks whatever their sizes, and for global descriptors `SimilarityStream`
computes the similarities itself. A method whose order disagrees is `spill`ed: its
similarities are written to a temporary file in the common order, so chunks read it aligned.

Why fixed pieces for global descriptors: BLAS rounds, in the last bits, differently for
different product shapes and threadings. The similarities are computed in pieces of PIECE
rows aligned on the method's own candidate order, each decoded, multiplied (single-threaded
BLAS) and counted by one thread while it is in cache; so a candidate's similarity, hence its
score, never depends on the chunk size or the thread count.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from mining.retrieval.descriptors import similarity_rows
from mining.errors import UserError
from mining.stages.score.inputs import CandidateVectors, MethodInput


def _length(block: "np.ndarray | CandidateVectors") -> int:
    return block.vectors.shape[0] if isinstance(block, CandidateVectors) else block.shape[1]


def _cut(block: "np.ndarray | CandidateVectors", a: int, b: int) -> "np.ndarray | CandidateVectors":
    return CandidateVectors(block.vectors[a:b]) if isinstance(block, CandidateVectors) else block[:, a:b]


def _join(blocks: list) -> "np.ndarray | CandidateVectors":
    if len(blocks) == 1:
        return blocks[0]
    if isinstance(blocks[0], CandidateVectors):
        return CandidateVectors(np.concatenate([b.vectors for b in blocks]))
    return np.concatenate(blocks, axis=1)


class Cursor:
    """Delivers a method's candidates in consecutive runs, whatever its block sizes are
    (blocks are concatenated or split as needed)."""

    def __init__(self, blocks: Iterator):
        self._it = blocks
        self._buf: list = []
        self._have = 0

    def take(self, n: int) -> "np.ndarray | CandidateVectors":
        while self._have < n:
            b = next(self._it)
            self._buf.append(b)
            self._have += _length(b)
        cat = _join(self._buf)
        rest = _length(cat) - n
        out = _cut(cat, 0, n) if rest else cat
        self._buf = [_cut(cat, n, n + rest)] if rest else []
        self._have -= n
        return out


PIECE = 2048  # candidates per GEMM piece: its decoded rows (≤ 4 MB at 512-d) stay in cache


class SimilarityStream:
    """A global method's similarities, computed from its `CandidateVectors` in pieces of
    PIECE rows aligned on the method's own candidate order, each piece decoded, multiplied
    (single-threaded BLAS) and counted by one thread while it is in cache.

    Why aligned pieces: BLAS results depend, in the last bits, on the shape of the product
    and on its threading. With every piece the same rows in the same shape on one thread,
    a candidate's similarity never depends on the chunk size or the thread count, so the
    score does not either. A piece that crosses a chunk's end is computed whole; its tail
    is carried to the next chunk.
    """

    def __init__(self, m: MethodInput, total: int):
        if m.query_vectors is None:
            raise ValueError(f"method {m.name}: CandidateVectors blocks need query_vectors")
        self.cursor = Cursor(iter(m.blocks()))
        self.query_t = np.ascontiguousarray(np.asarray(m.query_vectors, np.float32).T)
        self.total = total  # candidates in the stream
        self.done = 0  # rows handed out so far
        self.carry = np.zeros((0, self.query_t.shape[1]), np.float32)
        self.buf = np.zeros((0, self.query_t.shape[1]), np.float32)

    def run(self, n: int, pool: ThreadPoolExecutor, scratch: threading.local,
            count: Callable[[np.ndarray, int, int], None] | None) -> np.ndarray:
        """Similarities of the next n rows ((n, n_rows) view into a reused buffer), calling
        `count(sims, j0, j1)` on disjoint row ranges covering [0, n) as pieces complete."""
        c = self.carry.shape[0]
        fresh = 0 if n <= c else min(-(-(n - c) // PIECE) * PIECE, self.total - self.done - c)
        if self.buf.shape[0] < c + fresh:
            self.buf = np.empty((c + fresh, self.query_t.shape[1]), np.float32)
        sims = self.buf
        sims[:c] = self.carry
        vectors = self.cursor.take(fresh).vectors if fresh else None

        def piece(k: int) -> None:
            if k < 0:  # the carried rows: already computed
                j0, j1 = 0, min(c, n)
            else:
                j0, j1 = c + k * PIECE, c + min(fresh, (k + 1) * PIECE)
                similarity_piece(vectors[k * PIECE: (k + 1) * PIECE], self.query_t, sims[j0:j1], scratch)
                j1 = min(j1, n)
            if count is not None and j0 < j1:
                count(sims, j0, j1)

        tasks = ([-1] if c else []) + list(range(-(-fresh // PIECE)))
        list(pool.map(piece, tasks))
        self.carry = sims[n:c + fresh].copy()
        self.done += n
        return sims[:n]


def similarity_piece(vectors: np.ndarray, query_t: np.ndarray, out: np.ndarray, scratch: threading.local) -> None:
    """One task's similarities, its float16 rows decoded into the thread's own buffer (small
    enough to stay in cache for the GEMM that follows)."""
    buf = getattr(scratch, "buf", None)
    if vectors.dtype == np.float16 and (buf is None or buf.shape[0] < vectors.shape[0] or buf.shape[1] != vectors.shape[1]):
        buf = scratch.buf = np.empty(vectors.shape, np.float32)
    similarity_rows(vectors, query_t, out, buf)


def candidate_major(block: np.ndarray) -> np.ndarray:
    """A (n_rows, n_block) similarity block as a C-contiguous float32 (n_block, n_rows) array."""
    if isinstance(block, CandidateVectors):
        raise ValueError("a method yielding CandidateVectors needs query_vectors")
    return np.ascontiguousarray(np.asarray(block, np.float32).T)


def spill(m: MethodInput, pos: np.ndarray, n_total: int, tmpdir: Path, pool: ThreadPoolExecutor,
           scratch: threading.local, chunk: int) -> np.memmap:
    """A method whose order disagrees with the others: its similarities, written to a
    temporary (n_total, n_rows) file in the common order, so chunks can read it aligned."""
    n_rows = len(m.query_index)
    mm = np.lib.format.open_memmap(tmpdir / f"{len(list(tmpdir.iterdir()))}.npy", mode="w+",
                                   dtype=np.float32, shape=(n_total, max(n_rows, 1)))
    if m.query_vectors is not None:  # CandidateVectors: the same pieces as when streamed
        stream = SimilarityStream(m, len(pos))
        for start in range(0, len(pos), chunk):
            sims = stream.run(min(chunk, len(pos) - start), pool, scratch, None)
            if n_rows:
                mm[pos[start:start + sims.shape[0]]] = sims
    else:
        start = 0
        for block in m.blocks():
            n = _length(block)
            if n_rows:
                mm[pos[start:start + n]] = candidate_major(block)
            start += n
    mm.flush()
    return mm


def common_order(id_lists: Sequence[np.ndarray]) -> np.ndarray:
    """All candidate ids: the first method's order, then ids only later methods have."""
    import pandas as pd

    if not id_lists:
        return np.zeros(0, np.int64)
    first = np.asarray(id_lists[0], np.int64)
    if all(len(i) == len(first) and np.array_equal(np.asarray(i, np.int64), first) for i in id_lists[1:]) \
            and len(pd.unique(first)) == len(first):
        return first
    return pd.unique(np.concatenate([np.asarray(i, np.int64) for i in id_lists]))


class Alignment:
    """The common candidate order, and where each method's candidates sit in it."""

    def __init__(self, id_lists: Sequence[np.ndarray]):
        self.ids = common_order(id_lists)
        self._index = None

    def positions(self, name: str, ids: np.ndarray) -> tuple[np.ndarray, bool]:
        """Common-order index of each of the method's candidates, and whether they come in
        increasing order (then the method is streamed; otherwise spilled)."""
        import pandas as pd

        ids_m = np.asarray(ids, np.int64)
        n = len(self.ids)
        if len(ids_m) == n and np.array_equal(ids_m, self.ids):  # the usual case: same store order
            pos = np.arange(n, dtype=np.int64)  # (self.ids holds no duplicates)
        else:
            if len(pd.unique(ids_m)) != len(ids_m):
                raise UserError(f"method {name}: candidate store holds duplicate ids")
            self._index = pd.Index(self.ids) if self._index is None else self._index
            pos = self._index.get_indexer(ids_m).astype(np.int64)
        return pos, bool(np.all(np.diff(pos) > 0))
