"""The score loop: candidates in chunks, every method's part of a chunk counted by the
kernels on a thread pool, the per-candidate columns and the review queue filled chunk by chunk.

`score_candidates` prepares the methods (counters, alignment, readers), then calls
`score_chunk` on consecutive chunks: one chunk's numbers (per method, per candidate, per
landmark) computed element-wise in a fixed order (methods, then queries), so the result does
not depend on the chunk size or the thread count. The per-landmark top K (the review queue)
is merged chunk by chunk, and only the candidates entering it get their best query worked out.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from threadpoolctl import ThreadpoolController

from mining.compute.cluster import available_cpus
from mining.errors import UserError
from mining.console.progress import bar as progress_bar
from mining.retrieval.counting import Counters
from mining.stages.score.inputs import MethodInput, Problem
from mining.stages.score.alignment import PIECE, Alignment, Cursor, SimilarityStream, candidate_major, spill
from mining.evidence.since import before, check_late, exempt_counts

log = logging.getLogger(__name__)

DEFAULT_CHUNK = 32768


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
    benchmark_scores: np.ndarray | None = None  # float64 (benchmarks, n): each one's part of score
    landmark_rows: np.ndarray | None = None  # per landmark: its (method, query with positives) pairs


def _threads(threads: int | None) -> int:
    if threads is not None and threads < 1:
        raise UserError("--threads must be at least 1")
    if threads is None:
        threads = available_cpus()
    return max(1, min(threads, 64))


# ----------------------------------------------------------------------------- the loop
@dataclass
class Prepared:
    """One method ready for the loop: its counters, where its candidates sit in the common
    order, and (once `open_readers` ran) the reader that delivers its similarities."""

    method: MethodInput
    counters: Counters
    pos: np.ndarray  # common-order index of each of the method's candidates
    consistent: bool  # its order agrees with the common one: streamed, else spilled
    has: np.ndarray  # bool (n,): the method has a descriptor for common-order candidate j
    reader: Any = None  # Cursor, SimilarityStream or a spilled (n, rows) memmap


def query_landmarks(problem: Problem) -> np.ndarray:
    """int64 index into problem.landmarks of each dataset query's landmark."""
    landmark_index = {name: i for i, name in enumerate(problem.landmarks)}
    return np.array([landmark_index[lm] for lm in problem.query_landmark], np.int64)


def prepare(problem: Problem, methods: Sequence[MethodInput]) -> tuple[np.ndarray, list[Prepared], dict]:
    """The common candidate order, each method prepared, and each method's stats."""
    q_landmark = query_landmarks(problem)
    alignment = Alignment([m.ids for m in methods])
    n = len(alignment.ids)
    prepared, stats = [], {}
    for m in methods:
        pos, consistent = alignment.positions(m.name, m.ids)
        counters = Counters.build(m.positive_sims, m.query_index, q_landmark)
        has = np.zeros(n, bool)
        has[pos] = True
        prepared.append(Prepared(m, counters, pos, consistent, has))
        stats[method_key(problem, m)] = {
            "candidates": int(len(m.ids)),
            "missing": int(n - len(m.ids)),
            "queries": int(len(m.query_index)),
            "queries_with_positives": int(counters.rows.size),
            "aligned": "stream" if consistent else "spilled",
        }
    return alignment.ids, prepared, stats


def method_key(problem: Problem, m: MethodInput) -> str:
    """A method's name in stats: `<benchmark>/<method>` when the problem has several benchmarks."""
    return m.name if len(problem.benchmarks) == 1 else f"{problem.benchmarks[m.benchmark]}/{m.name}"


@dataclass
class Workers:
    """The thread pool the kernels run on (they release the GIL) and per-thread scratch."""

    pool: ThreadPoolExecutor
    n_threads: int
    blas: Any  # threadpoolctl.ThreadpoolController
    scratch: threading.local = field(default_factory=threading.local)  # a piece's decoded float16 rows

    @classmethod
    @contextlib.contextmanager
    def start(cls, n_threads: int) -> Iterator["Workers"]:
        with ThreadPoolExecutor(n_threads) as pool:
            yield cls(pool, n_threads, ThreadpoolController())

    def single_blas(self) -> contextlib.AbstractContextManager:
        """Pieces multiply on one BLAS thread each: the same result whatever the thread
        count, and no BLAS threads fighting ours for the cores (measured 1.3x slower)."""
        return self.blas.limit(limits=1, user_api="blas")


def open_readers(prepared: Sequence[Prepared], workers: Workers, tmpdir: Path, chunk: int) -> None:
    """Give every method its reader: streamed when its order is the common one, else spilled
    to a temporary file in `tmpdir` (read back aligned)."""
    n = prepared[0].has.size if prepared else 0
    for p in prepared:
        m = p.method
        if p.consistent:
            p.reader = Cursor(iter(m.blocks())) if m.query_vectors is None else SimilarityStream(m, len(p.pos))
        else:
            log.warning("method %s: candidate order differs from %s; spilling its similarities to disk",
                        m.name, prepared[0].method.name)
            with workers.single_blas():
                p.reader = spill(m, p.pos, n, tmpdir, workers.pool, workers.scratch, chunk)


@dataclass
class ChunkMethod:
    """One method's part of a chunk: the chunk columns it has a descriptor for, its score
    there, its similarities (candidate-major) and, per chunk column, the row holding it (-1:
    the method has no descriptor for it)."""

    cols: np.ndarray
    score: np.ndarray
    sims: np.ndarray
    row_of: np.ndarray


@dataclass
class ChunkScores:
    """Candidates a..b of the common order: their total score, each benchmark's part of it,
    per-landmark sums, how many methods lack them, and each method's part (None: it has none
    of them)."""

    total: np.ndarray  # float64 (w,)
    landmark_sum: np.ndarray  # float64 (w, landmarks)
    missing: np.ndarray  # int8 (w,)
    parts: list[ChunkMethod | None]
    benchmark_total: np.ndarray  # float64 (benchmarks, w)


def score_chunk(a: int, b: int, prepared: Sequence[Prepared], n_landmarks: int, workers: Workers) -> ChunkScores:
    """Score candidates a..b of the common order. Readers are consumed in order: call it on
    consecutive chunks (0..c, c..2c, …) after `open_readers`.

    Each task counts its own candidates and every number is per candidate, so how the chunk
    is split into tasks cannot change a bit of the result; methods are added in their order
    into their benchmark's total, and the benchmarks' totals in theirs: so the total of several
    benchmarks is exactly the sum of what each would score alone (with one, the total is the
    sum over methods)."""
    w = b - a
    lm_sum = np.zeros((w, n_landmarks))
    n_bench = 1 + max((p.method.benchmark for p in prepared), default=0)
    bench_total = np.zeros((n_bench, w))
    missing = np.zeros(w, np.int8)
    parts: list[ChunkMethod | None] = []
    counted: set[str] = set()  # a method of several benchmarks lacks a candidate once
    for p in prepared:
        present = p.has[a:b]
        cols = np.flatnonzero(present)
        if p.method.name not in counted:
            missing += ~present
            counted.add(p.method.name)
        if not cols.size:
            parts.append(None)
            continue
        acc = np.zeros(cols.size)
        count: Callable[[np.ndarray, int, int], None] = partial(p.counters.count_block, target=cols, acc=acc,
                                                                group_sum=lm_sum)
        if isinstance(p.reader, SimilarityStream):
            with workers.single_blas():
                sims = p.reader.run(cols.size, workers.pool, workers.scratch, count)
        else:
            # spilled rows are candidate-major already; streamed blocks are (rows, n)
            sims = (candidate_major(p.reader.take(cols.size)) if p.consistent
                    else np.ascontiguousarray(p.reader[a:b][cols], np.float32))
            step = max(PIECE, -(-cols.size // workers.n_threads))
            list(workers.pool.map(lambda j0, sims=sims: count(sims, j0, min(cols.size, j0 + step)),
                                  range(0, cols.size, step)))
        row_of = np.full(w, -1, np.int64)
        row_of[cols] = np.arange(cols.size)
        parts.append(ChunkMethod(cols, acc, sims, row_of))
        bench_total[p.method.benchmark, cols] += acc
    total = np.zeros(w)
    for part_total in bench_total:
        total += part_total
    return ChunkScores(total, lm_sum, missing, parts, bench_total)


# long: the score's loop over chunks, flat: every chunk's arrays written in place (benchmarks/score.py)
def score_candidates(
    problem: Problem,
    methods: Sequence[MethodInput],
    chunk: int = DEFAULT_CHUNK,
    *,
    review_top: int,
    progress: bool = False,
    threads: int | None = None,
    since: dict[str, np.datetime64] | None = None,
    taken_of: Callable[[np.ndarray], np.ndarray] | None = None,
    late_since: bool = False,
) -> ScoreResult:
    """Stream every candidate of every method through the score (`score_chunk` per chunk).
    `since` (landmark → day) and `taken_of` (photo ids → days taken): a candidate taken before a
    landmark's day never enters that landmark's review queue (mining/evidence/since.py); a day later than
    today, or (unless `late_since`) than every dated candidate's, is refused (`since.check_late`)."""
    if chunk < 1:
        raise UserError("--chunk must be at least 1")
    n_threads = _threads(threads)
    t0 = time.perf_counter()
    ids_all, prepared, stats_methods = prepare(problem, methods)
    n, n_l = len(ids_all), len(problem.landmarks)
    method_scores = {m.name: np.full(n, np.nan) for m in methods}
    bench_scores = np.zeros((len(problem.benchmarks), n))
    score = np.zeros(n)
    closest = np.full(n, -1, np.int32)
    missing = np.zeros(n, np.int8)
    review = {lm: TopK(review_top) for lm in problem.landmarks}
    q_landmark = query_landmarks(problem)
    lm_queries = [np.flatnonzero(q_landmark == li) for li in range(n_l)]
    taken = taken_of(ids_all) if since and taken_of else None
    late = check_late(since, taken, late_since) if since else []
    exempt = {li: before(taken, since[lm]) for li, lm in enumerate(problem.landmarks)
              if taken is not None and since and lm in since}
    t_prep = time.perf_counter() - t0

    with tempfile.TemporaryDirectory(prefix="mining-score-") as tmp, Workers.start(n_threads) as workers:
        open_readers(prepared, workers, Path(tmp), chunk)
        bar = progress_bar(total=n, unit="cand", desc="score", disable=not progress, mininterval=2)
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            c = score_chunk(a, b, prepared, n_l, workers)
            for p, part in zip(prepared, c.parts):
                if part is not None:  # a method of several benchmarks: the sum of its parts
                    have = method_scores[p.method.name][a + part.cols]
                    method_scores[p.method.name][a + part.cols] = np.where(np.isnan(have), part.score,
                                                                           have + part.score)
            bench_scores[: c.benchmark_total.shape[0], a:b] = c.benchmark_total
            missing[a:b] = c.missing
            score[a:b] = c.total
            best_lm = np.argmax(c.landmark_sum, axis=1) if n_l else np.zeros(b - a, np.intp)
            closest[a:b] = np.where(c.total > 0, best_lm, -1)
            pid = ids_all[a:b]
            for li, lm in enumerate(problem.landmarks):
                qs = lm_queries[li]
                if not qs.size:
                    continue
                contrib = c.landmark_sum[:, li]
                if li in exempt:  # taken before the landmark existed: nothing to review for it
                    contrib = np.where(exempt[li][a:b], 0.0, contrib)
                review[lm].merge(contrib, pid,
                                 lambda keep, qs=qs, li=li, c=c: best_query(keep, qs, li, prepared, c.parts))
            bar.update(b - a)
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
    if taken is not None and since:
        stats["since"] = exempt_counts(taken, since, late)
    rows = np.bincount(np.concatenate([np.zeros(0, np.int64)] + [np.asarray(p.counters.landmark, np.int64)
                                                                 for p in prepared]), minlength=n_l)
    return ScoreResult(ids_all, score, method_scores, closest, missing, review, stats, bench_scores, rows)


def best_query(keep: np.ndarray, qs: np.ndarray, landmark: int, prepared: Sequence[Prepared],
               parts: Sequence[ChunkMethod | None]) -> np.ndarray:
    """For the chunk columns `keep` (the few entering a review queue), the query of `qs` (the
    queries of `landmark`) they contribute most for: the per-query sums, recomputed for these
    columns only by the same kernel in the same order (methods, then counters) as every
    other sum."""
    qc = np.zeros((keep.size, qs.size))
    column = {int(q): i for i, q in enumerate(qs)}
    for p, part in zip(prepared, parts):
        if part is None:
            continue
        mine = p.counters.subset(p.counters.landmark == landmark)
        rows = part.row_of[keep]
        ok = np.flatnonzero(rows >= 0)
        if ok.size and mine.rows.size:
            group = np.array([column[int(q)] for q in mine.query], np.int64)
            mine.count_block(np.ascontiguousarray(part.sims[rows[ok]]), 0, ok.size, ok, np.zeros(ok.size), qc, group)
    return qs[np.argmax(qc, axis=1)]
