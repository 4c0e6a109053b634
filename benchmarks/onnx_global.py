"""Benchmark of `onnx-global`: CPU ms per image of user ONNX models, against cnn-gem in the same run.

Usage: nice python -m benchmarks.onnx_global [--images 24] [--repeat 3] [--out FILE.json]

Images: synthetic photos in the Flickr mix's shapes (`fixtures.flickr_sizes`) decoded as the
stage does (768 px long side). Per image, CPU seconds of this process (one thread, as the
describe stage runs), least of `--repeat`:
  cnn-gem            the built-in (ONNX Runtime), scales 1 and 1/sqrt(2): the reference;
  lite0_as_user_file its cached export given to onnx-global with Lite0's settings (same work);
  tiny_cnn, tiny_vit the test models (fixtures.onnx_models): the pipeline's own cost;
  vit_s14_224        a ViT-S/14-shaped network (12 blocks, 384 wide, 6 heads, MLP 1536, patch 14,
                     CLS token; random weights: the speed is the architecture's) exported from
                     torch at 224 x 224, `input: square`, `output: cls_token`.
Then ViT-S/14 at 518 and ViT-B/14 at 224 and 518 are SCALED from vit_s14_224 by their
multiply-accumulates (`vit_macs`), not run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path

from fixtures.flickr_sizes import describe_mix, photo, sizes
from fixtures.onnx_models import cnn_model, vit_model
from mining.methods import efficientnet_lite_onnx, get_method

LITE0_224_MACS = 0.385e9  # EfficientNet-Lite0's feature extractor at 224 x 224 (scales with pixels)


def vit_macs(width: int, side: int, patch: int = 14, depth: int = 12) -> float:
    """Multiply-accumulates of a ViT on a side x side image: per block 12 width^2 per token
    (qkv, projection, MLP 4x) and 2 tokens^2 width (attention)."""
    n = (side // patch) ** 2 + 1
    return depth * (12 * width * width * n + 2 * n * n * width)


def export_vit(path: Path, width: int = 384, heads: int = 6, side: int = 224, patch: int = 14) -> str:
    import torch
    from torch import nn

    class Vit(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Conv2d(3, width, patch, stride=patch)
            self.cls = nn.Parameter(torch.randn(1, 1, width))
            self.pos = nn.Parameter(torch.randn(1, (side // patch) ** 2 + 1, width) * 0.02)
            layer = nn.TransformerEncoderLayer(width, heads, 4 * width, batch_first=True, norm_first=True,
                                               activation="gelu", dropout=0.0)
            self.blocks = nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            t = self.embed(x).flatten(2).transpose(1, 2)
            return self.blocks(torch.cat([self.cls.expand(len(t), -1, -1), t], 1) + self.pos)

    torch.manual_seed(0)
    with torch.inference_mode():
        prog = torch.onnx.export(Vit().eval(), (torch.zeros(1, 3, side, side),), dynamo=True, opset_version=18,
                                 input_names=["image"], output_names=["tokens"], optimize=True, verbose=False)
    prog.save(str(path))
    return str(path)


def emit(out: dict, path: Path | None) -> None:
    """Print a benchmark's JSON, and write it to `path` (`--out`) when given."""
    text = json.dumps(out, indent=2)
    if path:
        path.write_text(text + "\n")
    print(text)


def per_image(method, images: list, repeat: int) -> float:  # noqa: ANN001
    method.describe(images[0])  # warm-up: session, allocator
    best = math.inf
    for _ in range(repeat):
        t0 = time.process_time()
        for img in images:
            method.describe(img)
        best = min(best, time.process_time() - t0)
    return best / len(images)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    imgs = []
    for i, (w, h) in enumerate(sizes(a.images)):
        s = 768 / max(w, h)
        imgs.append(photo(i, round(w * s), round(h * s)))
    out: dict[str, object] = {"images": a.images, "sizes": "the Flickr mix decoded at 768 px: " + describe_mix(),
                              "load_average_start": os.getloadavg(), "note": "CPU ms per image, one thread, least of "
                              "the repeats; scaled_* are not measured: vit_s14_224 times the ratio of MACs"}
    lite = str(efficientnet_lite_onnx.ensure_model())
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        methods = {
            "cnn-gem": get_method("cnn-gem", {"whiten": False}),
            "lite0_as_user_file": get_method("onnx-global", {"model": lite, "mean": [0.5] * 3, "std": [0.5] * 3,
                                                             "scales": [1.0, 1 / math.sqrt(2)], "whiten": False}),
            "tiny_cnn": get_method("onnx-global", {"model": cnn_model(t / "cnn.onnx"), "whiten": False}),
            "tiny_vit": get_method("onnx-global", {"model": vit_model(t / "vit.onnx"), "whiten": False,
                                                   "input": "patch_multiple", "patch": 4, "output": "cls_token"}),
            "vit_s14_224": get_method("onnx-global", {"model": export_vit(t / "vits14.onnx"), "whiten": False,
                                                      "input": "square", "size": 224, "output": "cls_token"}),
        }
        ms = {k: round(1000 * per_image(m, imgs, a.repeat), 1) for k, m in methods.items()}
    lite_macs = LITE0_224_MACS * sum(img.shape[0] * img.shape[1] * (1 + 0.5) for img in imgs) / len(imgs) / 224 ** 2
    base = vit_macs(384, 224)
    out["ms_per_image"] = ms
    out["ratio_lite0_user_file_to_cnn_gem"] = round(ms["lite0_as_user_file"] / ms["cnn-gem"], 3)
    out["gmacs_per_image"] = {"cnn-gem": round(lite_macs / 1e9, 2), "vit_s14_224": round(base / 1e9, 2),
                              "vit_s14_518": round(vit_macs(384, 518) / 1e9, 2),
                              "vit_b14_224": round(vit_macs(768, 224) / 1e9, 2),
                              "vit_b14_518": round(vit_macs(768, 518) / 1e9, 2)}
    out["scaled_ms_per_image"] = {k: round(ms["vit_s14_224"] * vit_macs(w, s) / base, 0)
                                  for k, w, s in (("vit_s14_518", 384, 518), ("vit_b14_224", 768, 224),
                                                  ("vit_b14_518", 768, 518))}
    out["load_average_end"] = os.getloadavg()
    emit(out, a.out)


if __name__ == "__main__":
    main()
