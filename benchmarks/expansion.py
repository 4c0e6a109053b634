"""DBA's exact neighbour search (`mining.stages.evaluate.expansion.augment`) against the bare
GEMM of the same rows, in the same run: what the +DBA rows of `mining evaluate` cost per set.

    python -m benchmarks.expansion [--rows 10000 20000] [--dim 512] [--n 2]
Prints JSON per size: CPU seconds, multiply-adds per CPU second of DBA (rows² · dim) and of
the GEMM alone (one block of 2,000 rows against all), and their ratio. Unit random float32
rows; set OMP_NUM_THREADS=1 for one core.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from mining.stages.evaluate.expansion import augment


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 20_000])
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--n", type=int, default=2, help="DBA's neighbours")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    out = []
    for m in args.rows:
        y = rng.normal(size=(m, args.dim)).astype(np.float32)
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        t0 = time.process_time()
        augment(y, args.n, 3.0)
        dba = time.process_time() - t0
        block = min(2000, m)
        t0 = time.process_time()
        y @ y[:block].T
        gemm = time.process_time() - t0
        dba_rate, gemm_rate = m * m * args.dim / dba, m * block * args.dim / gemm
        out.append({"rows": m, "dim": args.dim, "n": args.n, "dba_cpu_s": round(dba, 2),
                    "dba_gmac_per_cpu_s": round(dba_rate / 1e9, 1), "gemm_gmac_per_cpu_s": round(gemm_rate / 1e9, 1),
                    "ratio": round(gemm_rate / dba_rate, 2)})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
