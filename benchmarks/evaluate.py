"""Benchmark: vectorised `compute_map` vs revisitop's per-query loop, same data, same run.

Prints JSON. Default size is the issue's target: 70 queries x 1,000,000 database images,
revisited-Oxford-like ground truth (tens of positives and junk per query).
Usage: python benchmarks/evaluate.py [--queries 70] [--db 1000000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from mining.evaluate.metrics import compute_map
from mining.evaluate.reference import compute_map_loop


def make_data(nq: int, ndb: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    ranks = np.empty((ndb, nq), dtype=np.int64)
    for q in range(nq):
        ranks[:, q] = rng.permutation(ndb)
    gnd = []
    for _ in range(nq):
        items = rng.choice(ndb, 300, replace=False)
        npos, njunk = int(rng.integers(5, 150)), int(rng.integers(0, 100))
        gnd.append({"ok": items[:npos].tolist(), "junk": items[npos : npos + njunk].tolist()})
    return ranks, gnd


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=70)
    ap.add_argument("--db", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    ranks, gnd = make_data(args.queries, args.db)
    kappas = [1, 5, 10]
    fast = compute_map(ranks, gnd, kappas)
    ref = compute_map_loop(ranks, gnd, kappas)
    same = bool(np.isclose(fast[0], ref[0]) and np.allclose(fast[1], ref[1]) and np.allclose(fast[3], ref[3]))
    t_fast = best_of(lambda: compute_map(ranks, gnd, kappas), args.repeat)
    t_loop = best_of(lambda: compute_map_loop(ranks, gnd, kappas), args.repeat)
    print(json.dumps({
        "benchmark": "compute_map",
        "queries": args.queries,
        "database": args.db,
        "vectorised_s": round(t_fast, 4),
        "reference_loop_s": round(t_loop, 4),
        "speedup": round(t_loop / t_fast, 2),
        "target_speedup": 10,
        "identical_results": same,
        "map": round(float(fast[0]), 6),
    }, indent=2))


if __name__ == "__main__":
    main()
