"""Benchmark of cnn-gem's describe as whole processes, on the Flickr 1024 px size mix.

Usage: nice python -m benchmarks.describe_mix [--images 200] [--repeat 2] [--dask-images 50] [--out FILE.json]

`--images` synthetic JPEGs (q90) in the mix's shapes and proportions (`fixtures.flickr_sizes`:
1024x768 30 %, 1024x683 20 %, 768x1024 12 %, ... every parity pattern in its tail), in a
download folder. Every figure is CPU seconds (user + system) of a whole `mining describe
--method cnn-gem --param whiten=false` process and its children, so it counts Python's start, the
imports, the model load, the JPEG decode and the store writes; the least of `--repeat`
interleaved runs counts (the machine is shared), and ratios are of runs in this one process:
  process  --workers 0 on all the images, backend onnx (default) and torch: CPU s and the
           ratio torch / onnx (target >= 2.5);
  fixed    the same on ONE image (1024x768), model cached: the per-process cost (target <= 2 CPU
           s); and `import mining.stages.describe.stage` alone for scale;
  cold     ONE image with an empty model cache (export + verification), once;
  dask     --workers 1 on `--dask-images` images as 1 task (shard = all) and as one task per
           image: CPU per image of each (a worker keeps the session across tasks).
Prints one JSON object (and writes it to --out).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2

from fixtures.flickr_sizes import describe_mix, photo, sizes
from mining.photos import imageindex
from mining.settings import layout

ROOT = Path(__file__).resolve().parents[1]


def make_folder(root: Path, shapes: list[tuple[int, int]]) -> Path:
    for pid, (w, h) in enumerate(shapes, start=1):
        p = root / layout.image_relpath(pid)
        p.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(p), photo(pid, w, h), [cv2.IMWRITE_JPEG_QUALITY, 90])
    imageindex.write(root, [{"photo_id": i, "status": "ok", "path": layout.image_relpath(i)}
                            for i in range(1, len(shapes) + 1)])
    return root


def cpu_of(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """CPU seconds (user + system) of a command and every process it waited for."""
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}) after {time.time() - t0:.0f} s:\n{err[-2000:]}")
    return usage.ru_utime + usage.ru_stime


def describe_cmd(images: Path, out: Path, backend: str, workers: int = 0, shard_size: int = 1000) -> list[str]:
    return [sys.executable, "-m", "mining", "describe", "--method", "cnn-gem", "--images", str(images),
            "--set", "candidates", "--out", str(out), "--param", "whiten=false", "--param", f"backend={backend}",
            "--workers", str(workers), "--shard-size", str(shard_size), "--no-progress"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dask-images", type=int, default=50)
    ap.add_argument("--skip", default="", help="comma-separated parts not to run: process,fixed,cold,dask")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))

    def save() -> None:  # after each part: a long run on a shared machine keeps what it measured
        if a.out:
            a.out.write_text(json.dumps(out, indent=2) + "\n")

    out: dict[str, object] = {"mix": describe_mix(), "load_average_start": os.getloadavg(),
                              "note": "CPU s (user + system) of whole processes and their children; least of "
                                      "the repeats; ratios from this run"}
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        cpu_of([sys.executable, "-c", "from mining.methods.efficientnet_lite_onnx import ensure_model; ensure_model()"])
        shapes = sizes(a.images)
        images = make_folder(t / "images", shapes)
        one = make_folder(t / "one", [(1024, 768)])
        if "process" not in skip:
            runs: dict[str, list[float]] = {"onnx": [], "torch": []}
            for r in range(a.repeat):
                for b in runs:
                    runs[b].append(cpu_of(describe_cmd(images, t / f"{b}{r}", b)))
            best = {b: min(v) for b, v in runs.items()}
            out["process"] = {"images": a.images, "sizes": "the mix", "cpu_s": runs,
                              "ms_per_image": {b: round(1000 * v / a.images, 1) for b, v in best.items()},
                              "torch_over_onnx": round(best["torch"] / best["onnx"], 3),
                              "per_repeat": [round(x / y, 3) for x, y in zip(runs["torch"], runs["onnx"])]}
            save()
        if "fixed" not in skip:
            fixed: dict[str, list[float]] = {"onnx": [], "torch": [], "import_stage": []}
            for r in range(max(3, a.repeat)):
                for b in ("onnx", "torch"):
                    fixed[b].append(cpu_of(describe_cmd(one, t / f"one-{b}{r}", b)))
                fixed["import_stage"].append(cpu_of([sys.executable, "-c", "import mining.stages.describe.stage"]))
            out["fixed"] = {"images": 1, "sizes": "1024x768", "cpu_s": {k: round(min(v), 3) for k, v in fixed.items()},
                            "all": fixed}
            save()
        if "cold" not in skip:
            cache = t / "cold-cache"
            out["cold"] = {"images": 1, "sizes": "1024x768", "cpu_s": round(cpu_of(
                describe_cmd(one, t / "one-cold", "onnx"), {"MINING_CACHE_DIR": str(cache)}), 3),
                "note": "empty model cache: the export (torch) and its verification at every parity pattern"}
            save()
        if "dask" not in skip:
            n = a.dask_images
            dimages = make_folder(t / "dask", sizes(n))
            dask: dict[str, list[float]] = {"one_task": [], "one_task_per_image": []}
            for r in range(a.repeat):
                dask["one_task"].append(cpu_of(describe_cmd(dimages, t / f"d1-{r}", "onnx", 1, n)))
                dask["one_task_per_image"].append(cpu_of(describe_cmd(dimages, t / f"dn-{r}", "onnx", 1, 1)))
            best = {k: min(v) for k, v in dask.items()}
            out["dask"] = {"images": n, "sizes": "the mix", "workers": 1, "cpu_s": dask,
                           "ms_per_image": {k: round(1000 * v / n, 1) for k, v in best.items()},
                           "extra_ms_per_task": round(1000 * (best["one_task_per_image"] - best["one_task"]) / (n - 1), 1)}
    out["load_average_end"] = os.getloadavg()
    save()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
