"""Every pair of 64-bit hashes within a Hamming radius, without comparing all pairs.

Multi-index hashing (Norouzi, Punjani & Fleet, CVPR 2012), exact: the 64 bits are cut into m
substrings and substring t is searched within a radius rho_t, chosen so that
sum(rho_t + 1) >= radius + 1. Two hashes at most `radius` bits apart then lie within rho_t
of each other on at least one substring (pigeonhole: otherwise they would differ in at least
sum(rho_t + 1) > radius bits). Per substring, the hashes are bucketed by its value; each
non-empty bucket is compared with the buckets whose value lies within rho_t bits (and is not
smaller: each pair of buckets once), and a pair is kept when its full distance is within the
radius and no earlier substring already brought it (so each pair comes out once).

Cost: the m is chosen by a cost model (bucket probes + pair checks, below). For hashes spread
evenly it grows like n^1.1-1.5 instead of n^2; hashes piled into a few buckets (many
identical images) cost up to the all-pairs count, which is the size of the answer then.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from math import comb
from typing import Any, Callable, Iterator

import numpy as np

from mining.compute.jit import compiled

MAX_BITS = 24  # a substring's bucket table: 2^24 + 1 offsets (128 MB) at most
MAX_PROBES = 1 << 20  # neighbour values per bucket and substring


def plan(n: int, radius: int, bits: int = 64) -> list[tuple[int, int, int]] | None:
    """(shift, bits, rho) per substring, the cheapest by the cost model: per substring, every
    bucket probes its neighbours (min(n, 2^b) x probes) and checks each pair that lands in a
    probed bucket (n^2 / 2 x probes / 2^b for evenly spread hashes). None when comparing all
    pairs is cheaper (a radius near the hash's length, or a handful of hashes)."""
    best, best_cost = None, n * (n - 1) / 2
    for m in range(1, bits + 1):
        sizes = [bits // m + (t < bits % m) for t in range(m)]
        if max(sizes) > MAX_BITS:
            continue
        base, extra = divmod(radius + 1, m)
        rhos = [max(0, base - 1 + (t < extra)) for t in range(m)]
        probes = [sum(comb(b, k) for k in range(min(r, b) + 1)) for b, r in zip(sizes, rhos)]
        if max(probes) > MAX_PROBES:
            continue
        cost = sum(min(n, 2 ** b) * p + n * n / 2 * p / 2 ** b for b, p in zip(sizes, probes))
        if cost < best_cost:
            shifts = np.cumsum([0] + sizes[:-1]).tolist()
            best, best_cost = list(zip(shifts, sizes, rhos)), cost
    return best


def _masks(b: int, rho: int) -> np.ndarray:
    """Every b-bit value of at most rho set bits, 0 first."""
    out = [0]
    for k in range(1, min(rho, b) + 1):
        out += [sum(1 << i for i in c) for c in itertools.combinations(range(b), k)]
    return np.array(out, dtype=np.int64)


@compiled
def _popcount(x: np.uint64) -> int:
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return int((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@compiled
def _substring_pairs(buckets, offsets, order, masks, hashes, radius, earlier):  # pragma: no cover (compiled)
    """Pairs (i < j) found by one substring from the buckets `buckets` (values), in the
    order visited. `earlier`: (shift, mask, rho) rows of the substrings searched before."""
    cap = 1024
    out = np.empty((cap, 2), np.int64)
    k = 0
    top = offsets.size - 1
    for v in buckets:
        a0, a1 = offsets[v], offsets[v + 1]
        for mask in masks:
            w = v ^ mask
            if w < v or w >= top:
                continue
            b0, b1 = offsets[w], offsets[w + 1]
            if b0 == b1:
                continue
            for a in range(a0, a1):
                i = order[a]
                hi = hashes[i]
                for b in range(a + 1 if w == v else b0, b1):
                    j = order[b]
                    x = hi ^ hashes[j]
                    if _popcount(x) > radius:
                        continue
                    seen = False
                    for e in range(earlier.shape[0]):
                        if _popcount((x >> np.uint64(earlier[e, 0])) & np.uint64(earlier[e, 1])) <= earlier[e, 2]:
                            seen = True
                            break
                    if seen:
                        continue
                    if k == cap:
                        cap *= 2
                        grown = np.empty((cap, 2), np.int64)
                        grown[:k] = out[:k]
                        out = grown
                    out[k, 0], out[k, 1] = min(i, j), max(i, j)
                    k += 1
    return out[:k]


def _tasks(hashes: np.ndarray, radius: int, subs: list[tuple[int, int, int]], chunk: int) -> Iterator[tuple[Any, ...]]:
    """Per substring, its bucket table, then its non-empty buckets in chunks of `chunk`."""
    for t, (shift, b, rho) in enumerate(subs):
        key = ((hashes >> np.uint64(shift)) & np.uint64((1 << b) - 1)).astype(np.int64)
        order = np.argsort(key, kind="stable")
        counts = np.bincount(key, minlength=1 << b)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        filled = np.flatnonzero(counts).astype(np.int64)
        earlier = np.array([[s, (1 << bb) - 1, r] for s, bb, r in subs[:t]], dtype=np.int64).reshape(-1, 3)
        masks = _masks(b, rho)
        for a in range(0, filled.size, chunk):
            yield filled[a:a + chunk], offsets, order, masks, hashes, radius, earlier


def hamming_pairs(hashes: np.ndarray, radius: int, threads: int = 1, chunk: int = 16384,
                  progress: Any = None, keep: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray | None:
    """(i, j), i < j, of every pair of `hashes` (uint64) at most `radius` bits apart, sorted.
    None when the cost model says all pairs are cheaper (the caller compares all pairs then).
    `progress`: a bar updated per chunk of buckets (its total is set here). `keep`: a further
    test (pairs → bool per pair) applied to each chunk's pairs in its thread, so that only
    the pairs passing it are held (memory: the largest chunk's pairs within the radius)."""
    hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
    subs = plan(hashes.size, radius)
    if subs is None:
        return None
    tasks = list(_tasks(hashes, radius, subs, chunk))  # tables of all substrings: m x (n + 2^b) x 8 bytes
    if progress is not None:
        progress.total = len(tasks)
    parts = []
    def run(args: tuple[Any, ...]) -> np.ndarray:
        found = _substring_pairs(*args)
        return found if keep is None or not len(found) else found[keep(found)]

    with ThreadPoolExecutor(max(1, threads)) as pool:  # the kernel releases the GIL
        for found in pool.map(run, tasks):
            parts.append(found)
            if progress is not None:
                progress.update(1)
    pairs = np.concatenate(parts) if parts else np.zeros((0, 2), np.int64)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
