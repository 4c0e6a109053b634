"""Exact retrieval metrics (protocols.md): revisitop's trapezoid AP and mP@K, compiled.

Why compiled: evaluating 70 queries against a million-image database with a per-query
Python loop (revisitop's `compute_map`) reads each column of the ranks array with a
`np.in1d` per query; here one pass over the ranks array, in memory order and split over a
few threads, picks out the ok and junk entries (a branch-free, vectorised "could this row
hold a hit" test per row, then an exact look at the few rows it flags), and AP and P@K are
computed from their positions with revisitop's own float arithmetic, so results are
bit-identical to the loop (the test oracle, `fixtures/oracle.py`). `positions_to_metrics` is the one place where AP and P@K are computed from
positions; the distractor experiment feeds it positions computed without ranking the
distractors at all.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np

from mining.compute.cluster import available_cpus
from mining.errors import UserError
from mining.compute.jit import compiled

_POS, _JUNK = 1, 2
_CELLS_PER_THREAD = 1 << 22  # ranks cells below which one more thread is not worth starting
_RANGES_PER_THREAD = 4


def compute_ap(ranks: Sequence[int] | np.ndarray, nres: int) -> float:
    """revisitop's `compute_ap`: AP from the sorted 0-based positions of the positives found.

    `nres` is the number of positives in the ground truth, so missing ones lower the AP.
    """
    pos = np.asarray(ranks, dtype=np.float64)
    if nres <= 0:
        raise ValueError("compute_ap needs at least one positive")
    if pos.size == 0:
        return 0.0
    j = np.arange(pos.size, dtype=np.float64)
    prec0 = np.divide(j, pos, out=np.ones_like(pos), where=pos > 0)
    prec1 = (j + 1.0) / (pos + 1.0)
    return float(((prec0 + prec1) / (2.0 * nres)).sum())


def positions_to_metrics(
    qidx: np.ndarray, pos: np.ndarray, npos: np.ndarray, kappas: Sequence[int] = ()
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(map, aps, pr, prs) from every found positive's (query, 0-based position after junk removal).

    `qidx`/`pos` must be sorted by query, then position; `npos[q]` is query q's number of
    positives (0 → AP and P@K are nan and the query is left out of the means). Bit for bit
    revisitop's arithmetic (`fixtures/oracle.py`'s `compute_map_loop`): the same float64 operations in
    the same order, in one compiled pass over the positives.
    """
    npos = np.ascontiguousarray(npos, dtype=np.int64)
    nq = npos.size
    qidx = np.ascontiguousarray(qidx, dtype=np.int64)
    pos = np.ascontiguousarray(pos, dtype=np.int64)
    kap = np.asarray(list(kappas), dtype=np.int64)
    if qidx.size and (qidx.min() < 0 or qidx.max() >= nq or np.any(np.diff(qidx) < 0)):
        raise UserError(f"query indices must be sorted and in 0..{nq - 1}")
    aps = np.zeros(nq)
    prs = np.zeros((nq, kap.size))
    pr = np.zeros(kap.size)
    total, valid = _metrics_kernel(qidx, pos, npos, kap, aps, prs, pr)
    if valid == 0:
        return float("nan"), aps, np.full(kap.size, np.nan), prs
    return float(total / valid), aps, pr / valid, prs


@compiled
def _metrics_kernel(qidx, pos, npos, kap, aps, prs, pr):  # pragma: no cover (compiled)
    """revisitop's `compute_map` loop body per query, on its found positives' positions."""
    nq = npos.size
    total = 0.0
    valid = 0
    start = 0
    for q in range(nq):
        end = start
        while end < qidx.size and qidx[end] == q:
            end += 1
        if npos[q] == 0:
            aps[q] = np.nan
            for c in range(kap.size):
                prs[q, c] = np.nan
            start = end
            continue
        ap = 0.0
        recall_step = 1.0 / npos[q]
        for j in range(end - start):
            rank = pos[start + j]
            precision_0 = 1.0 if rank == 0 else j / rank
            precision_1 = (j + 1) / (rank + 1)
            ap += (precision_0 + precision_1) * recall_step / 2.0
        total += ap
        aps[q] = ap
        for c in range(kap.size):
            kq = kap[c]
            if end > start and pos[end - 1] + 1 < kq:
                kq = pos[end - 1] + 1
            hits = 0
            for j in range(start, end):
                if pos[j] + 1 <= kq:
                    hits += 1
            prs[q, c] = hits / kq
            pr[c] = pr[c] + prs[q, c]
        valid += 1
        start = end
    return total, valid


@compiled
def _collect_hits(ranks, r0, r1, words, colbits, bounds, items, labels, out_q, out_r, out_l):  # pragma: no cover
    """(query, row, label) of every ok/junk entry of ranks[r0:r1], row by row; stops early
    (returning the next row) when fewer than a row's worth of output slots are left.

    `words`: the byte table "bit q % 8 of byte i: i is ok or junk for some query of that
    residue" (zero from the largest ok/junk index + 1 on), packed little-endian into uint32,
    so that the first loop over a row, which only asks whether any of its entries could be a
    hit, has no branch and compiles to vector gathers from a table that stays in cache. Only
    the rows it flags (~8 % at 70 queries × ~130 ok/junk items each, 1M database) are looked
    at again, and there only the queries of the flagged residues: a byte test, then a binary
    search in the query's sorted ok/junk items `items[bounds[q]:bounds[q + 1]]`.
    """
    nq = ranks.shape[1]
    last = np.uint64(words.size * 4 - 1)  # past every ok/junk index: a clamped index reads 0
    two, three = np.uint64(2), np.uint64(3)
    n = 0
    for r in range(r0, r1):
        if n + nq > out_q.size:
            return r, n
        row = ranks[r]
        acc = np.uint32(0)
        for q in range(nq):
            v = min(np.uint64(row[q]), last)  # a negative entry wraps to huge, then clamps
            acc |= (words[v >> two] >> np.uint32((v & three) << three)) & colbits[q]
        if acc == 0:
            continue
        for b in range(8):  # a row has at most one entry per query: any order within it will do
            if (acc >> np.uint32(b)) & np.uint32(1) == 0:
                continue
            for q in range(b, nq, 8):
                u = min(np.uint64(row[q]), last)
                if (words[u >> two] >> np.uint32((u & three) << three)) & colbits[q] == 0:
                    continue
                v = np.int64(u)
                lo, hi = bounds[q], bounds[q + 1]
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if items[mid] < v:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < bounds[q + 1] and items[lo] == v:
                    out_q[n] = q
                    out_r[n] = r
                    out_l[n] = labels[lo]
                    n += 1
    return r1, n


def _hits_of_rows(ranks: np.ndarray, r0: int, r1: int, tables: tuple, capacity: int) -> list[tuple]:
    """Every (query, row, label) hit of rows r0..r1 as arrays, in row order."""
    parts = []
    while r0 < r1:
        cap = max(capacity, ranks.shape[1])
        oq, orow, olab = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int8)
        nxt, n = _collect_hits(ranks, r0, r1, *tables, oq, orow, olab)
        parts.append((oq[:n], orow[:n], olab[:n]))
        r0, capacity = nxt, 2 * cap
    return parts


def _ground_truth(gnd: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(bounds, items, labels, npos): query q's ok and junk items, sorted and deduplicated,
    in items[bounds[q]:bounds[q + 1]] with labels _POS/_JUNK (an item both ok and junk is
    ok), and npos[q] its number of positives. O(total ok + junk), whatever the query count."""
    nq = len(gnd)
    arrays = [
        np.asarray(v if v is not None else [], dtype=np.int64).ravel()
        for g in gnd for v in (g.get("ok"), g.get("junk"))
    ]
    sizes = np.array([a.size for a in arrays], dtype=np.int64)
    item = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
    if item.size and item.min() < 0:
        raise UserError(f"ground truth holds a negative database index ({int(item.min())})")
    qq = np.repeat(np.arange(2 * nq) // 2, sizes)  # arrays alternate ok, junk per query
    lab = np.repeat(np.tile(np.array([_POS, _JUNK], np.int8), nq), sizes)
    order = np.lexsort((lab, item, qq))  # by query, item, then ok before junk
    qq, item, lab = qq[order], item[order], lab[order]
    first = np.ones(item.size, dtype=bool)  # the first of each (query, item): ok wins
    first[1:] = (qq[1:] != qq[:-1]) | (item[1:] != item[:-1])
    qq, item, lab = qq[first], item[first], lab[first]
    bounds = np.searchsorted(qq, np.arange(nq + 1))
    npos = np.bincount(qq[lab == _POS], minlength=nq).astype(np.int64)
    return bounds, item, lab, npos


def compute_map(
    ranks: np.ndarray, gnd: Sequence[dict[str, Any]], kappas: Sequence[int] = ()
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Drop-in for revisitop's `compute_map(ranks, gnd, kappas)` → (map, aps, pr, prs).

    `ranks`: (list length, n queries) 0-based database indices, best first per column (a
    truncated list is fine). `gnd[i]['ok']` positives, optional `gnd[i]['junk']` ignored.
    Positives are a set (duplicates count once); an index both ok and junk counts as ok.
    Bit-identical to the oracle's `compute_map_loop` where ok and junk are disjoint.
    """
    ranks = np.asarray(ranks)
    if ranks.ndim == 1:
        ranks = ranks[:, None]
    if ranks.ndim != 2 or ranks.shape[1] != len(gnd):
        raise UserError(f"ranks has shape {ranks.shape} but there are {len(gnd)} queries")
    if ranks.size and not np.issubdtype(ranks.dtype, np.integer):
        raise UserError(f"ranks must hold integer database indices, not {ranks.dtype}")
    nrows, nq = ranks.shape
    bounds, items, labels, npos = _ground_truth(gnd)
    # One streaming pass over `ranks` (the only large input), in row order, by a few threads
    # on row ranges; memory besides `ranks`: one byte per database index up to the largest
    # ok/junk one, and O(total ok + junk + hits), whatever the number of queries.
    width = 1 + (int(items.max()) if items.size else 0)
    relevant = np.zeros(4 * (width // 4 + 1), dtype=np.uint8)  # bytes from `width` on stay 0
    residue = np.repeat(np.arange(nq) % 8, np.diff(bounds))
    for b in range(min(8, nq)):  # within one residue every write of an item sets the same bit
        relevant[items[residue == b]] |= np.uint8(1 << b)
    words = relevant.view("<u4").astype(np.uint32)  # byte i is bits 8 (i % 4) of word i // 4
    colbits = (np.uint32(1) << (np.arange(nq) % 8).astype(np.uint32)).astype(np.uint32)
    tables = (words, colbits, bounds, items, labels)
    capacity = int(items.size) + nq
    n_threads = max(1, min(available_cpus(), ranks.size // _CELLS_PER_THREAD))
    if n_threads == 1:
        parts = _hits_of_rows(ranks, 0, nrows, tables, capacity)
    else:  # a few row ranges per thread: on a shared machine a thread that gets its core takes more
        n_ranges = _RANGES_PER_THREAD * n_threads
        rows = np.linspace(0, nrows, n_ranges + 1).astype(np.int64)
        with ThreadPoolExecutor(n_threads) as pool:  # the kernel releases the GIL
            futs = [pool.submit(_hits_of_rows, ranks, int(a), int(b), tables, capacity // n_ranges + nq)
                    for a, b in zip(rows[:-1], rows[1:])]
            parts = [p for f in futs for p in f.result()]
    q_all = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
    p_all = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    l_all = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int8)
    order = np.argsort(q_all, kind="stable")  # each query's hits are in row order already
    q_all, p_all, is_junk = q_all[order], p_all[order], l_all[order] == _JUNK
    # junk strictly before each hit within its query: a running count minus the query's start
    cj = np.cumsum(is_junk) - is_junk
    first = np.searchsorted(q_all, q_all)
    junk_before = cj - cj[first] if q_all.size else cj
    keep = ~is_junk
    qidx, pos = q_all[keep], p_all[keep] - junk_before[keep]
    return positions_to_metrics(qidx, pos, npos, kappas)
