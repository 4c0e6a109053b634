"""Does the demo world behave like landmark photos? Easy vs Hard mAP for two global descriptors.

Builds (or reuses) a demo world, describes its queries (bbox crops) and database with
(a) a simple colour + gradient histogram and (b) the project's EfficientNet-Lite0 GeM
(`mining.methods`, raw GeM without whitening), and prints JSON with mAP for the revisited
Easy / Medium / Hard setups and a random ranking as reference. Real landmark benchmarks
show Easy ≫ Hard for every method; so must the demo world.

    python benchmarks/demo_realism.py [--world DIR | --preset tiny --seed 0] [--no-cnn]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np


from mining.stages.demo.realism import evaluate_setups, histogram_descriptor
from mining.datasets.landmarks import load_landmarks


def _cnn():
    from mining.methods.cnn_gem import CnnGem

    m = CnnGem({"whiten": False, "max_side": 512})

    def describe(img_rgb: np.ndarray) -> np.ndarray:
        import cv2

        s = 512 / max(img_rgb.shape[:2])
        if s < 1:
            img_rgb = cv2.resize(img_rgb, (round(img_rgb.shape[1] * s), round(img_rgb.shape[0] * s)), interpolation=cv2.INTER_AREA)
        return m.raw(img_rgb)

    return describe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--world")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-cnn", action="store_true")
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.world:
        root = Path(a.world)
    else:
        from mining.settings.options import defaults
        from mining.stages.demo.stage import run_build

        root = Path(tempfile.mkdtemp(prefix="demo_realism_"))
        run_build(out=root, options=replace(defaults("demo"), preset=a.preset, seed=a.seed))
    build_s = time.perf_counter() - t0
    ds = load_landmarks(root / "landmarks" / "gnd_demo.pkl")
    methods = {"colour_gradient_histogram": histogram_descriptor}
    if not a.no_cnn:
        methods["cnn_gem_lite0"] = _cnn()
    out: dict = {"world": str(root), "queries": len(ds.qimlist), "database": len(ds.imlist),
                 "build_s": round(build_s, 1), "methods": {}}
    for name, fn in methods.items():
        t = time.perf_counter()
        out["methods"][name] = evaluate_setups(ds, fn)
        out["methods"][name]["describe_s"] = round(time.perf_counter() - t, 1)
    rng = np.random.default_rng(0)
    out["random"] = evaluate_setups(ds, None, rng=rng)
    print(json.dumps(out, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
