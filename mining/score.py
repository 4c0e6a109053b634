"""The distractor score: how many positives of each landmark query a candidate outranks.

For method m, query q with positives P_q and candidate d,
`frac(d; q, m) = (#{p: s(q,p) < s(q,d)} + ½·#{p: s(q,p) == s(q,d)}) / |P_q|`, and
`score(d) = Σ_m Σ_q frac(d; q, m)` (docs: architecture.md, "The distractor score").

Why it is built this way:
- Streaming and exact: candidates go through in chunks aligned across methods (stores of
  different methods may hold different ids in different orders), and every per-candidate
  number is computed element-wise in a fixed order (methods, then queries), so the result
  does not depend on the chunk size: streaming == in-memory, bit for bit.
- Fast: the similarity is a float32 GEMM per chunk; the counting uses a per-query lookup
  table over a monotone bucketing of the similarity, which is exact by construction (a
  bucket that holds no positive tells the count directly; only values falling in a bucket
  that holds a positive go through a binary search).
- Bounded memory: per method a (n_queries × chunk) block, per candidate only the output
  columns; the per-landmark top K (the review queue) is merged chunk by chunk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

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

    The bucketing `b(s) = int(clip((s - lo) · k, 0, B + 1))` is monotone in s, and the
    positives are bucketed with the very same float32 arithmetic; so for an s whose bucket
    holds no positive, every positive in a lower bucket is < s and every other one is > s:
    the table gives the exact count. Buckets holding a positive are marked -1 and those
    values are counted with `np.searchsorted` (left and right, i.e. ties count one half).
    """

    positives: np.ndarray  # sorted float32
    lo: np.float32
    scale: np.float32
    n_buckets: int
    table: np.ndarray  # int32 (n_buckets + 2,): 2·#{p below the bucket}, or -1

    @classmethod
    def build(cls, positive_sims: np.ndarray) -> "PositiveCounter":
        pos = np.sort(np.asarray(positive_sims, dtype=np.float32))
        if pos.size == 0 or not np.all(np.isfinite(pos)):
            raise ValueError("positives must be a non-empty finite array")
        n_buckets = max(_MIN_BUCKETS, _BUCKETS_PER_POSITIVE * pos.size)
        span = float(pos[-1]) - float(pos[0])
        width = span / n_buckets if span > 0 else 1.0
        lo = np.float32(float(pos[0]) - width)  # one empty bucket below the lowest positive
        scale = np.float32(1.0 / width)
        b = _bucket(pos, lo, scale, n_buckets)
        below = np.searchsorted(b, np.arange(n_buckets + 2), side="left")  # positives in lower buckets
        table = (2 * below).astype(np.int32)
        table[np.unique(b)] = -1
        return cls(pos, lo, scale, n_buckets, table)

    def count2(self, sims: np.ndarray) -> np.ndarray:
        """int32 array: 2·#{p < s} + #{p == s} for each s in `sims` (float32, 1-D)."""
        out = self.table[_bucket(sims, self.lo, self.scale, self.n_buckets)]
        slow = np.flatnonzero(out < 0)
        if slow.size:
            s = sims[slow]
            out[slow] = np.searchsorted(self.positives, s, "left") + np.searchsorted(self.positives, s, "right")
        return out


def _bucket(s: np.ndarray, lo: np.float32, scale: np.float32, n_buckets: int) -> np.ndarray:
    x = np.subtract(s, lo, dtype=np.float32)
    np.multiply(x, scale, out=x)
    np.clip(x, 0, n_buckets + 1, out=x)
    return x.astype(np.intp)


# ----------------------------------------------------------------------------- inputs
@dataclass
class MethodInput:
    """One method's view of the problem: which dataset queries its similarity rows are,
    their positives' similarities, the candidate ids in block order, and the blocks."""

    name: str
    query_index: np.ndarray  # int, for each similarity row: the dataset query index
    positive_sims: list[np.ndarray]  # per similarity row: similarities to that query's positives
    ids: np.ndarray  # int64 candidate ids, in the order the blocks deliver them
    blocks: Callable[[], Iterator[np.ndarray]]  # yields float32 (n_rows, n_block) similarity blocks


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
class _Cursor:
    """Delivers a method's similarity columns in consecutive runs of rows, whatever its
    block sizes are (blocks are concatenated or split as needed)."""

    def __init__(self, blocks: Iterator[np.ndarray]):
        self._it = blocks
        self._buf: list[np.ndarray] = []
        self._have = 0

    def take(self, n: int) -> np.ndarray:
        while self._have < n:
            b = next(self._it)
            self._buf.append(b)
            self._have += b.shape[1]
        if len(self._buf) == 1 and self._buf[0].shape[1] == n:
            out = self._buf.pop()
        else:
            cat = self._buf[0] if len(self._buf) == 1 else np.concatenate(self._buf, axis=1)
            out, rest = cat[:, :n], cat[:, n:]
            self._buf = [rest] if rest.shape[1] else []
        self._have -= n
        return out


def _spill(m: MethodInput, pos: np.ndarray, n_total: int, tmpdir: Path) -> np.memmap:
    """A method whose order disagrees with the others: its similarities, written to a
    temporary (n_total, n_rows) file in the common order, so chunks can read it aligned."""
    n_rows = len(m.query_index)
    mm = np.lib.format.open_memmap(tmpdir / f"{len(list(tmpdir.iterdir()))}.npy", mode="w+",
                                   dtype=np.float32, shape=(n_total, max(n_rows, 1)))
    start = 0
    for block in m.blocks():
        n = block.shape[1]
        if n_rows:
            mm[pos[start:start + n]] = block.T
        start += n
    mm.flush()
    return mm


def common_order(id_lists: Sequence[np.ndarray]) -> np.ndarray:
    """All candidate ids: the first method's order, then ids only later methods have."""
    import pandas as pd

    if not id_lists:
        return np.zeros(0, np.int64)
    return pd.unique(np.concatenate([np.asarray(i, np.int64) for i in id_lists]))


# ----------------------------------------------------------------------------- the loop
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
    from tqdm import tqdm

    if chunk < 1:
        raise UserError("--chunk must be at least 1")
    if threads is not None and threads < 1:
        raise UserError("--threads must be at least 1")
    t0 = time.perf_counter()
    landmark_index = {name: i for i, name in enumerate(problem.landmarks)}
    q_landmark = np.array([landmark_index[lm] for lm in problem.query_landmark], np.int64)
    n_q, n_l = len(problem.query_names), len(problem.landmarks)

    ids_all = common_order([m.ids for m in methods])
    n = len(ids_all)
    index = pd.Index(ids_all)
    prepared = []  # (method, counters [(row, query, counter, 1/(2|P|))], pos, consistent)
    stats_methods = {}
    for m in methods:
        ids_m = np.asarray(m.ids, np.int64)
        if len(pd.unique(ids_m)) != len(ids_m):
            raise UserError(f"method {m.name}: candidate store holds duplicate ids")
        pos = index.get_indexer(ids_m).astype(np.int64)
        counters = []
        for row, (qi, ps) in enumerate(zip(m.query_index, m.positive_sims)):
            if len(ps):
                counters.append((row, int(qi), PositiveCounter.build(ps), 1.0 / (2.0 * len(ps))))
        consistent = bool(np.all(np.diff(pos) > 0))
        prepared.append((m, counters, pos, consistent))
        stats_methods[m.name] = {
            "candidates": int(len(ids_m)),
            "missing": int(n - len(ids_m)),
            "queries": int(len(m.query_index)),
            "queries_with_positives": len(counters),
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
        readers = []
        for m, counters, pos, consistent in prepared:
            if consistent:
                readers.append(_Cursor(iter(m.blocks())))
            else:
                log.warning("method %s: candidate order differs from %s; spilling its similarities to disk",
                            m.name, methods[0].name)
                readers.append(_spill(m, pos, n, Path(tmp)))
        has = [np.zeros(n, bool) for _ in methods]
        for h, (_, _, pos, _) in zip(has, prepared):
            h[pos] = True

        n_threads = max(1, min(threads or os.cpu_count() or 1, 8))
        pool = ThreadPoolExecutor(n_threads)  # numpy releases the GIL
        stack.callback(pool.shutdown)
        bar = tqdm(total=n, unit="cand", desc="score", disable=not progress, mininterval=2)
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            w = b - a
            q_contrib = np.zeros((n_q, w))
            lm_contrib = np.zeros((n_l, w))
            total = np.zeros(w)
            for mi, (m, counters, pos, consistent) in enumerate(prepared):
                present = has[mi][a:b]
                cols = np.flatnonzero(present)
                missing[a:b] += ~present
                if not cols.size:
                    continue
                if consistent:
                    sims = readers[mi].take(cols.size)
                else:
                    sims = readers[mi][a:b][cols].T
                sims = np.ascontiguousarray(sims)
                full = cols.size == w
                # threads over column slices: every number is per column, so the split
                # cannot change a single bit of the result
                cuts = np.linspace(0, cols.size, n_threads + 1).astype(int)
                parts = pool.map(
                    lambda s0, s1, sims=sims, cols=cols, full=full, counters=counters: _count_columns(
                        sims[:, s0:s1], counters, slice(s0, s1) if full else cols[s0:s1],
                        q_contrib, lm_contrib, q_landmark),
                    cuts[:-1], cuts[1:])
                acc = np.concatenate(list(parts))
                method_scores[m.name][a + cols] = acc
                total[cols] += acc
            score[a:b] = total
            best_lm = np.argmax(lm_contrib, axis=0) if n_l else np.zeros(w, np.intp)
            closest[a:b] = np.where(total > 0, best_lm, -1)
            pid = ids_all[a:b]
            for li, lm in enumerate(problem.landmarks):
                qs = lm_queries[li]
                if not qs.size:
                    continue
                review[lm].merge(lm_contrib[li], pid,
                                 lambda cols, qs=qs: qs[np.argmax(q_contrib[np.ix_(qs, cols)], axis=0)])
            bar.update(w)
        bar.close()

    t_total = time.perf_counter() - t0
    stats = {
        "candidates": int(n),
        "candidates_missing_some_method": int(np.count_nonzero(missing)),
        "methods": stats_methods,
        "chunk": int(chunk),
        "review_top": int(review_top),
        "seconds": {"prepare": round(t_prep, 3), "total": round(t_total, 3)},
    }
    return ScoreResult(ids_all, score, method_scores, closest, missing, review, stats)


def _count_columns(sims: np.ndarray, counters: list, target: slice | np.ndarray, q_contrib: np.ndarray,
                   lm_contrib: np.ndarray, q_landmark: np.ndarray) -> np.ndarray:
    """One method's fractions for some columns of a chunk, added to the per-query and
    per-landmark sums at `target`; returns the method's score of those columns."""
    acc = np.zeros(sims.shape[1])
    f = np.empty(sims.shape[1])
    for row, qi, counter, inv in counters:
        np.multiply(counter.count2(sims[row]), inv, out=f)
        acc += f
        q_contrib[qi, target] += f
        lm_contrib[q_landmark[qi], target] += f
    return acc


# ----------------------------------------------------------------------------- stores → inputs
def parse_ids(ids: Iterable[str], what: str) -> np.ndarray:
    """Candidate store ids are decimal photo ids; anything else is the user's wrong store."""
    ids = list(ids)
    try:
        return np.array([int(i) for i in ids], dtype=np.int64)
    except (TypeError, ValueError):
        bad = next(i for i in ids if not str(i).strip().lstrip("-").isdigit())
        raise UserError(f"{what}: candidate id {bad!r} is not a decimal photo id") from None


def method_from_stores(method_dir: Path, dataset) -> tuple[MethodInput, dict]:
    """Read DESC/<method>/{queries,database,candidates} into a MethodInput (+ its stats)."""
    from mining.descriptors import iter_similarities, open_store, similarity_function

    stores = {}
    for part in ("queries", "database", "candidates"):
        if not (method_dir / part).is_dir():
            raise UserError(f"{method_dir}: missing {part}/ descriptor store (expected DESC/<method>/{{queries,database,candidates}})")
        stores[part] = open_store(method_dir / part)
    q_store, db_store, c_store = stores["queries"], stores["database"], stores["candidates"]
    name = c_store.method
    for part, st in stores.items():
        if st.method != name:
            raise UserError(f"{method_dir}/{part}: store is method {st.method!r}, candidates are {name!r}")
    q_ids, _ = q_store.load_all()
    q_lookup = {n: i for i, n in enumerate(dataset.qimlist)}
    unknown = [i for i in q_ids if i not in q_lookup]
    if unknown:
        raise UserError(f"{method_dir}/queries: {len(unknown)} ids are not queries of {dataset.path.name} (e.g. {unknown[0]!r})")
    query_index = np.array([q_lookup[i] for i in q_ids], np.int64)
    db_lookup = {n: i for i, n in enumerate(dataset.imlist)}
    cols: list[np.ndarray] = []
    db_index: list[int] = []
    for ids, sims in iter_similarities(q_store, db_store):
        for i in ids:
            if i not in db_lookup:
                raise UserError(f"{method_dir}/database: id {i!r} is not in {dataset.path.name}'s imlist")
            db_index.append(db_lookup[i])
        cols.append(sims)
    sims_db = np.concatenate(cols, axis=1) if cols else np.zeros((len(q_ids), 0), np.float32)
    col_of = {d: c for c, d in enumerate(db_index)}
    positive_sims = []
    positives_missing = 0
    for row, qi in enumerate(query_index):
        pos = dataset.positives(int(qi))
        have = [col_of[p] for p in pos if p in col_of]
        positives_missing += len(pos) - len(have)
        positive_sims.append(sims_db[row, have].astype(np.float32))
    missing_queries = sorted(set(range(len(dataset.qimlist))) - set(query_index.tolist()))
    ids = parse_ids(c_store.ids(), f"{method_dir}/candidates")
    sim = similarity_function(q_store, c_store)
    _, q_payload = q_store.load_all()

    def blocks() -> Iterator[np.ndarray]:
        for _, payload in c_store.iter_blocks():
            yield np.asarray(sim(q_payload, payload), dtype=np.float32)

    stats = {"queries_without_descriptor": [dataset.qimlist[i] for i in missing_queries],
             "positives_without_descriptor": int(positives_missing)}
    return MethodInput(name, query_index, positive_sims, ids, blocks), stats


def run_score(landmarks: Path, descriptors: Sequence[Path], out: Path, review_top: int = DEFAULT_REVIEW_TOP,
              chunk: int = DEFAULT_CHUNK, progress: bool = True, threads: int | None = None) -> dict:
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
        "queries": len(dataset.qimlist),
        "queries_with_positives": len(has_pos),
        "queries_without_positives": len(dataset.qimlist) - len(has_pos),
    })
    result.stats["seconds"]["read_landmark_descriptors"] = round(t_read, 3)
    write_outputs(result, problem, out)
    return result.stats


def write_outputs(result: ScoreResult, problem: Problem, out: Path) -> None:
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
    atomic.write_parquet(out / "review_queue.parquet", pa.table(rows, schema=schema))
    result.stats["review_queue_rows"] = len(rows["photo_id"])
    atomic.write_json(out / "stats.json", result.stats)
