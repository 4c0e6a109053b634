"""Check of `onnx-global` with `device: cuda` against `device: cpu`, for a machine with a GPU.

Usage (from the repository root, on the GPU machine; no network needed):
    python -m benchmarks.cuda_check [--images 6] [--tolerance 5e-3] [--out FILE.json]
    python -m benchmarks.cuda_check --device cpu    # self-check: CPU against CPU, runs anywhere

Not run on the project's machines (no GPU there): the CPU self-check is what
`tests/unit/benchmarks/test_cuda_check.py` runs, so the script does not rot. It needs numpy, onnxruntime's
GPU build (`onnxruntime-gpu`: `onnxruntime.get_available_providers()` must list
CUDAExecutionProvider; where it does not, it says so and exits 2) and the project (onnx, opencv).

Two models built with the project's test builders (`fixtures.onnx_models`, no torch): a small CNN
(a 3x3 stride-2 convolution, a feature map GeM-pooled) and a ViT-like one (4x4 patches, a CLS
token, `input: patch_multiple`, `output: cls_token`). Each is described by onnx-global itself
(`mining.methods.get_method`, whiten off) with `device: --device` (cuda) and with `device: cpu`
on `--images` generated photos of several sizes (landscape, portrait, odd sides). Printed as JSON:
the providers available, the providers each session actually uses (`session.get_providers()`),
max |descriptor on the device - descriptor on the CPU| per model (keys `device`, `cpu`) (unit vectors, float32, before
the store's float16), images per second each way (one warm-up image first), and `ok` with its
reason. Exit status 1 when the device's session does not use CUDA (for a cuda device) or a
difference is above `--tolerance` (5e-3 by default: room for TF32 and other kernels on the GPU;
the store's float16 rounds at ~1e-4 to 5e-4).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

SIZES = ((320, 240), (240, 320), (333, 241), (97, 131), (512, 384), (200, 200), (641, 427), (57, 301))
CUDA = "CUDAExecutionProvider"


def photos(n: int) -> list[np.ndarray]:
    """`n` generated RGB photos of the sizes above, in turn."""
    from fixtures.flickr_sizes import photo

    return [photo(i, *SIZES[i % len(SIZES)]) for i in range(n)]


def models(folder: Path) -> dict[str, dict[str, Any]]:
    """The two test models, written to `folder`, with their onnx-global settings."""
    from fixtures.onnx_models import cnn_model, vit_model

    return {"cnn": {"model": cnn_model(folder / "cnn.onnx")},
            "vit": {"model": vit_model(folder / "vit.onnx"), "input": "patch_multiple", "patch": 4,
                    "output": "cls_token"}}


def described(settings: dict[str, Any], device: str, images: list[np.ndarray]) -> tuple[np.ndarray, float, list[str]]:
    """onnx-global's descriptors of `images` on `device`, images per second, the session's providers."""
    from mining.methods import get_method

    method = get_method("onnx-global", {**settings, "whiten": False, "device": device})
    method.describe(images[0])  # warm-up: the session, the device's memory
    t0 = time.perf_counter()
    out = np.stack([method.describe(img) for img in images])
    return out, len(images) / (time.perf_counter() - t0), list(method.runner().session.get_providers())


def check(device: str, n: int, tolerance: float) -> dict[str, Any]:
    """The report (see the module's docstring)."""
    import onnxruntime as ort

    have = ort.get_available_providers()
    report: dict[str, Any] = {"device": device, "onnxruntime": ort.__version__, "providers_available": have,
                              "tolerance": tolerance, "images": n, "sizes": [f"{w}x{h}" for w, h in SIZES[:n]]}
    if device.startswith("cuda") and CUDA not in have:
        return {**report, "ok": False, "reason": f"{CUDA} is not available: this onnxruntime is the CPU build; "
                "install onnxruntime-gpu (pip uninstall onnxruntime; pip install onnxruntime-gpu)"}
    images = photos(n)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, settings in models(Path(tmp)).items():
            on_device, dev_rate, dev_providers = described(settings, device, images)
            on_cpu, cpu_rate, cpu_providers = described(settings, "cpu", images)
            diff = float(np.abs(on_device - on_cpu).max())
            report[name] = {"providers_used": {"device": dev_providers, "cpu": cpu_providers}, "max_abs_diff": diff,
                            "images_per_s": {"device": round(dev_rate, 1), "cpu": round(cpu_rate, 1)}}
            if device.startswith("cuda") and dev_providers[:1] != [CUDA]:
                failures.append(f"{name}: the {device} session uses {dev_providers}, not {CUDA} first")
            if not diff <= tolerance:
                failures.append(f"{name}: max |{device} - cpu| {diff:.3g} > {tolerance:g}")
    return {**report, "ok": not failures,
            "reason": "; ".join(failures) or f"{device} used and within {tolerance:g} of the CPU on every model"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (the self-check: CPU against CPU)")
    ap.add_argument("--images", type=int, default=6, choices=range(1, len(SIZES) + 1), metavar=f"1..{len(SIZES)}")
    ap.add_argument("--tolerance", type=float, default=5e-3)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    from benchmarks.onnx_global import emit

    report = check(a.device, a.images, a.tolerance)
    emit(report, a.out)
    if report["ok"]:
        return 0
    return 2 if a.device.startswith("cuda") and CUDA not in report["providers_available"] else 1


if __name__ == "__main__":
    sys.exit(main())
