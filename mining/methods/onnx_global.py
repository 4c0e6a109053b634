"""`onnx-global`: any global model exported to ONNX (DINOv2, a timm CNN, a network fine-tuned
for landmarks), described by ONNX Runtime, with what the file does not say given as settings.

- `model`: the .onnx file (required); its checksum is recorded as `model_sha256` in every
  store, and a store made with another file is refused (on resume, and as a `--model`).
- the input: `input` = `long_side` (the decoded image, long side `max_side`, as is),
  `square` (resized to `size` x `size`) or `patch_multiple` (each side of the decoded image
  rounded to a multiple of `patch`, e.g. 14 for a ViT-/14); `mean`, `std` (on 0..1 values)
  and `channels` (RGB or BGR).
- the output (`output_name`, default the first): `descriptor` (1, D) taken as is,
  `feature_map` (1, C, h, w) GeM-pooled with `p`, `cls_token` (1, N, D) its first token,
  `mean_tokens` the mean of the tokens after the first `prefix_tokens` (CLS, registers).
- `scales`: vectors of the image scaled by each (torch's antialiased bilinear; for `square`
  and `patch_multiple` the target size is scaled) are L2-normalised, summed, re-normalised;
  then PCA-whitening as cnn-gem (`whiten`, `whiten_dim`, `whiten_shrink`).
- `device`: auto (default: the CUDA provider where onnxruntime-gpu is installed, else the
  CPU), cpu, cuda, cuda:N. On the CPU one thread per image, as every method.

A settings file beside the model (`MODEL.onnx.json`, `onnx_settings.py`; written by `python -m
mining.methods.export`) replaces the defaults of the settings it holds; the given settings win
over it, with a warning where they differ. Settings that are likely wrong (`cls_token` beside a
pooled output, mean/std other than the model's own metadata) are warned about, once.

A model whose input or output does not fit these settings (not one float input of rank 4
with 3 channels, a fixed size other than `square`'s, an output of another rank than
`output`'s) is refused when it is loaded, in one line. Several models run in one manifest as
`onnx-global-NAME` (letters, digits, `_`, `-`): each its own method with its own settings and
store.
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache
from typing import Any

import numpy as np

from mining.errors import UserError
from mining.retrieval.descriptors import GLOBAL
from mining.methods.base import Param, WhitenedGlobal
from mining.methods import onnx_settings
from mining.methods.efficientnet_lite import cached_sha256
from mining.methods.onnx_run import OUTPUT_RANK, OUTPUTS, multiscale, pool, providers, rescale, resize, session, to_input

INPUTS = ("long_side", "square", "patch_multiple")
_LOCK = threading.Lock()


class Runner:
    """A loaded model: its session, input and output names, checked against the settings."""

    def __init__(self, path: str, device: str, input_policy: str, size: int, output: str,
                 output_name: str | None, one_scale: bool) -> None:
        who = f"onnx-global {path}"
        try:
            self.session = session(path, device, who)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - any load failure is the user's file
            raise UserError(f"{who}: not a loadable ONNX model ({str(exc).splitlines()[0][:200]})") from None
        ins, outs = self.session.get_inputs(), self.session.get_outputs()
        if len(ins) != 1:
            raise UserError(f"{who}: the model has {len(ins)} inputs; onnx-global feeds one image tensor")
        inp = ins[0]
        shape = inp.shape if isinstance(inp.shape, list) else []
        channels = shape[1] if len(shape) == 4 else None  # an int when fixed (a name or None when not)
        if inp.type != "tensor(float)" or len(shape) != 4 or isinstance(channels, int) and channels != 3:
            raise UserError(f"{who}: input {inp.name!r} is {inp.type} {shape}; onnx-global feeds a float (1, 3, H, W) image")
        if isinstance(shape[0], int) and shape[0] != 1:
            raise UserError(f"{who}: input {inp.name!r} has a fixed batch of {shape[0]}; onnx-global feeds one image")
        fixed = [d for d in shape[2:] if isinstance(d, int)]
        if fixed:
            if input_policy != "square" or list(shape[2:]) != [size, size]:
                raise UserError(f"{who}: input {inp.name!r} has a fixed size {shape[2]}x{shape[3]}, which input="
                                f"{input_policy} size={size} does not give (use input=square with that size, or export "
                                "with dynamic height and width)")
            if not one_scale:
                raise UserError(f"{who}: input {inp.name!r} has a fixed size: scales must be [1.0]")
        names = [o.name for o in outs]
        if output_name is not None and output_name not in names:
            raise UserError(f"{who}: no output {output_name!r} (it has {', '.join(names)})")
        out = outs[names.index(output_name)] if output_name is not None else outs[0]
        rank = len(out.shape) if isinstance(out.shape, list) else None
        if rank is not None and rank != OUTPUT_RANK[output]:
            raise UserError(f"{who}: output {out.name!r} has rank {rank} {out.shape}; output={output} needs rank "
                            f"{OUTPUT_RANK[output]}")
        self.input, self.output, self.rank, self.who = inp.name, out.name, OUTPUT_RANK[output], who
        # what the settings checks read: the other (1, D) outputs, the file's own metadata
        self.pooled = [o.name for o in outs if o.name != out.name and isinstance(o.shape, list) and len(o.shape) == 2]
        self.meta = dict(self.session.get_modelmeta().custom_metadata_map)

    def run(self, x: np.ndarray) -> np.ndarray:
        out = self.session.run([self.output], {self.input: x})[0]
        if out.ndim != self.rank or out.shape[0] != 1:
            raise UserError(f"{self.who}: output {self.output!r} is {out.shape} for input {x.shape}; the output "
                            f"setting needs rank {self.rank} with a batch of 1")
        return out


@lru_cache(maxsize=8)
def _runner(path: str, sha: str, device: str, *settings: Any) -> Runner:
    return Runner(path, device, *settings)


class OnnxGlobal(WhitenedGlobal):
    name = "onnx-global"
    kind = GLOBAL
    mode = "RGB"
    required = ("model",)
    files = ("model",)
    defaults = {
        "model": None,
        "model_sha256": None,
        "input": "long_side",
        "max_side": 768,
        "size": 224,
        "patch": 14,
        "mean": [0.485, 0.456, 0.406],
        "std": [0.229, 0.224, 0.225],
        "channels": "RGB",
        "output": "feature_map",
        "output_name": None,
        "p": 3.0,
        "prefix_tokens": 1,
        "scales": [1.0],
        "whiten": True,
        "whiten_dim": 512,
        "whiten_shrink": 0.1,
        "device": "auto",
    }
    domains = {
        "model": Param("str", none=True),
        "model_sha256": Param("str", none=True),
        "input": Param("choice", choices=INPUTS),
        "max_side": Param("int", 32, 16384),
        "size": Param("int", 1, 16384),
        "patch": Param("int", 1, 1024),
        "mean": Param("floats", -10, 10),
        "std": Param("floats", 0, 10, open_low=True),
        "channels": Param("choice", choices=("RGB", "BGR")),
        "output": Param("choice", choices=OUTPUTS),
        "output_name": Param("str", none=True),
        "p": Param("float", 0, 100, open_low=True),
        "prefix_tokens": Param("int", 0, 1024),
        "scales": Param("floats", 0, 2, open_low=True),
        "whiten": Param("bool"),
        "whiten_dim": Param("int", 1),
        "whiten_shrink": Param("float", 0),
        "device": Param("device"),
    }

    def __init__(self, params: dict[str, Any] | None = None, query: bool = False) -> None:
        given = {k: v for k, v in (params or {}).items() if v is not None}
        self.check_params(given)
        self.filed: dict[str, Any] = {}  # what the model's settings file says (onnx_settings)
        if isinstance(given.get("model"), str) and os.path.isfile(given["model"]):  # its settings file, under the given
            self.filed = onnx_settings.read(given["model"], self.check_params)
            given = onnx_settings.merged(f"onnx-global {given['model']}", given["model"], given, self.filed)
        super().__init__(given, query)
        for key in ("mean", "std"):
            if len(self.params[key]) != 3:
                raise UserError(f"method onnx-global: {key} must have 3 values (one per channel), not {self.params[key]}")
        path = self.params["model"]
        if path is not None:
            if not os.path.isfile(path):
                raise UserError(f"method onnx-global: model {path}: file not found (a store or kit names its model "
                                f"by file name and checksum, {self.params['model_sha256'] or 'none'}: give the file's "
                                "path, --param onnx-global:model=PATH or the manifest's describe: params)")
            sha = cached_sha256(path)
            if self.params["model_sha256"] not in (None, sha):
                raise UserError(f"method onnx-global: model {path} has checksum {sha}, but the store was made with "
                                f"{self.params['model_sha256']} (another file); describe with that file, or into a "
                                "new store")
            self.params["model_sha256"] = sha
            net = self.runner()  # refused now, in one line, when the model does not fit the settings
            onnx_settings.likely_wrong(net.who, self.params, net.pooled, net.meta, self.filed)

    @classmethod
    def check_here(cls, params: dict[str, Any] | None) -> None:
        device = str((params or {}).get("device") or cls.defaults["device"])
        if device.startswith("cuda"):
            providers(device, "method onnx-global")

    def runner(self) -> Runner:
        """The loaded model (once per process, model file and settings: Dask workers keep it)."""
        p = self.params
        if p["model"] is None:
            raise UserError("method onnx-global: no model given (the setting `model`: an .onnx file)")
        with _LOCK:
            return _runner(p["model"], p["model_sha256"], str(p["device"]), p["input"], int(p["size"]), p["output"],
                           p["output_name"], [float(s) for s in p["scales"]] == [1.0])

    def _scaled(self, x: np.ndarray, s: float) -> np.ndarray:
        policy = self.params["input"]
        if policy == "long_side":
            return rescale(x, s)
        if policy == "square":
            n = max(1, round(int(self.params["size"]) * s))
            return resize(x, n, n)
        patch = int(self.params["patch"])
        h, w = (max(patch, int(d * s / patch + 0.5) * patch) for d in x.shape[2:])  # the nearest multiple
        return x if (h, w) == x.shape[2:] else resize(x, h, w)

    def raw(self, image: np.ndarray) -> np.ndarray:
        """The multi-scale vector of one RGB image, before whitening (L2-normalised)."""
        net, p = self.runner(), self.params
        x = to_input(image, p["mean"], p["std"], bgr=p["channels"] == "BGR")
        return multiscale(x, p["scales"], lambda x, s: pool(net.run(self._scaled(x, s)), p["output"], float(p["p"]),
                                                              int(p["prefix_tokens"])))
