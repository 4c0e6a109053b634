"""Benchmark: does batching fixed-size inputs speed up `onnx-global` on the CPU, and are the bits the same?

Usage: nice python -m benchmarks.onnx_batch [--images 16] [--repeat 3] [--batches 1 2 4 8 16] [--out FILE.json]

`fixtures.export_models.dinov2_vits14` (transformers' Dinov2Model in ViT-S/14's shape: 12 blocks,
384 wide, 6 heads, MLP 1536, patch 14, CLS token; random weights: the speed is the
architecture's), its tokens exported from torch at 224 x 224 with a dynamic batch dimension
(the exporter's settings of `mining.methods.onnx_export`: dynamo, opset 18, optimised; torch's
own nn.TransformerEncoder, `benchmarks.onnx_global`'s ViT, fixes the batch when exported), run
in the session onnx-global describes with
(`mining.methods.onnx_run.session`: one intra-op thread, sequential). Inputs: `--images`
synthetic photos of the Flickr mix decoded at 768 px, normalised and resized to 224 x 224 as
onnx-global's `input: square` does. Per batch size B, all the images are run in batches of B
(the last batch short where B does not divide them); CPU seconds of this process per image,
the batch sizes alternated within each repeat, least of `--repeat`. `ratio_to_batch1`: each
batch size's time over batch 1's, in the same run. `max_abs_diff_to_batch1`: the largest
difference of an image's output tokens in a batch from the same image run alone (0.0 and
`bitwise_identical` true: the same bits).
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.onnx_global import emit
from fixtures.export_models import dinov2_vits14
from fixtures.flickr_sizes import photo, sizes
from mining.methods.onnx_export import OPSET, _wrapped
from mining.methods.onnx_run import resize, session, to_input

SIDE = 224
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def inputs(n: int) -> np.ndarray:
    """(n, 3, SIDE, SIDE): the Flickr mix's photos at 768 px, as onnx-global's square input feeds them."""
    out = []
    for i, (w, h) in enumerate(sizes(n)):
        s = 768 / max(w, h)
        out.append(resize(to_input(photo(i, round(w * s), round(h * s)), MEAN, STD), SIDE, SIDE))
    return np.concatenate(out)


def export_batched(path: Path, max_batch: int) -> str:
    """dinov2_vits14's tokens at SIDE x SIDE, the batch dynamic (1..max_batch; traced at 2, as
    torch.export specialises a traced batch of 1)."""
    import torch

    net = _wrapped(dinov2_vits14(), ["last_hidden_state"])
    with torch.inference_mode():
        prog = torch.onnx.export(net, (torch.zeros(2, 3, SIDE, SIDE),), dynamo=True, opset_version=OPSET,
                                 input_names=["image"], output_names=["tokens"], optimize=True, verbose=False,
                                 dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=max_batch)}})
    prog.save(str(path))
    return str(path)


def run_batched(sess, x: np.ndarray, b: int) -> np.ndarray:  # noqa: ANN001
    """The outputs of every image of `x`, run `b` at a time."""
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: np.ascontiguousarray(x[i:i + b])})[0] for i in range(0, len(x), b)])


def measure(sess, x: np.ndarray, batches: list[int], repeat: int) -> tuple[dict[int, float], dict[int, np.ndarray]]:  # noqa: ANN001
    """CPU seconds per image for each batch size (alternated, least of the repeats), and the outputs."""
    outs = {b: run_batched(sess, x, b) for b in batches}  # warm-up: the allocator's arenas for each shape
    best = {b: math.inf for b in batches}
    for r in range(repeat):
        for b in batches if r % 2 == 0 else batches[::-1]:
            t0 = time.process_time()
            run_batched(sess, x, b)
            best[b] = min(best[b], (time.process_time() - t0) / len(x))
    return best, outs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    x = inputs(a.images)
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        sess = session(export_batched(Path(tmp) / "vits14_batch.onnx", max(a.batches)), "cpu", "onnx_batch")
        best, outs = measure(sess, x, a.batches, a.repeat)
    one = outs[1] if 1 in outs else run_batched(sess, x, 1)
    ms = {str(b): round(1000 * t, 1) for b, t in best.items()}
    base = best.get(1)
    out = {
        "model": "ViT-S/14-shaped (fixtures.export_models.dinov2_vits14), random weights, 224 x 224, dynamic batch",
        "session": "mining.methods.onnx_run.session(device=cpu): intra_op_num_threads=1, sequential",
        "images": a.images, "repeat": a.repeat, "onnxruntime": __import__("onnxruntime").__version__,
        "load_average_start": load_start,
        "note": "CPU ms per image, one thread, batch sizes alternated within each repeat, least of the repeats",
        "ms_per_image": ms,
        "ratio_to_batch1": {str(b): round(t / base, 3) for b, t in best.items()} if base else None,
        "max_abs_diff_to_batch1": {str(b): float(np.abs(o - one).max()) for b, o in outs.items()},
        "bitwise_identical": {str(b): bool(np.array_equal(o, one)) for b, o in outs.items()},
        "load_average_end": os.getloadavg(),
    }
    emit(out, a.out)


if __name__ == "__main__":
    main()
