"""Writing the evaluation kit against what `mining evaluate` spends on the same similarities.

A kit holds, per method, the run's similarities of the queries to the landmark database and to
the selected distractors; `mining evaluate` computes the first and those of every candidate of
the pool. So the reference, measured in the same run on the same stores, is evaluate's own
per-method work (`histograms.load_method`: the similarities and their tally) for these
stores. The stores are `benchmarks.kit_size`'s (70 queries, 500 database images, cnn-gem and
rsift-vlad as 512-d float16 rows, rsift-asmk with WORDS visual words per image, shards of
10,000), the selection N of a POOL of candidates.

    python -m benchmarks.kit_write [--n 5000] [--pool 5000] [--words 512] [--repeat 2]
Prints JSON: CPU seconds of the kit and of the reference (best of REPEAT, alternating), their
ratio, and whether the kit's similarities are the reference's bit for bit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from benchmarks.kit_size import _stores

from mining.retrieval.descriptors import as_float32, iter_similarities, open_store
from mining.kit.read import SIMS
from mining.kit.write import write_kit
from mining.datasets.landmarks import load_landmarks
from mining.methods import get_method
from mining.retrieval.methodstores import parse_ids
from mining.stages.evaluate.histograms import Ranking, load_method


def _gnd(root: Path, rng: np.random.Generator) -> Path:
    imlist = [f"database_{i}" for i in range(500)]
    qimlist = [f"queries_{i}" for i in range(70)]
    gnd = []
    for _ in qimlist:
        items = rng.permutation(500)
        gnd.append({"bbx": [0, 0, 5, 5], "easy": items[:8].tolist(), "hard": items[8:20].tolist(),
                    "junk": items[20:25].tolist()})
    (root / "lm").mkdir(parents=True)
    path = root / "lm" / "gnd_bench.pkl"
    path.write_bytes(pickle.dumps({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}))
    return path


def _evaluate(dirs: list[Path], dataset: object, selected: np.ndarray) -> float:
    t0 = time.process_time()
    for d in dirs:
        load_method(d, dataset, [Ranking.of_set(selected)])
    return time.process_time() - t0


def _kit(root: Path, dirs: list[Path], sel: pd.DataFrame, evaluation: dict) -> float:
    shutil.rmtree(root / "kit", ignore_errors=True)
    t0 = time.process_time()
    write_kit(root / "kit", dirs, sel, evaluation, method_of=get_method)
    return time.process_time() - t0


def _same_bits(kit: Path, dirs: list[Path], selected: np.ndarray) -> bool:
    """The kit's distractor similarities are those evaluate computes, bit for bit (kit order)."""
    for d in dirs:
        q, c = open_store(d / "queries", get_method), open_store(d / "candidates", get_method)
        cols = {}
        for ids, sims in iter_similarities(q, c):
            for j, pid in enumerate(parse_ids(ids, str(d))):
                cols[int(pid)] = sims[:, j]
        kit_dir = kit / "methods" / d.name
        kit_ids = parse_ids(open_store(kit_dir / "distractors").ids(), str(kit_dir))
        want = np.stack([cols[int(i)] for i in kit_ids], axis=1)
        got = np.load(kit_dir / SIMS / "distractors.npy")
        if got.tobytes() != np.ascontiguousarray(want, np.float32).tobytes() or set(kit_ids) != set(selected.tolist()):
            return False
    return True


def _digest(kit: Path) -> str:
    """sha256 of the kit's checksum lines but kit.json, README.md and SHA256SUMS (their code version)."""
    lines = [x for x in (kit / "SHA256SUMS").read_text().splitlines()
             if not x.endswith(("kit.json", "README.md", "evaluation.json"))]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000, help="distractors selected")
    ap.add_argument("--pool", type=int, default=None, help="candidates described (default: N)")
    ap.add_argument("--words", type=int, default=512, help="ASMK visual words per image")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    pool = args.pool or args.n
    rng = np.random.default_rng(0)
    as_float32(np.zeros((2, 2), np.float16))  # numba's compile (or cache load) out of the timings
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dirs = _stores(root / "desc", pool, args.words, rng)
        dataset = load_landmarks(_gnd(root, rng))
        all_ids = 10_000_000 + 3 * np.arange(pool)
        selected = np.sort(rng.choice(all_ids, args.n, replace=False)) if args.n < pool else all_ids
        sel = pd.DataFrame({"rank": np.arange(1, args.n + 1), "photo_id": selected, "path": "jpg/000/x.jpg",
                            "released": True})
        evaluation = {"landmarks": {"name": "bench", "fingerprint": dataset.fingerprint()}, "n": args.n,
                      "methods": []}
        kit_s, eval_s = [], []
        for _ in range(args.repeat):
            eval_s.append(_evaluate(dirs, dataset, selected))
            kit_s.append(_kit(root, dirs, sel, evaluation))
        same = _same_bits(root / "kit", dirs, selected)
        digest = _digest(root / "kit")
    print(json.dumps({"n": args.n, "pool": pool, "asmk_words_per_image": args.words, "methods": 3,
                      "kit_cpu_s": round(min(kit_s), 2), "evaluate_cpu_s": round(min(eval_s), 2),
                      "ratio": round(min(kit_s) / min(eval_s), 3), "all_kit_cpu_s": [round(x, 2) for x in kit_s],
                      "all_evaluate_cpu_s": [round(x, 2) for x in eval_s], "similarities_bit_identical": same,
                      "kit_digest": digest}, indent=1))


if __name__ == "__main__":
    main()
