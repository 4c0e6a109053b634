"""Benchmark `mining score`'s core: total time vs the bare similarity GEMMs, and peak RSS.

Random L2-normalised descriptors: N candidates (default 4.1M, as R1M's pool) × 512-d,
70 queries in 11 landmarks with 50–500 positives each, three methods. Candidate descriptors
are float16 (as the stores hold them), drawn once into a small pool of chunks that the fake
stores cycle through (distinct ids), so data generation stays out of the timings and memory
holds no 4M × 512 matrix. The bare GEMMs are the same products on the same chunks, in the
same run. Prints one JSON object; targets: ratio ≤ 2.0, peak RSS ≤ 3 GB.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np


from mining.retrieval.descriptors import as_float32
from mining.stages.score import CandidateVectors, MethodInput, Problem, score_candidates


def normalised(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--candidates", type=int, default=4_100_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--queries", type=int, default=70)
    ap.add_argument("--landmarks", type=int, default=11)
    ap.add_argument("--methods", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=32768)
    ap.add_argument("--pool", type=int, default=4, help="distinct descriptor chunks per method")
    ap.add_argument("--review-top", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=None, help="counting threads (default: CPU count)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    n, chunk = a.candidates, a.chunk
    n_chunks = -(-n // chunk)
    landmark_of = [f"landmark{i % a.landmarks:02d}" for i in range(a.queries)]
    problem = Problem([f"{lm}_{i:03d}" for i, lm in enumerate(landmark_of)], landmark_of,
                      list(dict.fromkeys(landmark_of)))
    ids = np.arange(10**9, 10**9 + n, dtype=np.int64)

    methods, pools, queries = [], [], []
    for mi in range(a.methods):
        q = normalised(rng, a.queries, a.dim)
        pos = [q[i] @ normalised(rng, int(rng.integers(50, 501)), a.dim).T for i in range(a.queries)]
        pool = [normalised(rng, chunk, a.dim).astype(np.float16) for _ in range(a.pool)]
        pools.append(pool)
        queries.append(q)

        def blocks(pool=pool):
            for c in range(n_chunks):  # what a global store's blocks are: its float16 shards
                yield CandidateVectors(pool[c % len(pool)][: min(chunk, n - c * chunk)])

        methods.append(MethodInput(f"m{mi}", np.arange(a.queries), [p.astype(np.float32) for p in pos], ids,
                                   blocks, query_vectors=q))

    def bare_products() -> tuple[float, float]:
        """Seconds of the float32 GEMMs alone, and of what a float16 store's similarity costs
        (cast to float32 + GEMM, exactly as the fake stores above do it)."""
        gemm = sim = 0.0
        for q, pool in zip(queries, pools):
            p32 = [p.astype(np.float32) for p in pool]
            t0 = time.perf_counter()
            for c in range(n_chunks):
                _ = q @ p32[c % len(p32)][: min(chunk, n - c * chunk)].T
            gemm += time.perf_counter() - t0
            del p32
            t0 = time.perf_counter()
            for c in range(n_chunks):
                _ = q @ as_float32(pool[c % len(pool)][: min(chunk, n - c * chunk)]).T
            sim += time.perf_counter() - t0
        return gemm, sim

    # the shared machine's load drifts: measure the bare products before and after, average
    g1, s1 = bare_products()
    t0 = time.perf_counter()
    result = score_candidates(problem, methods, chunk=chunk, review_top=a.review_top, threads=a.threads)
    total_s = time.perf_counter() - t0
    g2, s2 = bare_products()
    gemm_s, sim_s = (g1 + g2) / 2, (s1 + s2) / 2
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps({
        "candidates": n, "dim": a.dim, "queries": a.queries, "landmarks": a.landmarks, "methods": a.methods,
        "chunk": chunk, "total_s": round(total_s, 2), "gemm_s": round(gemm_s, 2),
        "gemm_s_before_after": [round(g1, 2), round(g2, 2)],
        "ratio": round(total_s / gemm_s, 3), "target_ratio": 2.0,
        "f16_cast_plus_gemm_s": round(sim_s, 2), "ratio_vs_f16_similarity": round(total_s / sim_s, 3),
        "peak_rss_gb": round(rss_gb, 3), "target_rss_gb": 3.0,
        "candidates_per_s": round(n / total_s), "stats_seconds": result.stats["seconds"],
        "mean_score": round(float(result.score.mean()), 4),
    }))


if __name__ == "__main__":
    main()
