"""What the pinned SIMD level costs: CPU per image of each shipped method's extraction, pinned
(`mining/pins.py`: x86-64-v3, OpenCV without Intel IPP) against the libraries' own choice on this
CPU (`MINING_SIMD=native`), on the Flickr 1024 px size mix (`fixtures.flickr_sizes`).

N synthetic photos in the mix's shapes and proportions are written as q90 JPEGs; then each
setting runs in a process of its own (the pins are process-wide: they are set before a library
loads), describing every image with cnn-gem (ONNX Runtime, no whitening: the decode, the network,
GeM at two scales) and with RootSIFT (the decode and SIFT that rsift-asmk and rsift-vlad share),
on one thread. The figure is the least CPU time of --repeat passes inside each process, runs of
the two settings interleaved (the machine is shared). `ratio` is pinned / native per method (the
cost of one set on every CPU); `cpu` says which CPU measured it.

    nice python -m benchmarks.pins [--images 40] [--repeat 3] [--out FILE.json]
Prints one JSON object.
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

from fixtures.flickr_sizes import describe_mix, photo, sizes

ROOT = Path(__file__).resolve().parents[1]

# One process: describe every image with each method, `repeat` times, and print the least CPU
# seconds per image of each.
_CHILD = r"""
import json, sys, time
import mining, cv2
from mining import pins
from mining.methods.base import get_method
from mining.photos.imagedecode import load_image
cv2.setNumThreads(1)
paths, repeat = json.loads(sys.argv[1]), int(sys.argv[2])
methods = {"cnn-gem": get_method("cnn-gem", {"whiten": False}), "rootsift": get_method("rsift-asmk", {})}
out = {}
for name, m in methods.items():
    run = (lambda img, m=m: m.describe_extracted(m.extract(img))) if name == "cnn-gem" else m.extract
    run(load_image(paths[0], m.max_side, m.mode))  # the model's load and first call, not measured
    best = None
    for _ in range(repeat):
        t = time.process_time()
        for p in paths:
            run(load_image(p, m.max_side, m.mode))
        spent = (time.process_time() - t) / len(paths)
        best = spent if best is None else min(best, spent)
    out[name] = best
print(json.dumps({"per_image": out, "simd": pins.provenance()["simd"], "problems": pins.problems()}))
"""


def measure(paths: list[str], repeat: int, native: bool) -> dict:
    from mining import pins

    # this process imported mining (pinned): the native run gets the environment without the pins
    env = {k: v for k, v in os.environ.items() if not (native and k in pins.VARIABLES)}
    env["MINING_SIMD"] = "native" if native else ""
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(paths), str(repeat)], cwd=ROOT, env=env,
                       capture_output=True, text=True, check=False)
    if r.returncode:
        raise SystemExit(f"the {'native' if native else 'pinned'} run failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="pinned/native process pairs, interleaved")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import cv2

    from mining import pins

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for pid, (w, h) in enumerate(sizes(args.images), start=1):
            p = Path(tmp) / f"{pid}.jpg"
            cv2.imwrite(str(p), photo(pid, w, h), [cv2.IMWRITE_JPEG_QUALITY, 90])
            paths.append(str(p))
        t0 = time.time()
        runs: dict[str, list[dict]] = {"pinned": [], "native": []}
        for _ in range(args.rounds):
            runs["pinned"].append(measure(paths, args.repeat, native=False))
            runs["native"].append(measure(paths, args.repeat, native=True))
    best = {k: {m: min(r["per_image"][m] for r in v) for m in v[0]["per_image"]} for k, v in runs.items()}
    result = {
        "benchmark": "pins",
        "images": args.images, "mix": describe_mix(), "repeat": args.repeat, "rounds": args.rounds,
        "cpu": pins.cpu_model(), "cpu_avx512": "avx512f" in pins.cpu_flags(),
        "pinned_level": pins.LEVEL,
        "cpu_s_per_image": {k: {m: round(s, 4) for m, s in v.items()} for k, v in best.items()},
        "ratio_pinned_over_native": {m: round(best["pinned"][m] / best["native"][m], 3) for m in best["pinned"]},
        "pinned_problems": runs["pinned"][0]["problems"],
        "wall_s": round(time.time() - t0, 1),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
