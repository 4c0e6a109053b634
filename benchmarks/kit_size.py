"""The evaluation kit's size per million distractors, per method, at the shipped settings.

The demo's kit is small and unwhitened (its tiny world has fewer training images than 2 x the
whitening dimension, so cnn-gem and rsift-vlad keep their raw vectors there). This writes a
kit (`mining.kit.write.write_kit`) from generated stores shaped as a real run's: cnn-gem and
rsift-vlad whitened to 512-d float16 rows, rsift-asmk with WORDS visual words per image (its
codebook has 512 words and images keep at most 1,000 RootSIFTs, so at most 512 words; `--words`
from a demo kit's measured mean, or the bound); then measures the files written. Reference,
same run: copying the same selected rows' bytes with numpy alone (`np.save` of the float16
rows; `np.savez` of the ASMK arrays), no ids, no checksums.

    python -m benchmarks.kit_size [--n 20000] [--words 512]
Prints JSON: per method bytes per distractor, GB per million, and write time vs the reference.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mining.retrieval.descriptors import open_store, write_global_shard, write_ids, write_store_info
from mining.kit.write import write_kit
from mining.methods import get_method
from mining.methods.rsift_asmk import RSiftAsmk


def _stores(root: Path, n: int, words: int, rng: np.random.Generator) -> list[Path]:
    ids = [str(10_000_000 + 3 * i) for i in range(n)]
    dirs = []
    for name in ("cnn-gem", "rsift-vlad"):
        d = root / name
        for part, count in (("queries", 70), ("database", 500), ("candidates", n)):
            x = rng.normal(size=(count, 512)).astype(np.float32)
            x /= np.linalg.norm(x, axis=1, keepdims=True)
            names = ids if part == "candidates" else [f"{part}_{i}" for i in range(count)]
            for s in range(0, count, 10_000):
                write_global_shard(d / part, f"{s // 10_000:05d}", names[s:s + 10_000], x[s:s + 10_000])
            write_store_info(d / part, {"method": name, "kind": "global", "set": part, "dim": 512, "params": {}})
        dirs.append(d)
    d = root / "rsift-asmk"
    asmk = RSiftAsmk()
    for part, count in (("queries", 70), ("database", 500), ("candidates", n)):
        names = ids if part == "candidates" else [f"{part}_{i}" for i in range(count)]
        for s in range(0, count, 10_000):
            payloads = [(np.sort(rng.choice(512, words, replace=False)).astype(np.int32),
                         rng.integers(0, 256, (words, 16), dtype=np.uint8)) for _ in names[s:s + 10_000]]
            (d / part / "shards").mkdir(parents=True, exist_ok=True)
            asmk.write_payloads(d / part / "shards", f"{s // 10_000:05d}", payloads)
            write_ids(d / part, f"{s // 10_000:05d}", names[s:s + 10_000])
        write_store_info(d / part, {"method": "rsift-asmk", "kind": "asmk", "set": part, "dim": 0,
                                    "params": dict(asmk.defaults)})
    dirs.append(d)
    return dirs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000, help="distractors selected (all of the generated candidates)")
    ap.add_argument("--words", type=int, default=512, help="ASMK visual words per image")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dirs = _stores(root / "desc", args.n, args.words, rng)
        sel = pd.DataFrame({"rank": np.arange(1, args.n + 1), "photo_id": 10_000_000 + 3 * np.arange(args.n),
                            "path": "jpg/000/x.jpg", "released": True})
        evaluation = {"landmarks": {"name": "bench", "fingerprint": "0"}, "n": args.n, "methods": []}
        t0 = time.perf_counter()
        stats = write_kit(root / "kit", dirs, sel, evaluation, method_of=get_method)
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()  # the reference: the same payload bytes, numpy alone
        for d in dirs:
            for i, (_, payload) in enumerate(open_store(d / "candidates", get_method).iter_blocks()):
                if isinstance(payload, np.ndarray):
                    np.save(root / f"ref-{d.name}-{i}.npy", payload)
                else:
                    np.savez(root / f"ref-{d.name}-{i}.npz", words=payload.words, bits=payload.bits,
                             offsets=payload.offsets)
        reference = time.perf_counter() - t0
    print(json.dumps({"n": args.n, "asmk_words_per_image": args.words,
                      "methods": {m: {"bytes_per_distractor": v["bytes_per_distractor"],
                                      "gb_per_million": v["gb_per_million"]} for m, v in stats["methods"].items()},
                      "write_s": round(seconds, 2), "reference_s": round(reference, 2),
                      "ratio": round(seconds / reference, 2)}, indent=1))


if __name__ == "__main__":
    main()
