"""Benchmark: compiled `compute_map` vs revisitop's per-query loop, same data, same run.

Prints JSON. Default size is the issue's target: 70 queries x 1,000,000 database images,
revisited-Oxford-like ground truth (tens of positives and junk per query). The two are
timed alternately, --repeat times each (on a shared machine the load drifts; the fastest of
each counts), and their results must be identical bit for bit. Target: speedup >= 50.
`bare_read_s` (numpy summing the ranks array once, single-threaded) is the floor any
implementation that looks at every entry pays: `speedup_of_a_bare_read` bounds the speedup.
CPU seconds (all threads of the process, `time.process_time`) are printed beside wall
seconds: on a machine shared with other work the wall ratio moves with the load (the
compiled pass uses `threads` threads, the loop one), the CPU ratio much less.
Usage (from the repository root): python -m benchmarks.evaluate [--queries 70] [--db 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from mining.compute.cluster import available_cpus
from mining.retrieval.metrics import compute_map
from fixtures.oracle import compute_map_loop  # the tests' oracle: run as `python -m benchmarks.evaluate`


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


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process: every thread) of one call."""
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def identical(a, b) -> bool:
    """(map, aps, pr, prs) equal bit for bit (nan where nan)."""
    return bool(a[0] == b[0] and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a[1:], b[1:])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=70)
    ap.add_argument("--db", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ranks, gnd = make_data(args.queries, args.db)
    kappas = [1, 5, 10]
    fast = compute_map(ranks, gnd, kappas)
    ref = compute_map_loop(ranks, gnd, kappas)
    same = identical(fast, ref)
    load_before = os.getloadavg()
    fast_all, loop_all, read_all = [], [], []
    for _ in range(max(1, args.repeat)):
        fast_all.append(timed(lambda: compute_map(ranks, gnd, kappas)))
        loop_all.append(timed(lambda: compute_map_loop(ranks, gnd, kappas)))
        read_all.append(timed(lambda: ranks.sum()))  # the floor: one pass over the ranks array
    (t_fast, t_loop, t_read), (c_fast, c_loop, _) = (
        [min(t[i] for t in runs) for runs in (fast_all, loop_all, read_all)] for i in (0, 1))
    print(json.dumps({
        "benchmark": "compute_map",
        "queries": args.queries,
        "database": args.db,
        "threads": available_cpus(),
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "compiled_s": round(t_fast, 4),
        "reference_loop_s": round(t_loop, 4),
        "compiled_all_s": [round(t[0], 4) for t in fast_all],
        "reference_loop_all_s": [round(t[0], 3) for t in loop_all],
        "speedup": round(t_loop / t_fast, 2),
        "compiled_cpu_s": round(c_fast, 4),
        "reference_loop_cpu_s": round(c_loop, 4),
        "speedup_cpu": round(c_loop / c_fast, 2),
        "bare_read_s": round(t_read, 4),
        "speedup_of_a_bare_read": round(t_loop / t_read, 2),
        "target_speedup": 50,
        "identical_results": same,
        "map": round(float(fast[0]), 6),
    }, indent=2))


if __name__ == "__main__":
    main()
