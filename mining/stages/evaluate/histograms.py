"""Each method's candidates reduced to bucket histograms, streamed once (see `experiment`).

Why the histograms are tallied while streaming: every set the experiment evaluates is a
prefix of a few rankings of photo ids (the mined order, one random permutation per seed, the
pool, each leave-one-method-out selection), known before the candidates are read. So one
pass over the candidate similarities adds each candidate's bucket to the histogram of the
first prefix (of each ranking) that holds it, and nothing of size queries × candidates is
kept: memory is O(rankings × candidates) bytes for the rankings plus O(queries × block) for
one shard of similarities, whatever the number of queries. Counts are integers, so the
result is exact and independent of the shard order. Ties rank the landmark image first, as
a stable sort of [database, D] does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from mining.compute.jit import compiled
from mining.methods import get_method
from mining.console.progress import bar
from mining.retrieval.reranking import has_keypoints
from mining.retrieval.spatial import ROW_SUFFIX
from mining.retrieval.methodstores import open_method, parse_ids


@dataclass
class Ranking:
    """Photo ids in a fixed order; the distractor sets evaluated are its prefixes of `sizes`."""

    ids: np.ndarray
    sizes: Sequence[int]

    @staticmethod
    def of_set(ids: Any) -> "Ranking":
        """One set (every id), as a ranking with a single prefix."""
        arr = np.asarray(ids, dtype=np.int64)
        return Ranking(arr, [arr.size])


class _Classes:
    """Per photo id of any ranking: for each ranking, the index of the smallest prefix size
    holding it (-1: in none), looked up for a block of store ids with one searchsorted."""

    def __init__(self, rankings: Sequence[Ranking]):
        self.sizes = [np.unique(np.asarray(list(r.sizes), dtype=np.int64)) for r in rankings]
        heads = []  # each ranking's ids up to its largest prefix: only those get a class
        for r, sizes in zip(rankings, self.sizes):
            if sizes.size and (sizes[0] < 0 or sizes.size >= np.iinfo(np.int16).max):
                raise ValueError("prefix sizes must be ≥ 0 and fewer than 32767")
            ids = np.asarray(r.ids, dtype=np.int64)
            heads.append(ids[: min(ids.size, int(sizes[-1])) if sizes.size else 0])
        self.universe = _sorted_union(heads)
        self.table = np.full((len(rankings), self.universe.size), -1, dtype=np.int16)
        for o, (head, sizes) in enumerate(zip(heads, self.sizes)):
            _first_classes(_locate(self.universe, head), sizes, self.table[o])
        self.n_classes = max([s.size for s in self.sizes] + [1])

    def of(self, photo_ids: np.ndarray) -> np.ndarray:
        """(rankings, len(photo_ids)) int16 class of each id."""
        out = np.full((self.table.shape[0], photo_ids.size), -1, dtype=np.int16)
        if self.universe.size and photo_ids.size:
            idx = np.minimum(_locate(self.universe, photo_ids), self.universe.size - 1)
            found = self.universe[idx] == photo_ids
            out[:, found] = self.table[:, idx[found]]
        return out


def _locate(sorted_values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """np.searchsorted(sorted_values, queries), looking the queries up in sorted order: the
    same result, but lookups that walk the array in order instead of a cache miss per step
    (1M shuffled ids in 4.1M: 0.64 → ~0.1 s)."""
    if queries.size < 2 or bool(np.all(queries[1:] >= queries[:-1])):
        return np.searchsorted(sorted_values, queries)
    order = np.argsort(queries, kind="stable")
    out = np.empty(queries.size, dtype=np.intp)
    out[order] = np.searchsorted(sorted_values, queries[order])
    return out


def _sorted_union(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Sorted distinct values of all arrays. The rankings are mostly permutations or subsets
    of the pool: only the largest is sorted, the others add just the values it lacks (no
    concatenation of every ranking: 20M ids, 160 MB plus a sort, at R1M's shape)."""
    out = np.zeros(0, np.int64)
    for a in sorted(arrays, key=len, reverse=True):
        if out.size == 0:
            out = a if a.size < 2 or bool(np.all(a[1:] > a[:-1])) else np.unique(a)
            continue
        idx = np.minimum(_locate(out, a), out.size - 1)
        extra = a[out[idx] != a]
        if extra.size:
            out = np.union1d(out, extra)
    return out


@compiled
def _first_classes(cols, sizes, row):  # pragma: no cover (compiled)
    """row[cols[i]] = the index of the first of `sizes` (sorted) above rank i, for the first
    rank i at which each column occurs (a repeated id counts once, at its best rank)."""
    c = 0
    for i in range(cols.size):
        while c < sizes.size and sizes[c] <= i:
            c += 1
        if row[cols[i]] < 0:
            row[cols[i]] = c


@compiled
def _tally_block(sims, rows, thr, thr_off, cls, hist):  # pragma: no cover (compiled)
    """hist[o, c, thr_off[q] + q + b] += 1 for every candidate j of the block with class c ≥ 0
    in ranking o and bucket b ≥ 1 for query q = rows[r] (row r of `sims`, (rows, block)).
    b = #{thresholds of q < s}, as np.searchsorted(side='left') (NaN → all of them);
    bucket 0 (beats no positive) never moves a positive, so it is not counted."""
    n_ord = cls.shape[0]
    for r in range(rows.size):
        q = rows[r]
        a = thr_off[q]
        t = thr_off[q + 1] - a
        base = a + q
        if t == 0:
            continue
        for j in range(sims.shape[1]):
            s = sims[r, j]
            if s <= thr[a]:  # at or below the lowest positive: most candidates, one compare
                continue
            if s != s:
                b = t
            else:
                lo = 0
                hi = t
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if thr[a + mid] < s:
                        lo = mid + 1
                    else:
                        hi = mid
                b = lo
            if b == 0:
                continue
            for o in range(n_ord):
                c = cls[o, j]
                if c >= 0:
                    hist[o, c, base + b] += 1


@dataclass
class MethodData:
    """One method's landmark similarities, and its candidates reduced to bucket histograms."""

    name: str
    sims_db: np.ndarray  # float32 (n queries, n database), nan where not described
    q_present: np.ndarray  # bool (n queries,)
    thresholds: list[np.ndarray]  # per query: sorted unique similarities of its easy ∪ hard positives
    cand_ids: np.ndarray  # int64 photo ids, store order
    rankings: list[Ranking]
    hist: np.ndarray  # (rankings, prefix classes, Σ_q (T_q + 1)) int64 bucket counts (see _tally_block)
    hist_off: np.ndarray  # query q's buckets start at hist_off[q]
    sizes: list[np.ndarray]  # per ranking: its sorted distinct prefix sizes (class c ↔ sizes[c])
    _order: np.ndarray | None = field(default=None, repr=False)  # argsort of cand_ids (lazy)
    _sorted: np.ndarray | None = field(default=None, repr=False)

    def above(self, ranking: int, size: int) -> np.ndarray:
        """above[hist_off[q] + k] = #{d in the prefix : bucket(d) > k} = #{d : s > threshold k of q},
        for every query q at once (suffix sums of each query's histogram segment)."""
        sizes = self.sizes[ranking]
        c = int(np.searchsorted(sizes, size))
        if c >= sizes.size or sizes[c] != size:
            raise ValueError(f"prefix size {size} of ranking {ranking} was not tallied ({sizes.tolist()})")
        hist = self.hist[ranking, : c + 1].sum(axis=0)
        if hist.size == 0:
            return hist
        cs = np.cumsum(hist)
        lengths = np.diff(np.append(self.hist_off, hist.size))  # T_q + 1 ≥ 1 per query
        return np.repeat(cs[self.hist_off + lengths - 1], lengths) - cs

    def found(self, ranking: int, size: int) -> int:
        """How many ids of the prefix are candidates of this method's store."""
        r = self.rankings[ranking]
        return int(columns_of(self, r.ids[:size]).size)


def reduce_method(
    name: str,
    dataset: Any,
    landmark: Any,
    candidate_blocks: Iterable[tuple[Any, np.ndarray]],
    rankings: Sequence[Ranking],
) -> MethodData:
    """Build MethodData from the query × database similarities (`mining.retrieval.methodstores.LandmarkSims`),
    an iterator of (candidate ids, sims (query store rows, block)) and the rankings whose
    prefixes will be evaluated."""
    nq, ndb = len(dataset.qimlist), len(dataset.imlist)
    rows_arr = landmark.query_index
    sims_db = landmark.dense(nq, ndb)
    q_present = np.zeros(nq, dtype=bool)
    q_present[rows_arr] = True
    thresholds = []
    for q in range(nq):
        pos = dataset.positives(q)
        s = sims_db[q, pos] if pos else np.zeros(0, np.float32)
        thresholds.append(np.unique(s[np.isfinite(s)]).astype(np.float32))
    thr = np.concatenate(thresholds) if thresholds else np.zeros(0, np.float32)
    thr_off = np.concatenate([[0], np.cumsum([t.size for t in thresholds])]).astype(np.int64)
    hist_off = thr_off[:-1] + np.arange(nq)
    classes = _Classes(rankings)
    hist = np.zeros((len(rankings), classes.n_classes, int(thr_off[-1]) + nq), dtype=np.int64)
    id_parts = []
    for ids, block in candidate_blocks:
        photo_ids = parse_ids(ids, f"{name}/candidates")
        block = np.asarray(block)
        if block.dtype != np.float32:
            block = block.astype(np.float64)
        _tally_block(np.ascontiguousarray(block), rows_arr, thr, thr_off, classes.of(photo_ids), hist)
        id_parts.append(photo_ids)
    cand_ids = np.concatenate(id_parts) if id_parts else np.zeros(0, np.int64)
    return MethodData(name, sims_db, q_present, thresholds, cand_ids, list(rankings), hist, hist_off, classes.sizes)


def load_method(method_dir: Path, dataset: Any, rankings: Sequence[Ranking], progress: bool = False,
                benchmark: str | None = None, spatial: bool = False) -> MethodData:
    """Stream DESC/<method>/{queries,database,candidates} into MethodData for these rankings
    (`benchmark`: that benchmark's queries and database, in a run with several; `spatial`: the
    +SP ranking (`mining.retrieval.reranking`), named `<method>+SP`)."""
    stores = open_method(method_dir, benchmark=benchmark, spatial=spatial, method_of=get_method)
    name = stores.name + (ROW_SUFFIX if spatial else "")
    landmark = stores.landmark_similarities(dataset)
    cands = stores.candidate_similarities()
    if progress:
        cands = bar(cands, total=len(stores.candidates.shard_names()), desc=f"evaluate {name}", unit="shard")
    return reduce_method(name, dataset, landmark, cands, rankings)


def method_variants(descriptors: Sequence[Path], benchmark: str | None = None) -> list[tuple[Path, bool]]:
    """(DESC/<method>, spatial) of every row the evaluation reports: each method as it is, and
    its +SP ranking beside it when its stores keep keypoints."""
    out = []
    for d in descriptors:
        out.append((Path(d), False))
        if has_keypoints(open_method(Path(d), benchmark=benchmark)):
            out.append((Path(d), True))
    return out


def columns_of(md: MethodData, photo_ids: np.ndarray) -> np.ndarray:
    """Candidate columns of this method's store holding the given photo ids (absent ones dropped)."""
    if md.cand_ids.size == 0:
        return np.zeros(0, np.int64)
    if md._order is None or md._sorted is None:
        md._order = np.argsort(md.cand_ids, kind="stable")
        md._sorted = md.cand_ids[md._order]
    order, sorted_ids = md._order, md._sorted
    photo_ids = np.asarray(photo_ids, dtype=np.int64)
    idx = np.minimum(np.searchsorted(sorted_ids, photo_ids), sorted_ids.size - 1)
    return order[idx[sorted_ids[idx] == photo_ids]]
