"""Near-duplicate pairs at scale: the hash index against all pairs, on planted duplicates.

Usage: python -m benchmarks.neardup_index [--candidates 1000000] [--sizes 250000 500000]
       [--oracle 20000] [--threads 1] [--out FILE]

Synthetic candidates (seconds to make, in blocks): 512-d float16 descriptors (random, scaled:
not unit rows), and dHashes of smooth random 9 × 8 grey grids (low-frequency fields plus a
horizontal gradient plus noise: correlated, unevenly spread bits like photos', not uniform
ones), 1 % of them flat (`--flat`) (hash 0, a pile in one bucket of every substring). Planted: groups of
a source and 1-3 copies (descriptor + noise: cosines on both sides of 0.9; hash with 0-14
bits flipped: on both sides of 10). Measured in this process, on its CPU clock (all threads)
and its peak RSS from the stage's start (VmHWM, reset through /proc/self/clear_refs):
- `close_pairs` (the stage's rule: hash index, then cosines) at each size, and its growth
  exponent b (cost ∝ n^b);
- recall and precision at the largest size against the planted truth (every pair within a
  planted group passing both tests, computed directly: unplanted pairs of independent
  512-d vectors have cosines of ±0.2, never 0.9);
- the reference in the same run: `all_close_pairs` (all pairs, the tests' oracle) on the first
  `--oracle` candidates, identical pairs required, and its pair rate: the all-pairs time at
  each size is (n² / 2) / rate;
- per image, dHash of a 1024 × 768 JPEG (benchmarks/describe.py's photos) and, per candidate,
  the landmark-copy check against `--landmark-images` images (R1M: ROxford + RParis, ~11.5k).
Prints JSON with the R1M (4.1M candidates) and 100M projections in core-hours.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from mining.settings import options
from mining.settings.options import NeardupOptions
from mining.stages.neardup import stage as neardup

SIZES = {"r1m": 4_100_000, "ilias_100m": 100_000_000}
DIM = 512


def _bits(grid: np.ndarray) -> np.ndarray:
    """dHash bits of (n, 8, 9) grids as uint64, like mining.stages.neardup.stage._bits."""
    return np.packbits((grid[:, :, :-1] > grid[:, :, 1:]).reshape(len(grid), 64), axis=1).view(">u8").ravel().astype(np.uint64)


def make(n: int, seed: int, flat: float = 0.01, block: int = 200_000) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """float16 rows, uint64 hashes, readable flags, and the planted groups (row indices)."""
    rng = np.random.default_rng(seed)
    up_r = np.clip(1 - np.abs(np.linspace(0, 3, 8)[:, None] - np.arange(4)[None, :]), 0, None)  # 8 × 4 linear interpolation
    up_c = np.clip(1 - np.abs(np.linspace(0, 3, 9)[:, None] - np.arange(4)[None, :]), 0, None)
    vec = np.empty((n, DIM), np.float16)
    hashes = np.empty(n, np.uint64)
    for a in range(0, n, block):
        m = min(block, n - a)
        vec[a:a + m] = rng.standard_normal((m, DIM), dtype=np.float32) * 3
        coarse = rng.standard_normal((m, 4, 4), dtype=np.float32)
        grid = up_r @ coarse @ up_c.T + rng.standard_normal((m, 1, 1), dtype=np.float32) * np.arange(9, dtype=np.float32) * 0.15
        hashes[a:a + m] = _bits(grid + rng.standard_normal((m, 8, 9), dtype=np.float32) * 0.25)
    hashes[rng.choice(n, int(n * flat), replace=False)] = 0  # flat images
    # planted groups: a source and 1-3 copies among the rows (disjoint)
    rows = rng.permutation(n)[: n // 20]
    groups, at = [], 0
    while at + 4 <= rows.size:
        g = rows[at:at + 1 + int(rng.integers(1, 4))]
        at += g.size
        noise = rng.uniform(0.2, 0.6, (g.size - 1, 1)).astype(np.float32)  # cosine ~ 1/sqrt(1+s²): 0.86-0.98
        src = vec[g[0]].astype(np.float32) / 3
        vec[g[1:]] = ((src + rng.standard_normal((g.size - 1, DIM), dtype=np.float32) * noise) * 3).astype(np.float16)
        flips = np.zeros(g.size - 1, np.uint64)
        for _ in range(int(rng.integers(0, 15))):
            flips ^= np.uint64(1) << rng.integers(0, 64, g.size - 1).astype(np.uint64)
        hashes[g[1:]] = hashes[g[0]] ^ flips
        groups.append(g)
    return vec, hashes, rng.random(n) > 0.001, groups


def truth(vec: np.ndarray, hashes: np.ndarray, ok: np.ndarray, groups: list[np.ndarray], n: int,
          th: NeardupOptions) -> set[tuple[int, int]]:
    from mining.retrieval.methodstores import unit_rows

    out = set()
    for g in groups:
        g = np.sort(g[g < n])
        u = unit_rows(vec[g]).astype(np.float64)
        for x in range(g.size):
            for y in range(x + 1, g.size):
                i, j = int(g[x]), int(g[y])
                if ok[i] and ok[j] and u[x] @ u[y] >= th.min_cosine and neardup.hamming(hashes[i], hashes[j]) <= th.max_hash_distance:
                    out.add((i, j))
    return out


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn: Any, *args: Any, **kw: Any) -> tuple[Any, float, float, float]:
    reset_peak()
    c, w = time.process_time(), time.perf_counter()
    out = fn(*args, **kw)
    return out, time.process_time() - c, time.perf_counter() - w, peak_mb()


def hash_cost(images: int) -> float:
    """CPU seconds per 1024 × 768 JPEG of neardup's dHash (one thread)."""
    from benchmarks.describe import make_folder
    from mining.photos.imageindex import image_paths

    with tempfile.TemporaryDirectory() as tmp:
        make_folder(Path(tmp) / "images", images)  # photo ids 1..images
        paths = image_paths(Path(tmp) / "images", range(1, images + 1))
        neardup.hash_files(paths[:2], threads=1)  # warm: imports
        c = time.process_time()
        neardup.hash_files(paths, threads=1)
        return (time.process_time() - c) / len(paths)


def landmark_cost(vec: np.ndarray, hashes: np.ndarray, ok: np.ndarray, images: int, n: int, th: NeardupOptions) -> float:
    """CPU seconds per candidate of the landmark-copy check against `images` landmark images."""
    from mining.retrieval.methodstores import unit_rows

    rng = np.random.default_rng(3)
    lm = unit_rows(rng.standard_normal((images, DIM), dtype=np.float32))
    lm_hash = rng.integers(0, 2**63, (images, 11), dtype=np.int64).astype(np.uint64)
    c = time.process_time()
    neardup.landmark_copies(vec, np.arange(n), hashes[:n], ok[:n], lm, lm_hash, np.ones(images, bool), th)
    return (time.process_time() - c) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=1_000_000)
    ap.add_argument("--sizes", type=int, nargs="*", default=[250_000, 500_000], help="smaller sizes for the growth fit")
    ap.add_argument("--oracle", type=int, default=20_000, help="candidates compared by all pairs too (the reference)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hash-images", type=int, default=24)
    ap.add_argument("--landmark-images", type=int, default=11_500)
    ap.add_argument("--landmark-candidates", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flat", type=float, default=0.01, help="fraction of flat images (hash 0)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    th = options.defaults("neardup")
    t0 = time.perf_counter()
    vec, hashes, ok, groups = make(a.candidates, a.seed, a.flat)
    res: dict[str, Any] = {"candidates": a.candidates, "flat": a.flat, "dim": DIM, "threads": a.threads, "planted_groups": len(groups),
                           "generate_s": round(time.perf_counter() - t0, 1), "input_mb": round((vec.nbytes + hashes.nbytes) / 2**20, 1)}
    sample = np.random.default_rng(1).integers(0, a.candidates, (200_000, 2))
    d = neardup.hamming(hashes[sample[:, 0]], hashes[sample[:, 1]])
    res["hash_spread"] = {"median_bits_random_pairs": float(np.median(d)),
                          "within_10_per_million_random_pairs": float((d <= th.max_hash_distance).mean() * 1e6)}
    neardup.close_pairs(vec[:2000], hashes[:2000], ok[:2000], th, normalize=True)  # compile / load the kernel
    runs = []
    for n in sorted({*a.sizes, a.candidates}):
        pairs, cpu, wall, peak = timed(neardup.close_pairs, vec[:n], hashes[:n], ok[:n], th, normalize=True, threads=a.threads)
        runs.append({"candidates": n, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "peak_rss_mb": round(peak, 1),
                     "pairs": int(len(pairs)), "candidates_per_cpu_s": round(n / cpu)})
    res["index"] = runs
    found = {tuple(p) for p in pairs.tolist()}
    want = truth(vec, hashes, ok, groups, a.candidates, th)
    res["planted"] = {"true_pairs": len(want), "found": len(found), "recall": len(found & want) / max(1, len(want)),
                      "precision": len(found & want) / max(1, len(found))}
    m = a.oracle
    oracle, o_cpu, o_wall, o_peak = timed(neardup.all_close_pairs, vec[:m], hashes[:m], ok[:m], th, normalize=True)
    idx, i_cpu, _, _ = timed(neardup.close_pairs, vec[:m], hashes[:m], ok[:m], th, normalize=True, threads=a.threads)
    rate = m * (m - 1) / 2 / o_cpu
    res["oracle"] = {"candidates": m, "cpu_s": round(o_cpu, 2), "pairs": int(len(oracle)), "identical": bool(np.array_equal(oracle, idx)),
                     "pairs_per_cpu_s": round(rate), "index_cpu_s": round(i_cpu, 3), "peak_rss_mb": round(o_peak, 1)}
    b = float(np.polyfit(np.log([r["candidates"] for r in runs]), np.log([r["cpu_s"] for r in runs]), 1)[0])
    top = runs[-1]
    res["growth_exponent_cpu"] = round(b, 3)
    res["all_pairs_cpu_s_at_largest"] = round(top["candidates"] ** 2 / 2 / rate, 1)
    res["ratio_all_pairs_to_index_at_largest"] = round(res["all_pairs_cpu_s_at_largest"] / top["cpu_s"], 1)
    res["hash_cpu_s_per_image"] = round(hash_cost(a.hash_images), 5)
    res["landmark_cpu_s_per_candidate"] = round(landmark_cost(vec, hashes, ok, a.landmark_images, a.landmark_candidates, th), 7)
    proj = {}
    for name, n in SIZES.items():
        pairs_h = top["cpu_s"] * (n / top["candidates"]) ** max(1.0, b) / 3600
        proj[name] = {"candidates": n, "pairs_core_hours": round(pairs_h, 3),
                      "hash_core_hours": round(res["hash_cpu_s_per_image"] * n / 3600, 2),
                      "landmark_core_hours": round(res["landmark_cpu_s_per_candidate"] * n / 3600, 2),
                      "all_pairs_core_hours": round(n * n / 2 / rate / 3600, 1),
                      "descriptors_gb": round(n * DIM * 2 / 1e9, 1)}
        proj[name]["core_hours"] = round(proj[name]["pairs_core_hours"] + proj[name]["hash_core_hours"] + proj[name]["landmark_core_hours"], 2)
    res["projection"] = proj
    res["total_s"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(res, indent=1)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
