"""An exported model checked against torch before it is written (`onnx_export.py`): ONNX
Runtime and torch on the same random inputs at sizes of every parity pattern, every output
compared; and which output onnx-global takes.

The sizes (`check_sizes`): `square` its one size; `patch_multiple` multiples of the patch with
odd and even counts of patches each way, landscape and portrait, and the traced size;
`long_side` `stride` consecutive heights with widths in another order (each side meets every
residue mod `stride`, so every parity at each of its stride-2 levels: a same-padding
convolution pads another amount for each), the traced size and its transpose, and a small
odd size.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from mining.errors import UserError
from mining.methods.onnx_run import OUTPUT_RANK, session

TOLERANCE = 1e-3  # max |onnx - torch| over every output: float32 reordering is ~1e-6 of the values


def chosen_output(model: Any, settings: dict[str, Any], fields: list[str]) -> str:
    """The output onnx-global takes: `output_name`, else the first output of the rank that
    `output` needs; UserError (one line) when there is none."""
    rank = OUTPUT_RANK[settings["output"]]
    ranks = {o.name: len(o.type.tensor_type.shape.dim) for o in model.graph.output}
    name = settings.get("output_name")
    if name is not None:
        if name not in ranks:
            raise UserError(f"--output-name {name}: the model has no such output (it has {', '.join(fields)})")
        if ranks[name] != rank:
            raise UserError(f"--output-name {name} has rank {ranks[name]}; --output {settings['output']} needs {rank}")
        return str(name)
    fit = [n for n in fields if ranks.get(n) == rank]
    if not fit:
        raise UserError(f"--output {settings['output']} needs an output of rank {rank}; the model's are "
                        + ", ".join(f"{n} (rank {r})" for n, r in ranks.items()))
    return fit[0]


def check_sizes(settings: dict[str, Any], hw: tuple[int, int], stride: int) -> list[tuple[int, int]]:
    """The (height, width) sizes the export is checked at (the module's docstring)."""
    if settings["input"] == "square":
        return [hw]
    if settings["input"] == "patch_multiple":
        p = int(settings["patch"])
        return [hw] + [(p * a, p * b) for a, b in ((4, 4), (5, 7), (7, 5), (6, 9), (9, 6), (3, 3), (8, 11))]
    step = 5 if stride % 5 else 7  # coprime with stride: the widths meet every residue too
    base = 2 * stride
    sizes = [(base + i, base + (i * step) % stride) for i in range(stride)]
    return [hw, hw[::-1], *sizes, (2 * stride + 1, 3 * stride - 1)]


def _reason(exc: Exception) -> str:
    """ONNX Runtime's message without its source location (`...Status Message: file.h:583 void f() x was
    false. Attempting to ...` -> `Attempting to ...`)."""
    text = " ".join(str(exc).split()).partition("Status Message: ")[2] or " ".join(str(exc).split())
    return text.rpartition(" was false. ")[2][:200]


def check(net: Any, path: Path, fields: list[str], sizes: list[tuple[int, int]], tolerance: float) -> dict[str, Any]:
    """Run ONNX Runtime and torch at every size; the figures (per output, the largest |diff|),
    or UserError (one line) at the first size where a shape differs, ONNX Runtime fails or the
    difference exceeds `tolerance`."""
    import torch

    runner = session(str(path), "cpu", "export", log_level=4)
    rng = np.random.default_rng(0)
    worst = dict.fromkeys(fields, 0.0)
    for h, w in sizes:
        x = rng.uniform(-1, 1, (1, 3, h, w)).astype(np.float32)
        with torch.inference_mode():
            ref = [t.numpy() for t in net(torch.from_numpy(x))]
        try:
            got = runner.run(fields, {"image": x})
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime's error: one line
            raise UserError(f"ONNX Runtime fails at {h}x{w} ({_reason(exc)}): the graph is "
                            "not dynamic in the input's size (export with --input square --size N)") from None
        for name, a, b in zip(fields, got, ref):
            diff = float(np.abs(a - b).max()) if a.shape == b.shape else math.inf
            worst[name] = max(worst[name], diff)
            if not diff <= tolerance:
                raise UserError(f"the ONNX export differs from torch at {h}x{w}: output {name!r} {a.shape} vs "
                                f"{b.shape}, max |diff| {diff:.3g} > {tolerance:g}" + (
                                    "" if len(sizes) == 1 else " (a size-dependent step was traced at one size? "
                                    "export with --input square --size N)"))
    return {"sizes": [f"{h}x{w}" for h, w in sizes], "tolerance": tolerance, "max_abs_diff": max(worst.values()),
            "max_abs_diff_per_output": worst}
