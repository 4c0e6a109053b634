"""Benchmark of `mining describe`: images/s on 1024 px JPEGs, and stage time / bare model time.

For each method: N synthetic 1024x768 JPEGs in a download folder; the method's state is
learned once (a first describe run); then
  bare  = the method's `describe` on the same images already decoded in memory;
  stage = the whole `describe` (listing, JPEG decode with draft, describe, shard writes,
          failures, store.json) into a fresh store, in this process (--workers 0), reusing
          the learned state through `--model`.
Prints one JSON object: per method images/s (stage) and ratio = stage / bare (target <= 1.25).
Usage: nice python benchmarks/describe.py [--images 16] [--methods cnn-gem,rsift-asmk,rsift-vlad]

With `--demo WORLD` (a `mining demo build` output) it instead describes the world's queries,
database and candidates with each method (default settings, learning on candidates only)
and prints revisited mAP (Easy/Medium/Hard, via mining.evaluate), a random-ranking
baseline, and the Spearman rank correlation between methods' rankings of the candidates
(candidate ranked by its highest similarity to any query).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mining import layout
from mining.describe import describe, list_items, load_image
from mining.methods import get_method

SMALL_LEARNING = {"rsift-asmk": {"codebook_size": 256}, "rsift-vlad": {"dim": 8}, "cnn-gem": {"whiten_dim": 8}}


def photo(seed: int, w: int = 1024, h: int = 768) -> np.ndarray:
    """A busy synthetic 'photo' (shapes, lines, texture), so SIFT finds its cap of keypoints."""
    rng = np.random.default_rng(seed)
    img = np.zeros((h // 4, w // 4, 3), np.uint8)
    img[:] = rng.integers(60, 200, 3)
    for _ in range(60):
        col = tuple(int(v) for v in rng.integers(0, 255, 3))
        p = (int(rng.integers(0, w // 4)), int(rng.integers(0, h // 4)))
        if rng.random() < 0.5:
            cv2.circle(img, p, int(rng.integers(2, 30)), col, -1)
        else:
            cv2.rectangle(img, p, (p[0] + int(rng.integers(3, 40)), p[1] + int(rng.integers(3, 40))), col, -1)
    img = cv2.resize(img, (w, h), interpolation=cv2.INTER_CUBIC)
    return np.clip(img + rng.normal(0, 10, img.shape), 0, 255).astype(np.uint8)


def make_folder(root: Path, n: int) -> None:
    ids = list(range(1, n + 1))
    for pid in ids:
        p = root / layout.image_relpath(pid)
        p.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(p), photo(pid), [cv2.IMWRITE_JPEG_QUALITY, 90])
    (root / "status").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"photo_id": pa.array(ids, pa.int64()), "status": ["ok"] * n}),
                   root / "status" / "shard-00000.parquet")


def bench(name: str, images: Path, work: Path, shard_size: int) -> dict[str, float]:
    params = SMALL_LEARNING.get(name, {})
    model = work / f"{name}-model"
    describe(name, images, "candidates", model, params=params, shard_size=shard_size, progress=False)
    info = json.loads((model / "store.json").read_text())
    method = get_method(name, info["params"])
    if (model / "model.npz").is_file():
        with np.load(model / "model.npz") as z:
            method.set_state({k: z[k] for k in z.files})
    items = list_items(images, "candidates")
    decoded = [load_image(it.path, method.max_side, method.mode) for it in items]
    method.describe(decoded[0])  # warm-up (lazy model load, allocator)
    t0 = time.perf_counter()
    for img in decoded:
        method.describe(img)
    bare = time.perf_counter() - t0
    t0 = time.perf_counter()
    describe(name, images, "candidates", work / f"{name}-stage", model=model, shard_size=shard_size, progress=False)
    stage = time.perf_counter() - t0
    return {"images": len(items), "working_long_side_px": method.max_side,
            "images_per_s": round(len(items) / stage, 3), "bare_images_per_s": round(len(items) / bare, 3),
            "stage_s": round(stage, 3), "bare_s": round(bare, 3), "ratio_stage_to_bare": round(stage / bare, 3)}


def demo_folder(world: Path, root: Path, limit: int | None = None) -> Path:
    """The world's candidate JPEGs as a completed download (R1M layout + status), via symlinks."""
    ids = sorted(int(p.stem) for p in (world / "images").glob("*.jpg"))[:limit]
    for pid in ids:
        dst = root / layout.image_relpath(pid)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            dst.symlink_to((world / "images" / f"{pid}.jpg").resolve())
    (root / "status").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"photo_id": pa.array(ids, pa.int64()), "status": ["ok"] * len(ids)}),
                   root / "status" / "shard-00000.parquet")
    return root


def demo_eval(world: Path, methods: list[str], work: Path, workers: int, limit: int | None = None) -> dict[str, object]:
    from scipy.stats import spearmanr

    from mining.descriptors import iter_similarities, open_store
    from mining.evaluate.metrics import compute_map
    from mining.evaluate.protocols import setup_gnd
    from mining.landmarks import load_landmarks

    ds = load_landmarks(world / "landmarks")
    images = demo_folder(world, work / "download", limit)
    out: dict[str, object] = {"world": str(world), "queries": len(ds.qimlist), "database": len(ds.imlist)}
    cand_rank: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(0)
    rand_ranks = np.stack([rng.permutation(len(ds.imlist)) for _ in ds.qimlist], axis=1)
    out["random"] = {s: round(float(compute_map(rand_ranks, setup_gnd(ds.gnd, s))[0]), 4) for s in ("easy", "medium", "hard")}
    for name in methods:
        t0 = time.perf_counter()
        d = work / name
        ci = describe(name, images, "candidates", d / "candidates", workers=workers, progress=False)
        describe(name, world / "landmarks", "queries", d / "queries", model=d / "candidates", workers=workers, progress=False)
        describe(name, world / "landmarks", "database", d / "database", model=d / "candidates", workers=workers, progress=False)
        q, db = open_store(d / "queries"), open_store(d / "database")
        assert q.ids() == list(ds.qimlist) and db.ids() == list(ds.imlist)
        sim = np.concatenate([s for _, s in iter_similarities(q, db)], axis=1)
        ranks = np.argsort(-sim, axis=1, kind="stable").T
        res = {s: round(float(compute_map(ranks, setup_gnd(ds.gnd, s))[0]), 4) for s in ("easy", "medium", "hard")}
        cand_ids, csims = [], []
        for ids, s in iter_similarities(q, open_store(d / "candidates")):
            cand_ids += ids
            csims.append(s.max(0))
        order = np.argsort(np.array(cand_ids, dtype=np.int64))
        cand_rank[name] = np.concatenate(csims)[order]
        out[name] = {"mAP": res, "candidates": ci["count"], "failed": ci["failed"], "dim": ci["dim"],
                     "seconds": round(time.perf_counter() - t0, 1)}
    names = list(cand_rank)
    out["spearman_candidates"] = {f"{a}~{b}": round(float(spearmanr(cand_rank[a], cand_rank[b])[0]), 3)
                                  for i, a in enumerate(names) for b in names[i + 1:]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=16)
    ap.add_argument("--methods", default="cnn-gem,rsift-asmk,rsift-vlad")
    ap.add_argument("--shard-size", type=int, default=8)
    ap.add_argument("--demo", type=Path, help="evaluate on this demo world instead (mAP, rank correlation)")
    ap.add_argument("--workers", type=int, default=0, help="--demo: Dask workers (0 = in-process)")
    ap.add_argument("--candidates", type=int, help="--demo: use only the first N candidates (CPU budget)")
    args = ap.parse_args()
    if args.demo:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(demo_eval(args.demo, args.methods.split(","), Path(tmp), args.workers, args.candidates), indent=2))
        return
    out: dict[str, object] = {"input_px": "1024x768 JPEG q90", "cpus": os.cpu_count(),
                              "note": "stage in-process (workers 0); bare = method.describe on decoded images"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_folder(root / "images", args.images)
        for name in args.methods.split(","):
            out[name] = bench(name, root / "images", root, args.shard_size)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
