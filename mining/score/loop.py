"""The distractor score: how many positives of each landmark query a candidate outranks.

For method m, query q with positives P_q and candidate d,
`frac(d; q, m) = (#{p: s(q,p) < s(q,d)} + ½·#{p: s(q,p) == s(q,d)}) / |P_q|`, and
`score(d) = Σ_m Σ_q frac(d; q, m)` (docs: architecture.md, "The distractor score").

Why it is built this way:
- Streaming and exact: candidates go through in chunks aligned across methods (stores of
  different methods may hold different ids in different orders), and every per-candidate
  number is computed element-wise in a fixed order (methods, then queries), so the result
  does not depend on the chunk size or the thread count: streaming == in-memory, bit for
  bit. For global descriptors this includes the similarities themselves: BLAS rounds
  differently for different product shapes and threadings, so they are computed in fixed
  pieces aligned on each method's own candidate order, one BLAS thread per piece.
- Fast: per piece of PIECE candidates one thread decodes the float16 rows, multiplies them
  (float32 GEMM) and counts them while they are in cache (`mining.kernels`); the counting
  uses a per-query table over a monotone bucketing of the similarity, exact by
  construction (a bucket that holds no positive tells the count directly; only values
  sharing a bucket with a positive are compared to it). `benchmarks/score.py`: total ≈
  1.8x the bare float32 GEMMs at 4.1M candidates × 70 queries × 3 methods.
- Bounded memory: per method a (chunk × n_queries) block, per candidate only the output
  columns; the per-landmark top K (the review queue) is merged chunk by chunk, and only
  the candidates entering it get their best query worked out.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from mining.cluster import available_cpus
from mining.errors import UserError

log = logging.getLogger(__name__)

DEFAULT_CHUNK = 32768
DEFAULT_REVIEW_TOP = 2000
_BUCKETS_PER_POSITIVE = 32
_MIN_BUCKETS = 1024


# ----------------------------------------------------------------------------- counting
@dataclass
class PositiveCounter:
    """Counts `2·#{p < s} + #{p == s}` for many s against one query's sorted positives.

    The bucketing `b(s) = int(clip((s - lo) · k, 0, B + 1))` (`mining.kernels.bucket`) is
    monotone in s, and the positives are bucketed by the very same compiled function; so for
    an s in bucket b every positive in a lower bucket is < s and every one in a higher bucket
    is > s. `first[b]` (positives below bucket b) gives the count directly; only the positives
    sharing s's bucket are compared (ties count one half).
    """

    positives: np.ndarray  # sorted float32
    lo: np.float32
    scale: np.float32
    n_buckets: int
    first: np.ndarray  # int32 (n_buckets + 3,): number of positives in buckets < b

    @classmethod
    def build(cls, positive_sims: np.ndarray) -> "PositiveCounter":
        from mining.kernels import bucket_many

        pos = np.sort(np.asarray(positive_sims, dtype=np.float32))
        if pos.size == 0 or not np.all(np.isfinite(pos)):
            raise ValueError("positives must be a non-empty finite array")
        n_buckets = max(_MIN_BUCKETS, _BUCKETS_PER_POSITIVE * pos.size)
        span = float(pos[-1]) - float(pos[0])
        width = span / n_buckets if span > 0 else 1.0
        lo = np.float32(float(pos[0]) - width)  # one empty bucket below the lowest positive
        scale = np.float32(1.0 / width)
        b = np.empty(pos.size, np.int64)
        bucket_many(pos, lo, scale, n_buckets, b)
        first = np.searchsorted(b, np.arange(n_buckets + 3), side="left").astype(np.int32)
        return cls(pos, lo, scale, n_buckets, first)

    def count2(self, sims: np.ndarray) -> np.ndarray:
        """int64 array: 2·#{p < s} + #{p == s} for each s in `sims` (float32, 1-D); the same
        compiled kernel as the score loop, with a fraction weight of 1."""
        s = np.ascontiguousarray(sims, dtype=np.float32).reshape(-1, 1)
        packed = _Counters.pack([self], np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64))
        packed.inv[:] = 1.0
        out = np.zeros(s.shape[0])
        packed.count_block(s, 0, s.shape[0], np.zeros(s.shape[0], np.int64), out, np.zeros((1, 1)))
        return out.astype(np.int64)


@dataclass
class _Counters:
    """Counters packed into flat arrays for `mining.kernels.count_block`; entry k counts
    similarity row `rows[k]` (dataset query `query[k]`, landmark `landmark[k]`)."""

    rows: np.ndarray
    query: np.ndarray
    landmark: np.ndarray
    inv: np.ndarray  # 1 / (2·|P|): count2 · inv is the fraction
    lo: np.ndarray
    scale: np.ndarray
    n_buckets: np.ndarray
    tab_off: np.ndarray
    first: np.ndarray
    pos_off: np.ndarray
    positives: np.ndarray

    @classmethod
    def pack(cls, single: list[PositiveCounter], rows: np.ndarray, query: np.ndarray,
             landmark: np.ndarray) -> "_Counters":
        def offsets(arrays: list[np.ndarray]) -> np.ndarray:
            return np.cumsum([0] + [a.size for a in arrays[:-1]]).astype(np.int64)

        return cls(
            rows=rows, query=query, landmark=landmark,
            inv=np.array([1.0 / (2.0 * c.positives.size) for c in single], np.float64),
            lo=np.array([c.lo for c in single], np.float32),
            scale=np.array([c.scale for c in single], np.float32),
            n_buckets=np.array([c.n_buckets for c in single], np.int64),
            tab_off=offsets([c.first for c in single]) if single else np.zeros(0, np.int64),
            first=np.concatenate([c.first for c in single]) if single else np.zeros(1, np.int32),
            pos_off=offsets([c.positives for c in single]) if single else np.zeros(0, np.int64),
            positives=np.concatenate([c.positives for c in single]) if single else np.zeros(1, np.float32),
        )

    @classmethod
    def build(cls, m: "MethodInput", q_landmark: np.ndarray) -> "_Counters":
        """A method's counters: one per similarity row whose query has positives."""
        rows = [row for row, ps in enumerate(m.positive_sims) if len(ps)]
        single = [PositiveCounter.build(m.positive_sims[row]) for row in rows]
        rows_a = np.array(rows, np.int64)
        query = np.asarray(m.query_index, np.int64)[rows_a] if rows else np.zeros(0, np.int64)
        return cls.pack(single, rows_a, query, q_landmark[query].astype(np.int64))

    def subset(self, keep: np.ndarray) -> "_Counters":
        """Only the counters `keep` (indices or mask); tables and positives are shared."""
        per_k = {f: getattr(self, f)[keep] for f in ("rows", "query", "landmark", "inv", "lo", "scale",
                                                      "n_buckets", "tab_off", "pos_off")}
        return _Counters(**per_k, first=self.first, positives=self.positives)

    def count_block(self, sims: np.ndarray, j0: int, j1: int, target: np.ndarray, acc: np.ndarray,
                    group_sum: np.ndarray, group: np.ndarray | None = None) -> None:
        """Add the fractions of candidates j0..j1 of `sims` to `acc[j]` and to
        `group_sum[target[j], group[k]]` (group: the landmark of counter k by default)."""
        from mining.kernels import count_block

        count_block(sims, j0, j1, np.asarray(target, np.int64), self.rows, self.lo, self.scale, self.n_buckets,
                    self.tab_off, self.first, self.pos_off, self.positives, self.inv,
                    self.landmark if group is None else group, acc, group_sum)


# ----------------------------------------------------------------------------- inputs
@dataclass
class CandidateVectors:
    """A block of candidate descriptors (n × dim, float16 as stores keep them, or float32)
    whose similarities are `vectors @ query_vectors.T`. The score loop computes them itself,
    in cache-sized pieces, each decoded, multiplied and counted by one thread while it is
    still in cache: the fast path for global descriptors."""

    vectors: np.ndarray


@dataclass
class MethodInput:
    """One method's view of the problem: which dataset queries its similarity rows are,
    their positives' similarities, the candidate ids in block order, and the blocks: either
    float32 similarity blocks (n_rows, n_block) or `CandidateVectors` (then `query_vectors`,
    (n_rows, dim), gives the rows)."""

    name: str
    query_index: np.ndarray  # int, for each similarity row: the dataset query index
    positive_sims: list[np.ndarray]  # per similarity row: similarities to that query's positives
    ids: np.ndarray  # int64 candidate ids, in the order the blocks deliver them
    blocks: Callable[[], Iterator["np.ndarray | CandidateVectors"]]
    query_vectors: np.ndarray | None = None


@dataclass
class Problem:
    """Everything the scoring loop needs besides the methods."""

    query_names: list[str]
    query_landmark: list[str]  # per dataset query
    landmarks: list[str]  # distinct landmark names, first-appearance order


@dataclass
class TopK:
    """Per-landmark running top K by (contribution desc, photo id asc): a total order, so the
    merged result does not depend on how the candidates were chunked."""

    k: int
    contrib: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    photo_id: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    best_query: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def merge(self, contrib: np.ndarray, photo_id: np.ndarray, best_query: Callable[[np.ndarray], np.ndarray]) -> None:
        """Merge one chunk; `best_query(columns)` names the best query of the kept columns only."""
        floor = self.contrib[-1] if self.k and self.contrib.size >= self.k else 0.0
        # a candidate below every positive is not worth a reviewer's look: contribution > 0
        keep = np.flatnonzero(contrib >= floor) if floor > 0 else np.flatnonzero(contrib > 0)
        if self.k and keep.size > self.k:
            threshold = np.partition(contrib[keep], -self.k)[-self.k]
            keep = keep[contrib[keep] >= threshold]
        if not keep.size:
            return
        c = np.concatenate([self.contrib, contrib[keep]])
        p = np.concatenate([self.photo_id, photo_id[keep]])
        q = np.concatenate([self.best_query, best_query(keep)])
        order = np.lexsort((p, -c))[: self.k]
        self.contrib, self.photo_id, self.best_query = c[order], p[order], q[order]


@dataclass
class ScoreResult:
    photo_id: np.ndarray  # int64, in processing (aligned) order
    score: np.ndarray  # float64
    method_scores: dict[str, np.ndarray]  # float64, NaN where the method has no descriptor
    closest_landmark: np.ndarray  # int32 index into landmarks, -1 when the score is 0
    methods_missing: np.ndarray  # int8
    review: dict[str, TopK]
    stats: dict


# ----------------------------------------------------------------------------- alignment
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


class _Cursor:
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


class _SimilarityStream:
    """A global method's similarities, computed from its `CandidateVectors` in pieces of
    PIECE rows aligned on the method's own candidate order, each piece decoded, multiplied
    (single-threaded BLAS) and counted by one thread while it is in cache.

    Why aligned pieces: BLAS results depend, in the last bits, on the shape of the product
    and on its threading. With every piece the same rows in the same shape on one thread,
    a candidate's similarity never depends on the chunk size or the thread count, so the
    score does not either. A piece that crosses a chunk's end is computed whole; its tail
    is carried to the next chunk.
    """

    def __init__(self, m: "MethodInput", total: int):
        if m.query_vectors is None:
            raise ValueError(f"method {m.name}: CandidateVectors blocks need query_vectors")
        self.cursor = _Cursor(iter(m.blocks()))
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
                _similarity_piece(vectors[k * PIECE: (k + 1) * PIECE], self.query_t, sims[j0:j1], scratch)
                j1 = min(j1, n)
            if count is not None and j0 < j1:
                count(sims, j0, j1)

        tasks = ([-1] if c else []) + list(range(-(-fresh // PIECE)))
        list(pool.map(piece, tasks))
        self.carry = sims[n:c + fresh].copy()
        self.done += n
        return sims[:n]


def _candidate_major(block: np.ndarray) -> np.ndarray:
    """A (n_rows, n_block) similarity block as a C-contiguous float32 (n_block, n_rows) array."""
    if isinstance(block, CandidateVectors):
        raise ValueError("a method yielding CandidateVectors needs query_vectors")
    return np.ascontiguousarray(np.asarray(block, np.float32).T)


def _spill(m: MethodInput, pos: np.ndarray, n_total: int, tmpdir: Path, pool: ThreadPoolExecutor,
           scratch: threading.local, chunk: int) -> np.memmap:
    """A method whose order disagrees with the others: its similarities, written to a
    temporary (n_total, n_rows) file in the common order, so chunks can read it aligned."""
    n_rows = len(m.query_index)
    mm = np.lib.format.open_memmap(tmpdir / f"{len(list(tmpdir.iterdir()))}.npy", mode="w+",
                                   dtype=np.float32, shape=(n_total, max(n_rows, 1)))
    if m.query_vectors is not None:  # CandidateVectors: the same pieces as when streamed
        stream = _SimilarityStream(m, len(pos))
        for start in range(0, len(pos), chunk):
            sims = stream.run(min(chunk, len(pos) - start), pool, scratch, None)
            if n_rows:
                mm[pos[start:start + sims.shape[0]]] = sims
    else:
        start = 0
        for block in m.blocks():
            n = _length(block)
            if n_rows:
                mm[pos[start:start + n]] = _candidate_major(block)
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


def _threads(threads: int | None) -> int:
    if threads is not None and threads < 1:
        raise UserError("--threads must be at least 1")
    if threads is None:
        threads = available_cpus()
    return max(1, min(threads, 64))


# ----------------------------------------------------------------------------- the loop
@dataclass
class _ChunkMethod:
    """One method's part of the chunk in flight: its similarities (candidate-major) and, per
    chunk column, the row holding it (-1: the method has no descriptor for it)."""

    sims: np.ndarray
    row_of: np.ndarray


def score_candidates(
    problem: Problem,
    methods: Sequence[MethodInput],
    chunk: int = DEFAULT_CHUNK,
    review_top: int = DEFAULT_REVIEW_TOP,
    progress: bool = False,
    threads: int | None = None,
) -> ScoreResult:
    """Stream every candidate of every method through the score; see the module docstring."""
    import pandas as pd
    from threadpoolctl import ThreadpoolController
    from mining.progress import bar as progress_bar

    if chunk < 1:
        raise UserError("--chunk must be at least 1")
    n_threads = _threads(threads)
    t0 = time.perf_counter()
    landmark_index = {name: i for i, name in enumerate(problem.landmarks)}
    q_landmark = np.array([landmark_index[lm] for lm in problem.query_landmark], np.int64)
    n_l = len(problem.landmarks)

    ids_all = common_order([m.ids for m in methods])
    n = len(ids_all)
    index = None
    prepared = []  # (method, counters, pos, consistent)
    stats_methods = {}
    for m in methods:
        ids_m = np.asarray(m.ids, np.int64)
        if len(ids_m) == n and np.array_equal(ids_m, ids_all):  # the usual case: same store order
            pos = np.arange(n, dtype=np.int64)  # (ids_all holds no duplicates)
        else:
            if len(pd.unique(ids_m)) != len(ids_m):
                raise UserError(f"method {m.name}: candidate store holds duplicate ids")
            index = pd.Index(ids_all) if index is None else index
            pos = index.get_indexer(ids_m).astype(np.int64)
        counters = _Counters.build(m, q_landmark)
        consistent = bool(np.all(np.diff(pos) > 0))
        prepared.append((m, counters, pos, consistent))
        stats_methods[m.name] = {
            "candidates": int(len(ids_m)),
            "missing": int(n - len(ids_m)),
            "queries": int(len(m.query_index)),
            "queries_with_positives": int(counters.rows.size),
            "aligned": "stream" if consistent else "spilled",
        }

    method_scores = {m.name: np.full(n, np.nan) for m in methods}
    score = np.zeros(n)
    closest = np.full(n, -1, np.int32)
    missing = np.zeros(n, np.int8)
    review = {lm: TopK(review_top) for lm in problem.landmarks}
    lm_queries = [np.flatnonzero(q_landmark == li) for li in range(n_l)]
    t_prep = time.perf_counter() - t0

    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="mining-score-"))
        scratch = threading.local()  # per thread: the decoded float16 rows of one piece
        pool = ThreadPoolExecutor(n_threads)  # the kernels release the GIL
        stack.callback(pool.shutdown)
        blas = ThreadpoolController()

        def single_blas() -> contextlib.AbstractContextManager:
            """Pieces multiply on one BLAS thread each: the same result whatever the thread
            count, and no BLAS threads fighting ours for the cores (measured 1.3x slower)."""
            return blas.limit(limits=1, user_api="blas")

        readers: list = []
        for m, counters, pos, consistent in prepared:
            if consistent:
                readers.append(_Cursor(iter(m.blocks())) if m.query_vectors is None else _SimilarityStream(m, len(pos)))
            else:
                log.warning("method %s: candidate order differs from %s; spilling its similarities to disk",
                            m.name, methods[0].name)
                with single_blas():
                    readers.append(_spill(m, pos, n, Path(tmp), pool, scratch, chunk))
        has = [np.zeros(n, bool) for _ in methods]
        for h, (_, _, pos, _) in zip(has, prepared):
            h[pos] = True
        bar = progress_bar(total=n, unit="cand", desc="score", disable=not progress, mininterval=2)
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            w = b - a
            lm_sum = np.zeros((w, n_l))
            total = np.zeros(w)
            in_chunk: list[_ChunkMethod | None] = []
            for mi, (m, counters, pos, consistent) in enumerate(prepared):
                present = has[mi][a:b]
                cols = np.flatnonzero(present)
                missing[a:b] += ~present
                if not cols.size:
                    in_chunk.append(None)
                    continue
                acc = np.zeros(cols.size)

                # each task counts its own candidates: every number is per candidate, so
                # how the chunk is split into tasks cannot change a bit of the result
                def count(sims: np.ndarray, j0: int, j1: int, counters=counters, cols=cols, acc=acc) -> None:
                    counters.count_block(sims, j0, j1, cols, acc, lm_sum)

                reader = readers[mi]
                if isinstance(reader, _SimilarityStream):
                    with single_blas():
                        sims = reader.run(cols.size, pool, scratch, count)
                else:
                    # spilled rows are candidate-major already; streamed blocks are (rows, n)
                    sims = (_candidate_major(reader.take(cols.size)) if consistent
                            else np.ascontiguousarray(reader[a:b][cols], np.float32))
                    step = max(PIECE, -(-cols.size // n_threads))
                    list(pool.map(lambda j0, sims=sims: count(sims, j0, min(cols.size, j0 + step)),
                                  range(0, cols.size, step)))
                row_of = np.full(w, -1, np.int64)
                row_of[cols] = np.arange(cols.size)
                in_chunk.append(_ChunkMethod(sims, row_of))
                method_scores[m.name][a + cols] = acc
                total[cols] += acc
            score[a:b] = total
            best_lm = np.argmax(lm_sum, axis=1) if n_l else np.zeros(w, np.intp)
            closest[a:b] = np.where(total > 0, best_lm, -1)
            pid = ids_all[a:b]
            for li, lm in enumerate(problem.landmarks):
                qs = lm_queries[li]
                if not qs.size:
                    continue
                review[lm].merge(lm_sum[:, li], pid,
                                 lambda keep, qs=qs, li=li: _best_query(keep, qs, li, prepared, in_chunk))
            bar.update(w)
        bar.close()

    t_total = time.perf_counter() - t0
    stats = {
        "candidates": int(n),
        "candidates_missing_some_method": int(np.count_nonzero(missing)),
        "methods": stats_methods,
        "chunk": int(chunk),
        "threads": n_threads,
        "review_top": int(review_top),
        "seconds": {"prepare": round(t_prep, 3), "total": round(t_total, 3)},
    }
    return ScoreResult(ids_all, score, method_scores, closest, missing, review, stats)


def _similarity_piece(vectors: np.ndarray, query_t: np.ndarray, out: np.ndarray, scratch: threading.local) -> None:
    """One task's similarities, its float16 rows decoded into the thread's own buffer (small
    enough to stay in cache for the GEMM that follows)."""
    from mining.descriptors import similarity_rows

    buf = getattr(scratch, "buf", None)
    if vectors.dtype == np.float16 and (buf is None or buf.shape[0] < vectors.shape[0] or buf.shape[1] != vectors.shape[1]):
        buf = scratch.buf = np.empty(vectors.shape, np.float32)
    similarity_rows(vectors, query_t, out, buf)


def _best_query(keep: np.ndarray, qs: np.ndarray, landmark: int, prepared: list, in_chunk: list) -> np.ndarray:
    """For the chunk columns `keep` (the few entering a review queue), the query of `qs` (the
    queries of `landmark`) they contribute most for: the per-query sums, recomputed for these
    columns only by the same kernel in the same order (methods, then counters) as every
    other sum."""
    qc = np.zeros((keep.size, qs.size))
    column = {int(q): i for i, q in enumerate(qs)}
    for (_, counters, _, _), part in zip(prepared, in_chunk):
        if part is None:
            continue
        mine = counters.subset(counters.landmark == landmark)
        rows = part.row_of[keep]
        ok = np.flatnonzero(rows >= 0)
        if ok.size and mine.rows.size:
            group = np.array([column[int(q)] for q in mine.query], np.int64)
            mine.count_block(np.ascontiguousarray(part.sims[rows[ok]]), 0, ok.size, ok, np.zeros(ok.size), qc, group)
    return qs[np.argmax(qc, axis=1)]


# ----------------------------------------------------------------------------- stores → inputs
def method_from_stores(method_dir: Path, dataset) -> tuple[MethodInput, dict]:
    """Read DESC/<method>/{queries,database,candidates} into a MethodInput (+ its stats)."""
    from mining.descriptors import similarity_function
    from mining.retrieval import open_method

    stores = open_method(method_dir)
    landmark = stores.landmark_similarities(dataset)
    positive_sims, positives_missing = landmark.positives(dataset)
    missing_queries = sorted(set(range(len(dataset.qimlist))) - set(landmark.query_index.tolist()))
    ids = stores.candidate_ids()
    q_store, c_store = stores.queries, stores.candidates
    sim = similarity_function(q_store, c_store)
    _, q_payload = q_store.load_all()
    is_global = stores.is_global

    def blocks() -> Iterator[np.ndarray | CandidateVectors]:
        for _, payload in c_store.iter_blocks():
            # global descriptors: the loop multiplies them itself, fused with the counting
            yield CandidateVectors(payload) if is_global else np.asarray(sim(q_payload, payload), dtype=np.float32)

    stats = {"queries_without_descriptor": [dataset.qimlist[i] for i in missing_queries],
             "positives_without_descriptor": int(positives_missing)}
    return MethodInput(stores.name, landmark.query_index, positive_sims, ids, blocks,
                       q_payload if is_global else None), stats


def run_score(landmarks: Path, descriptors: Sequence[Path], out: Path, review_top: int = DEFAULT_REVIEW_TOP,
              chunk: int = DEFAULT_CHUNK, progress: bool = True, threads: int | None = None,
              near_duplicates: Path | None = None) -> dict:
    """`mining score`: stores → scores.parquet, review_queue.parquet, stats.json."""
    from mining.landmarks import load_landmarks

    if review_top < 1:
        raise UserError("--review-top must be at least 1")
    dataset = load_landmarks(landmarks)
    t0 = time.perf_counter()
    inputs, read_stats = [], {}
    for d in descriptors:
        m, st = method_from_stores(Path(d), dataset)
        if m.name in read_stats:
            raise UserError(f"method {m.name!r} given twice (--descriptors {d})")
        inputs.append(m)
        read_stats[m.name] = st
    if not inputs:
        raise UserError("give at least one --descriptors DESC/<method> folder")
    problem = Problem(list(dataset.qimlist), [dataset.query_landmark(i) for i in range(len(dataset.qimlist))],
                      dataset.landmarks)
    t_read = time.perf_counter() - t0
    result = score_candidates(problem, inputs, chunk=chunk, review_top=review_top, progress=progress,
                              threads=threads)
    for name, st in read_stats.items():
        result.stats["methods"][name].update(st)
    has_pos = [i for i in range(len(dataset.qimlist)) if dataset.positives(i)]
    result.stats.update({
        "landmarks_fingerprint": dataset.fingerprint(),
        "landmarks_dataset": dataset.name,
        "landmarks": problem.landmarks,
        "landmark_queries": dataset.landmark_queries(),  # the grouping found from the ground truth
        "queries": len(dataset.qimlist),
        "queries_with_positives": len(has_pos),
        "queries_without_positives": len(dataset.qimlist) - len(has_pos),
    })
    result.stats["seconds"]["read_landmark_descriptors"] = round(t_read, 3)
    write_outputs(result, problem, out, near_duplicates)
    return result.stats


def write_outputs(result: ScoreResult, problem: Problem, out: Path, near_duplicates: Path | None = None) -> None:
    """scores.parquet (sorted by photo id), review_queue.parquet, stats.json, atomically."""
    import pyarrow as pa

    from mining import atomic

    order = np.argsort(result.photo_id, kind="stable")
    lm_names = np.array(problem.landmarks + [None], dtype=object)
    cols = {
        "photo_id": pa.array(result.photo_id[order], pa.int64()),
        "score": pa.array(result.score[order], pa.float64()),
    }
    for name, s in result.method_scores.items():
        v = s[order]
        cols[f"score_{name}"] = pa.array(v, pa.float64(), mask=np.isnan(v))
    cols["closest_landmark"] = pa.array(lm_names[result.closest_landmark[order]], pa.string())
    cols["methods_missing"] = pa.array(result.methods_missing[order], pa.int8())
    atomic.write_parquet(out / "scores.parquet", pa.table(cols))

    rows = {k: [] for k in ("landmark", "photo_id", "rank", "score", "total_score", "best_query")}
    sorted_ids, sorted_scores = result.photo_id[order], result.score[order]
    for lm in problem.landmarks:
        t = result.review[lm]
        for r, (c, p, q) in enumerate(zip(t.contrib.tolist(), t.photo_id.tolist(), t.best_query.tolist()), 1):
            rows["landmark"].append(lm)
            rows["photo_id"].append(p)
            rows["rank"].append(r)
            rows["score"].append(c)
            rows["total_score"].append(float(sorted_scores[np.searchsorted(sorted_ids, p)]))
            rows["best_query"].append(problem.query_names[q])
    schema = pa.schema([("landmark", pa.string()), ("photo_id", pa.int64()), ("rank", pa.int32()),
                        ("score", pa.float64()), ("total_score", pa.float64()), ("best_query", pa.string())])
    if near_duplicates is not None:  # near-copies of a landmark's images head its queue (mining.neardup)
        from mining.neardup import prepend_probable

        rows = prepend_probable(rows, Path(near_duplicates), sorted_ids, sorted_scores, problem.landmarks)
        schema = schema.append(pa.field("probable_landmark", pa.bool_()))
        result.stats["review_queue_probable_landmark"] = int(sum(rows["probable_landmark"]))
    atomic.write_parquet(out / "review_queue.parquet", pa.table(rows, schema=schema))
    result.stats["review_queue_rows"] = len(rows["photo_id"])
    atomic.write_json(out / "stats.json", result.stats)
