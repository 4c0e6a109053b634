"""Benchmark of `mining describe`: images/s on 1024 px JPEGs, stage time / bare extractor
time per method, and what one shared RootSIFT extraction saves for rsift-asmk + rsift-vlad.

Runs on ONE CPU (affinity; `--cpus N` for more), so that stage and bare do the same work on
the same core and images/s is per core; times are CPU seconds of this process (wall time on
a shared machine swings with the others' load). N synthetic 1024x768 JPEGs in a download
folder; each method's state is learned once (a first describe run); then
  bare  = the method's `describe` on the same images already decoded in memory;
  stage = the whole `describe` (listing, JPEG decode, describe, shard writes, failures,
          store.json) into a fresh store, in this process (--workers 0), reusing the learned
          state through `--model`.
  Each is run --repeat times (default 3), bare and stage interleaved; the least counts.
  shared (when both RootSIFT methods are measured): before = rsift-asmk's stage + rsift-vlad's
          stage (two extractions per image, what separate jobs do); after = one
          `describe.run` pass writing both stores (one extraction); bare = one RootSIFT +
          both aggregations on decoded images. The stores of both ways are compared byte for byte.
  decode: ms per image of the stage's gray decode against the JPEG decoder's direct gray
          output (Pillow draft "L"; not used: other pixels, see the README).
  cnn-gem: its default backend (ONNX Runtime) and torch, stage and bare interleaved in one
          run; speedup = torch CPU s / ONNX CPU s, overall (least of each) and per repeat.
  cnn_gem_batch: ms per image of the backbone on 4 same-size images one by one vs as one
          batch of 4 (single-threaded CPU), and whether the outputs are the same bits.
Prints one JSON object; ratios are from this run (target stage/bare <= 1.1).
Usage: nice python benchmarks/describe.py [--images 16] [--methods cnn-gem,rsift-asmk,rsift-vlad] [--cpus 1]

With `--agreement WORLD`: cnn-gem's descriptors (no whitening) on ONNX Runtime against torch
on a demo world's images as the stage decodes them, the least cosine per decoded size.

With `--demo WORLD` (a `mining demo build` output) it instead describes the world's queries,
database and candidates with each method (default settings, learning on candidates only)
and prints revisited mAP (Easy/Medium/Hard, via mining.stages.evaluate), a random-ranking
baseline, and the Spearman rank correlation between methods' rankings of the candidates
(candidate ranked by its highest similarity to any query).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np

from mining.photos import imageindex
from mining.settings import layout
from mining.compute.cluster import Cluster
from mining.retrieval.descriptors import open_store
from mining.methods import get_method
from mining.settings.options import defaults
from mining.stages.describe import stage as describe
from fixtures.flickr_sizes import photo  # shared with the other benchmarks: run as `python -m benchmarks.describe`
from mining.stages.describe.stage import list_items, load_image, pin_numeric_threads, single_threaded_numerics

DESCRIBE = defaults("describe")  # the schema's settings; each call gives its shard size and params
SMALL_LEARNING = {"rsift-asmk": {"codebook_size": 256}, "rsift-vlad": {"dim": 8}, "cnn-gem": {"whiten_dim": 8}}


def make_folder(root: Path, n: int) -> None:
    ids = list(range(1, n + 1))
    for pid in ids:
        p = root / layout.image_relpath(pid)
        p.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(p), photo(pid, 1024, 768), [cv2.IMWRITE_JPEG_QUALITY, 90])
    imageindex.write(root, [{"photo_id": pid, "status": "ok", "path": layout.image_relpath(pid)} for pid in ids])


def _learned(name: str, images: Path, work: Path, shard_size: int, extra: dict | None = None,  # noqa: ANN202
             tag: str = ""):
    """Learn the method's state once (a first describe run); the method with that state."""
    model = work / f"{name}{tag}-model"
    if not (model / "store.json").is_file():
        params = {name: {**SMALL_LEARNING.get(name, {}), **(extra or {})}}
        describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=[name], out=model,
                     options=replace(DESCRIBE, shard_size=shard_size, params=params), progress=False)
    info = json.loads((model / "store.json").read_text())
    method = get_method(name, info["params"])
    if (model / "model.npz").is_file():
        with np.load(model / "model.npz") as z:
            method.set_state({k: z[k] for k in z.files})
    return method, model


def _timed(fn) -> float:  # noqa: ANN001
    """CPU seconds of this process (all its threads) spent in `fn()`: on a shared machine wall
    time swings with the others' load, CPU time much less; on one CPU it is per-core time."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def bench(name: str, images: Path, work: Path, shard_size: int, repeat: int) -> dict[str, float]:
    method, model = _learned(name, images, work, shard_size)
    items = list_items(images, "candidates")
    decoded = [load_image(it.path, method.max_side, method.mode) for it in items]
    method.describe(decoded[0])  # warm-up (lazy model load, allocator)
    bare = stage = math.inf
    for r in range(repeat):  # interleaved, the least of each: the machine's load comes and goes
        bare = min(bare, _timed(lambda: [method.describe(img) for img in decoded]))
        stage = min(stage, _timed(lambda: describe.run(inputs=describe.Inputs(images=images, image_set="candidates",
                                                                              models=model),
                                                       methods=[name], out=work / f"{name}-stage{r or ''}",
                                                       options=replace(DESCRIBE, shard_size=shard_size),
                                                       progress=False)))
    return {"images": len(items), "working_long_side_px": method.max_side,
            "images_per_s": round(len(items) / stage, 3), "bare_images_per_s": round(len(items) / bare, 3),
            "stage_s": round(stage, 3), "bare_s": round(bare, 3), "ratio_stage_to_bare": round(stage / bare, 3)}


def bench_backends(images: Path, work: Path, shard_size: int, repeat: int) -> dict[str, object]:
    """cnn-gem on ONNX Runtime (the default) against torch, stage and bare, interleaved in
    the same run: images per CPU second of each and their ratio, per repeat and overall."""
    runs = {b: _learned("cnn-gem", images, work, shard_size, {"backend": b}, f"-{b}") for b in ("onnx", "torch")}
    items = list_items(images, "candidates")
    decoded = [load_image(it.path, runs["onnx"][0].max_side, "RGB") for it in items]
    for m, _ in runs.values():
        m.describe(decoded[0])  # warm-up (session / module load, allocator)
    times: dict[str, list[float]] = {f"{k}_{b}": [] for k in ("stage", "bare") for b in runs}
    for r in range(repeat):
        for b, (m, model) in runs.items():
            times[f"bare_{b}"].append(_timed(lambda m=m: [m.describe(img) for img in decoded]))
            times[f"stage_{b}"].append(_timed(lambda b=b, model=model: describe.run(
                inputs=describe.Inputs(images=images, image_set="candidates", models=model), methods=["cnn-gem"],
                out=work / f"cnn-{b}-stage{r}", options=replace(DESCRIBE, shard_size=shard_size), progress=False)))
    n = len(items)
    out: dict[str, object] = {"images": n}
    for b in runs:
        out[b] = {"images_per_s": round(n / min(times[f"stage_{b}"]), 3),
                  "ratio_stage_to_bare": round(min(times[f"stage_{b}"]) / min(times[f"bare_{b}"]), 3),
                  "bare_images_per_s": round(n / min(times[f"bare_{b}"]), 3),
                  "stage_s": [round(t, 3) for t in times[f"stage_{b}"]],
                  "bare_s": [round(t, 3) for t in times[f"bare_{b}"]]}
    for k in ("stage", "bare"):
        per = [t / o for t, o in zip(times[f"{k}_torch"], times[f"{k}_onnx"])]
        out[f"{k}_speedup"] = round(min(times[f"{k}_torch"]) / min(times[f"{k}_onnx"]), 3)
        out[f"{k}_speedup_per_repeat"] = [round(x, 3) for x in per]
    a, b = (open_store(work / f"cnn-{x}-stage0") for x in ("onnx", "torch"))
    va, vb = a.load_all()[1], b.load_all()[1]
    out["note"] = "speedup = torch CPU s / onnx CPU s (images per CPU second, onnx over torch); each backend learns its own whitening"
    out["dims"] = [va.shape[1], vb.shape[1]]
    return out


def backend_agreement(world: Path, per_size: int = 2) -> dict[str, object]:
    """cnn-gem's descriptors (default settings, no whitening) on ONNX Runtime against torch
    for the demo world's candidates, database and query crops as the stage decodes them:
    the least cosine per decoded size (`per_size` images of each size)."""
    from mining.stages.describe.stage import ImageItem

    onnx_m, torch_m = (get_method("cnn-gem", {"whiten": False, "backend": b}) for b in ("onnx", "torch"))
    items = [ImageItem(p.stem, str(p)) for p in sorted((world / "images").glob("*.jpg"))]
    items += list_items(world / "landmarks", "database") + list_items(world / "landmarks", "queries")
    seen: dict[str, list[float]] = {}
    for it in items:
        img = load_image(it.path, onnx_m.max_side, "RGB", it.bbox)
        key = f"{img.shape[1]}x{img.shape[0]}"
        if len(seen.setdefault(key, [])) < per_size:
            seen[key].append(float(np.dot(onnx_m.describe(img), torch_m.describe(img))))
    per = {k: round(min(v), 7) for k, v in sorted(seen.items(), key=lambda kv: -min(kv[1]))}
    return {"sizes": len(per), "images": sum(map(len, seen.values())),
            "min_cosine": min(per.values()), "min_cosine_per_size": per}


def _store_bytes(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted((out / "shards").iterdir())}


def bench_shared(names: list[str], images: Path, work: Path, shard_size: int, repeat: int) -> dict:
    """One pass for the RootSIFT methods against one stage per method, interleaved."""
    learned = [_learned(n, images, work, shard_size) for n in names]
    items = list_items(images, "candidates")
    m0 = learned[0][0]
    decoded = [load_image(it.path, m0.max_side, m0.mode) for it in items]

    def bare_pass() -> None:
        for img in decoded:
            feats = m0.extract(img)
            for m, _ in learned:
                m.describe_extracted(feats)

    for m, _ in learned:  # warm-up (lazy codebook index, allocator), as `bench` does
        m.describe_extracted(m0.extract(decoded[0]))
    bare = after = before = math.inf
    joint = work / "joint"
    for r in range(repeat):
        bare = min(bare, _timed(bare_pass))
        before = min(before, sum(_timed(lambda n=n, mo=mo: describe.run(
            inputs=describe.Inputs(images=images, image_set="candidates", models=mo), methods=[n],
            out=work / f"sep{r}" / n, options=replace(DESCRIBE, shard_size=shard_size), progress=False))
                                 for n, (_, mo) in zip(names, learned)))
        after = min(after, _timed(lambda: describe.run(  # the models: _learned's stores
            inputs=describe.Inputs(images=images, image_set="candidates", models=work / "{method}-model"),
            methods=names, out=work / f"joint{r or ''}" / "{method}", options=replace(DESCRIBE, shard_size=shard_size),
            progress=False)))
    same = all(_store_bytes(joint / n) == _store_bytes(work / "sep0" / n) for n in names)
    n = len(items)
    floor = sift_floor(m0, items, decoded, repeat)
    return {"methods": names, "images": n, "stores_identical_to_separate_runs": same,
            "ms_per_image": {**{k: round(1000 * v / n, 1) for k, v in floor.items()},
                             "aggregations": round(1000 * max(0.0, bare - floor["rootsift"]) / n, 1),
                             "stage": round(1000 * after / n, 1)},
            "ratio_stage_to_sift_alone": round(after / floor["sift_alone"], 3),
            "ratio_stage_to_decode_plus_bare": round(after / (floor["decode"] + bare), 3),
            "before_separate_images_per_s": round(n / before, 3), "after_shared_images_per_s": round(n / after, 3),
            "speedup": round(before / after, 3), "before_s": round(before, 3), "after_s": round(after, 3),
            "bare_s": round(bare, 3), "ratio_stage_to_bare": round(after / bare, 3)}


def sift_floor(m0: object, items: list, decoded: list[np.ndarray], repeat: int) -> dict[str, float]:
    """What the shared RootSIFT pass cannot do without, CPU seconds over the images, least of
    `repeat`: OpenCV's SIFT alone (detectAndCompute with the stage's detector) on the decoded
    gray images, the stage's `rootsift` (SIFT + the RootSIFT transform) and the JPEG decode
    as the stage does it."""
    from mining.methods.rootsift import _sift, rootsift

    cap = int(m0.params["max_features"])
    times = {"sift_alone": math.inf, "rootsift": math.inf, "decode": math.inf}
    for _ in range(repeat):
        times["sift_alone"] = min(times["sift_alone"], _timed(
            lambda: [_sift(cap).detectAndCompute(np.ascontiguousarray(g), None) for g in decoded]))
        times["rootsift"] = min(times["rootsift"], _timed(lambda: [rootsift(g, cap) for g in decoded]))
        times["decode"] = min(times["decode"], _timed(lambda: [load_image(it.path, m0.max_side, m0.mode) for it in items]))
    return times


def bench_decode(images: Path) -> dict[str, float]:
    """The stage's gray decode (full RGB decode, then Pillow's RGB->L) against libjpeg's own
    gray output (draft "L"): ms per image, and how many pixels differ."""
    from PIL import Image

    paths = [it.path for it in list_items(images, "candidates")]

    def direct(path: str) -> np.ndarray:
        with Image.open(path) as im:
            im.draft("L", im.size)
            return np.asarray(im.convert("L"))

    stage = [load_image(p, 1024, "L") for p in paths]
    fast = [direct(p) for p in paths]
    t_stage = min(_timed(lambda: [load_image(p, 1024, "L") for p in paths]) for _ in range(3))
    t_direct = min(_timed(lambda: [direct(p) for p in paths]) for _ in range(3))
    t_rgb768 = min(_timed(lambda: [load_image(p, 768, "RGB") for p in paths]) for _ in range(3))
    diff = [np.abs(a.astype(np.int16) - b.astype(np.int16)) for a, b in zip(stage, fast)]
    return {"gray_1024_stage_ms": round(1000 * t_stage / len(paths), 2),
            "gray_1024_direct_ms": round(1000 * t_direct / len(paths), 2),
            "rgb_768_stage_ms": round(1000 * t_rgb768 / len(paths), 2),
            "direct_pixels_differing": round(float(np.mean([np.mean(d > 0) for d in diff])), 4),
            "direct_max_abs_diff": int(max(int(d.max()) for d in diff))}


def bench_cnn_batch(batch: int = 4) -> dict[str, object]:
    """cnn-gem's backbone on `batch` same-size 768x576 inputs: one by one vs one batch."""
    import torch

    from mining.methods.cnn_gem import _build_backbone

    torch.set_num_threads(1)
    net = _build_backbone(None, "cpu")
    x = torch.randn(batch, 3, 576, 768, generator=torch.Generator().manual_seed(0))
    x = x.contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        net(x[:1])
        one: list = []
        t_one = _timed(lambda: one.extend(net(x[i:i + 1])[0] for i in range(batch)))
        out: list = []
        t_batch = _timed(lambda: out.append(net(x)))
    return {"batch": batch, "one_by_one_ms_per_image": round(1000 * t_one / batch, 1),
            "batched_ms_per_image": round(1000 * t_batch / batch, 1),
            "same_bits": all(torch.equal(one[i], out[0][i]) for i in range(batch))}


def demo_folder(world: Path, root: Path, limit: int | None = None) -> Path:
    """The world's candidate JPEGs as a completed download (R1M layout + status), via symlinks."""
    ids = sorted(int(p.stem) for p in (world / "images").glob("*.jpg"))[:limit]
    for pid in ids:
        dst = root / layout.image_relpath(pid)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            dst.symlink_to((world / "images" / f"{pid}.jpg").resolve())
    imageindex.write(root, [{"photo_id": pid, "status": "ok", "path": layout.image_relpath(pid)} for pid in ids])
    return root


def demo_eval(world: Path, methods: list[str], work: Path, workers: int, limit: int | None = None) -> dict[str, object]:
    from scipy.stats import spearmanr

    from mining.retrieval.descriptors import iter_similarities, open_store
    from mining.retrieval.metrics import compute_map
    from mining.stages.evaluate.protocols.setups import setup_gnd
    from mining.datasets.landmarks import load_landmarks

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
        ci = describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=[name],
                          out=d / "candidates", options=DESCRIBE, cluster=Cluster(workers=workers),
                          progress=False)[name]
        describe.run(inputs=describe.Inputs(images=world / "landmarks", image_set="queries", models=d / "candidates"),
                     methods=[name], out=d / "queries", options=DESCRIBE, cluster=Cluster(workers=workers),
                     progress=False)
        describe.run(inputs=describe.Inputs(images=world / "landmarks", image_set="database", models=d / "candidates"),
                     methods=[name], out=d / "database", options=DESCRIBE, cluster=Cluster(workers=workers),
                     progress=False)
        q, db = open_store(d / "queries", get_method), open_store(d / "database", get_method)
        assert q.ids() == list(ds.qimlist) and db.ids() == list(ds.imlist)
        sim = np.concatenate([s for _, s in iter_similarities(q, db)], axis=1)
        ranks = np.argsort(-sim, axis=1, kind="stable").T
        res = {s: round(float(compute_map(ranks, setup_gnd(ds.gnd, s))[0]), 4) for s in ("easy", "medium", "hard")}
        cand_ids, csims = [], []
        for ids, s in iter_similarities(q, open_store(d / "candidates", get_method)):
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
    ap.add_argument("--repeat", type=int, default=3, help="bare and stage runs per method, interleaved; the least counts")
    ap.add_argument("--cpus", type=int, default=1, help="CPUs to run on (affinity; default 1: per-core figures)")
    ap.add_argument("--demo", type=Path, help="evaluate on this demo world instead (mAP, rank correlation)")
    ap.add_argument("--workers", type=int, default=0, help="--demo: Dask workers (0 = in-process)")
    ap.add_argument("--candidates", type=int, help="--demo: use only the first N candidates (CPU budget)")
    ap.add_argument("--agreement", type=Path, metavar="WORLD",
                    help="cnn-gem: least cosine, ONNX Runtime vs torch, per decoded image size of this demo world")
    ap.add_argument("--per-size", type=int, default=3, help="--agreement: images compared per size")
    args = ap.parse_args()
    if args.agreement:
        print(json.dumps(backend_agreement(args.agreement, args.per_size), indent=2))
        return
    if args.demo:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(demo_eval(args.demo, args.methods.split(","), Path(tmp), args.workers, args.candidates), indent=2))
        return
    cpus = sorted(os.sched_getaffinity(0))[: max(1, args.cpus)]
    os.sched_setaffinity(0, set(cpus))  # before any pool starts: every thread count follows it
    names = args.methods.split(",")
    out: dict[str, object] = {"input_px": "1024x768 JPEG q90", "cpus": len(cpus), "repeat": args.repeat,
                              "load_average_start": os.getloadavg(),
                              "note": "stage in-process (workers 0); bare = method.describe on decoded images; "
                                      "times (*_s, *_ms, images_per_s) in CPU seconds of this process"}
    cv2.setNumThreads(1)  # bare runs under the stage's numeric settings (mining.stages.describe.stage)
    with tempfile.TemporaryDirectory() as tmp, single_threaded_numerics():
        pin_numeric_threads()
        root = Path(tmp)
        make_folder(root / "images", args.images)
        for name in names:
            if name == "cnn-gem":  # the default (ONNX Runtime) and torch, interleaved
                out[name] = bench_backends(root / "images", root, args.shard_size, args.repeat)
            else:
                out[name] = bench(name, root / "images", root, args.shard_size, args.repeat)
        local = [n for n in ("rsift-asmk", "rsift-vlad") if n in names]
        if len(local) == 2:
            out["shared_rootsift"] = bench_shared(local, root / "images", root, args.shard_size,
                                                  args.repeat)
        out["decode"] = bench_decode(root / "images")
    if "cnn-gem" in names:
        out["cnn_gem_batch"] = bench_cnn_batch()
    out["load_average_end"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
