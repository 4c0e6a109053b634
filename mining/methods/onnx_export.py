"""A torch model exported to what `onnx-global` reads, checked, with its settings beside it
(`python -m mining.methods.export`, docs/onnx-models.md).

- the model: `module:callable` or `path/to/file.py:callable`, a callable that returns the
  `nn.Module` (weights loaded, or random); its forward takes the normalised (1, 3, H, W)
  image and returns a tensor, a tuple of them or a mapping (transformers' outputs): the
  graph's outputs are the tensors (`fields`: those named, in that order; default every
  tensor), named by their field (`output0`, ... for a tuple, `output` for a tensor).
- the size: `square` exports at `size` x `size`, fixed; `patch_multiple` with height and
  width symbolic multiples of `patch`; `long_side` with height and width symbolic. A
  convolution whose padding depends on the input's size (TF "same": timm's `Conv2dSame`,
  efficientnet_pytorch's `Conv2dDynamicSamePadding`, or a class named in `same_padding`)
  is exported as a plain convolution padded symmetrically (for an odd kernel, the output
  size "same" gives) and its ONNX node set to `auto_pad = SAME_UPPER`: ONNX
  Runtime pads it from the actual input at run time (the odd pixel at the end, as pad_same
  does), as `mining/methods/efficientnet_lite_onnx.py` does for cnn-gem's backbone; `torch.export` never
  sees the size arithmetic it hangs on.
- the check (`onnx_parity.py`): ONNX Runtime against torch at sizes of every parity pattern;
  refused above `tolerance`, the file then not written.
- the files: `OUT.onnx` (its `mean`, `std` and settings also in its metadata_props) and
  `OUT.onnx.json` (`onnx_settings.py`), both written only once the check passed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import logging
import os
import warnings
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Iterator

from mining.errors import UserError
from mining.files import atomic
from mining.methods import onnx_parity, onnx_settings
from mining.methods.efficientnet_lite_onnx import anonymous, set_same_upper
from mining.methods.onnx_global import OnnxGlobal

OPSET = 18
SAME_PADDING = ("Conv2dSame", "Conv2dSameExport", "Conv2dDynamicSamePadding")
MAX_SIDE = 4096  # the largest height or width the graph is declared for


@dataclass(frozen=True)
class Request:
    """What to export and how: `settings` are onnx-global's (input, size, patch, mean, std,
    channels, output, output_name, prefix_tokens, p)."""

    factory: str
    out: Path
    settings: dict[str, Any]
    fields: tuple[str, ...] = ()
    trace: tuple[int, int] | None = None
    sizes: tuple[tuple[int, int], ...] = ()
    stride: int = 32
    tolerance: float = onnx_parity.TOLERANCE
    same_padding: tuple[str, ...] = field(default=SAME_PADDING)


def load_factory(spec: str) -> Any:
    """The model made by `module:callable` (or `file.py:callable`), in eval mode."""
    import torch

    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise UserError(f"model {spec!r}: give it as module:callable or path/to/file.py:callable")
    try:
        if where.endswith(".py"):
            found = importlib.util.spec_from_file_location(Path(where).stem, where)
            if found is None or not Path(where).is_file():
                raise UserError(f"model {spec!r}: {where}: file not found")
            module = importlib.util.module_from_spec(found)
            found.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            module = importlib.import_module(where)
        model = getattr(module, name)()
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code: one line, what it raised
        raise UserError(f"model {spec!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}") from None
    if not isinstance(model, torch.nn.Module):
        raise UserError(f"model {spec!r}: {name}() returned a {type(model).__name__}, not a torch nn.Module")
    return model.eval()


def output_fields(out: Any, wanted: tuple[str, ...]) -> list[str]:
    """The names of the model's outputs to export: `wanted`, or every tensor it returns."""
    import torch

    if isinstance(out, torch.Tensor):
        have = {"output": out}
    elif isinstance(out, dict) or hasattr(out, "keys"):
        have = {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}
    elif isinstance(out, (tuple, list)):
        have = {f"output{i}": v for i, v in enumerate(out) if isinstance(v, torch.Tensor)}
    else:
        raise UserError(f"the model returns a {type(out).__name__}; export needs a tensor, a tuple or a mapping of them")
    missing = [f for f in wanted if f not in have]
    if missing or not have:
        raise UserError(f"the model's output has no {', '.join(missing) or 'tensor'} (it has {', '.join(have) or 'none'})")
    return list(wanted or have)


def _wrapped(model: Any, fields: list[str]) -> Any:
    """A module whose forward returns the chosen outputs as a tuple of tensors."""
    import torch

    class Outputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            out = self.model(x)
            if isinstance(out, torch.Tensor):
                return (out,)
            if isinstance(out, (tuple, list)):
                return tuple(out[int(f.removeprefix("output"))] for f in fields)
            return tuple(out[f] for f in fields)

    return Outputs().eval()


def same_convs(model: Any, classes: tuple[str, ...]) -> list[str]:
    """The qualified names of the model's convolutions whose padding depends on the input size."""
    import torch

    return [name for name, m in model.named_modules()
            if type(m).__name__ in classes and isinstance(m, torch.nn.Conv2d)]


@contextlib.contextmanager
def plain_convs(model: Any, names: list[str]) -> Iterator[None]:
    """The convolutions `names` replaced for the block by plain ones with the same parameters,
    padded `dilation * (kernel - 1) // 2` on each side: for an odd kernel the output has the
    size "same" gives (ceil(size / stride)) at any size, so every later shape is traced right
    (unpadded, a deep stack shrinks below its kernel at small sizes and torch.export refuses);
    only where the padding goes differs, which SAME_UPPER then sets. Put back after the block."""
    import torch

    saved = []
    for name in names:
        parent_name, _, leaf = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        conv = getattr(parent, leaf)
        pad = tuple(d * (k - 1) // 2 for k, d in zip(conv.kernel_size, conv.dilation))
        plain = torch.nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, pad, conv.dilation,
                                conv.groups, conv.bias is not None)
        plain.weight, plain.bias = conv.weight, conv.bias
        saved.append((parent, leaf, conv))
        setattr(parent, leaf, plain)
    try:
        yield
    finally:
        for parent, leaf, conv in saved:
            setattr(parent, leaf, conv)


def trace_size(req: Request) -> tuple[int, int]:
    """The size the graph is traced at: `size` for square, else `trace` or a landscape size."""
    s = req.settings
    if s["input"] == "square":
        return int(s["size"]), int(s["size"])
    if req.trace is not None:
        return req.trace
    unit = int(s["patch"]) if s["input"] == "patch_multiple" else 1
    return (unit * 16, unit * 20) if unit > 1 else (7 * req.stride + 5, 9 * req.stride + 3)


def _dynamic(settings: dict[str, Any]) -> dict[str, Any] | None:
    import torch

    if settings["input"] == "square":
        return None
    patch = int(settings["patch"]) if settings["input"] == "patch_multiple" else 1
    h = torch.export.Dim("height", min=1 if patch > 1 else 8, max=MAX_SIDE // patch)
    w = torch.export.Dim("width", min=1 if patch > 1 else 8, max=MAX_SIDE // patch)
    return {"x": {2: patch * h, 3: patch * w}} if patch > 1 else {"x": {2: h, 3: w}}


def to_onnx(net: Any, names: list[str], hw: tuple[int, int], settings: dict[str, Any]) -> Any:
    """The ONNX ModelProto of `net` (torch.onnx's dynamo exporter, its chatter silenced)."""
    import torch

    quiet = [logging.getLogger(n) for n in ("torch.onnx", "onnxscript", "onnx_ir")]  # the exporter's chatter
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            warnings.simplefilter("ignore")
            prog = torch.onnx.export(net, (torch.zeros(1, 3, *hw),), dynamo=True, opset_version=OPSET,
                                     input_names=["image"], output_names=names, dynamic_shapes=_dynamic(settings),
                                     optimize=True, verbose=False)
    except Exception as exc:  # noqa: BLE001 - torch's exporter: one line, what it raised
        raise UserError(f"torch.onnx.export failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}") from None
    finally:
        for q, level in zip(quiet, levels):
            q.setLevel(level)
    return prog.model_proto


def finish_graph(model: Any, same_weights: list[str], settings: dict[str, Any]) -> None:
    """In place: no record of where it was made, the same-padding convolutions at SAME_UPPER,
    symbolic sizes named plainly, the normalisation and settings in metadata_props."""
    del model.graph.value_info[:]  # the traced size's intermediate shapes
    anonymous(model)
    by_weight = {n.input[1]: n for n in model.graph.node if n.op_type == "Conv" and len(n.input) > 1}
    lost = [w for w in same_weights if w not in by_weight]
    if lost:
        raise UserError(f"the exported graph has no convolution with weight {lost[0]!r} (a same-padding convolution "
                        "renamed or fused by the exporter): export with --input square")
    set_same_upper([by_weight[w] for w in same_weights])
    dims = model.graph.input[0].type.tensor_type.shape.dim
    if settings["input"] != "square":
        dims[2].dim_param, dims[3].dim_param = "height", "width"
    for out in model.graph.output:  # the exporter's expressions of the traced padding would be wrong
        for i, d in enumerate(out.type.tensor_type.shape.dim):
            if d.HasField("dim_param"):
                d.dim_param = f"{out.name}_{i}"
    meta = {"mean": json.dumps(list(settings["mean"])), "std": json.dumps(list(settings["std"])),
            "onnx_global": json.dumps({k: settings[k] for k in onnx_settings.KEYS if k in settings}, sort_keys=True)}
    for key, value in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value


def relevant(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that mean something for this input and output (no `size` for long_side, ...)."""
    skip = {"size"} if settings["input"] != "square" else set()
    skip |= {"patch"} if settings["input"] != "patch_multiple" else set()
    skip |= {"p"} if settings["output"] != "feature_map" else set()
    skip |= {"prefix_tokens"} if settings["output"] != "mean_tokens" else set()
    return {k: v for k, v in settings.items() if k not in skip}


def export(req: Request) -> dict[str, Any]:
    """Export, check and write `req.out` and its settings file; returns the report (what the
    settings file's `export` holds)."""
    import onnx
    import torch

    OnnxGlobal.check_params(req.settings)  # before any work, as the manifest's are checked
    model = load_factory(req.factory)
    hw = trace_size(req)
    with torch.inference_mode():
        fields = output_fields(model(torch.zeros(1, 3, *hw)), req.fields)
    settings = relevant(req.settings)
    net = _wrapped(model, fields)
    same = same_convs(net, req.same_padding)
    with plain_convs(net, same):
        proto = to_onnx(net, fields, hw, settings)
    settings["output_name"] = onnx_parity.chosen_output(proto, settings, fields)
    finish_graph(proto, [f"{n}.weight" for n in same], settings)
    sizes = list(req.sizes) or onnx_parity.check_sizes(settings, hw, req.stride)
    with atomic.atomic_path(req.out) as tmp:
        onnx.save(proto, str(tmp))
        figures = onnx_parity.check(net, tmp, fields, sizes, req.tolerance)
        report = {"factory": req.factory, "torch": version("torch"), "onnx_opset": OPSET, "trace_size": list(hw),
                  "same_padding_convs": [n.removeprefix("model.") for n in same], "outputs": fields, **figures}
        onnx_settings.write(req.out, settings, report)
    return report


def main_export(req: Request) -> str:
    """Export and say in one line what was written and how close it is to torch."""
    report = export(req)
    sizes = report["sizes"]
    return (f"{req.out}: {len(sizes)} size(s) checked ({', '.join(sizes[:4])}"
            f"{', ...' if len(sizes) > 4 else ''}), max |onnx - torch| {report['max_abs_diff']:.3g} <= "
            f"{report['tolerance']:g}; settings in {onnx_settings.settings_path(req.out)}"
            + (f"; {len(report['same_padding_convs'])} same-padding convolution(s) at SAME_UPPER"
               if report["same_padding_convs"] else ""))
