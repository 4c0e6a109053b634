"""What the ONNX Runtime methods share (cnn-gem's `backend: onnx` and `onnx-global`): the
session, the image → input tensor, the resize and the pooling, in numpy, without torch.

- `session`: one thread (intra- and inter-op), sequential execution, every graph optimisation
  (the describe stage describes several images at once instead; the bits of a description do
  not depend on the worker's CPU count); on the CUDA provider when the device asks for it.
- `to_input`: uint8 HxWx3 RGB → (1, 3, H, W) float32, `(x / 255 - mean) / std` in float32, in
  the order torch does it (the same bits).
- `resize`: torch's `interpolate(mode="bilinear", align_corners=False, antialias=True)` (the
  triangle filter widened by the scale when shrinking, PIL's algorithm), written out: cv2's
  and ONNX's Resize differ from it (measured: ONNX Runtime's antialiased Resize is 0.06 away on
  inputs in [-1, 1]); within ~1e-6 of torch's.
- `gem` / `pool`: GeM of a feature map, a token's or the tokens' mean, a descriptor as is.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Callable, Sequence

import numpy as np

from mining.errors import UserError
from mining.retrieval.descriptors import l2_normalize

OUTPUTS = ("descriptor", "feature_map", "cls_token", "mean_tokens")
OUTPUT_RANK = {"descriptor": 2, "feature_map": 4, "cls_token": 3, "mean_tokens": 3}


def providers(device: str, who: str) -> list[Any]:
    """ONNX Runtime's providers for `device`: cpu → CPU; cuda[:N] → CUDA (UserError, one line,
    when onnxruntime has no CUDA provider); auto → CUDA where onnxruntime has it, else CPU."""
    import onnxruntime as ort

    cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    if device == "auto":
        return ["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda else ["CPUExecutionProvider"]
    if not device.startswith("cuda"):
        return ["CPUExecutionProvider"]
    if not cuda:
        raise UserError(f"{who}: device={device} needs onnxruntime-gpu (CUDAExecutionProvider is not available "
                        "here); install it, or use device=cpu")
    return [("CUDAExecutionProvider", {"device_id": int(device.partition(":")[2] or 0)})]


def session(model: str | bytes, device: str, who: str, log_level: int = 3) -> Any:
    """An ONNX Runtime session of a model file (or its bytes) for describing (`log_level` 4:
    not even its errors, for a caller that reports them itself)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = log_level
    return ort.InferenceSession(model, so, providers=providers(device, who))


def to_input(image: np.ndarray, mean: Sequence[float], std: Sequence[float], bgr: bool = False) -> np.ndarray:
    """A decoded uint8 HxWx3 RGB image as a normalised (1, 3, H, W) float32 tensor (channels
    reversed first when the model reads BGR)."""
    x = np.asarray(image)
    if bgr:
        x = x[:, :, ::-1]
    lut = _levels(tuple(float(m) for m in mean), tuple(float(s) for s in std))
    out = np.empty((1, 3, *x.shape[:2]), np.float32)
    for c in range(3):  # a table of the 256 levels: the same float32 operations, done once per level
        np.take(lut[c], x[:, :, c], out=out[0, c])
    return out


@lru_cache(maxsize=16)
def _levels(mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """(3, 256) float32: `(v / 255 - mean) / std` of each level v, as torch computes it."""
    v = np.arange(256, dtype=np.float32) / np.float32(255.0)
    return (v[None, :] - np.asarray(mean, np.float32)[:, None]) / np.asarray(std, np.float32)[:, None]


@lru_cache(maxsize=256)
def _taps(n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights), each (n_out, taps): the antialiased bilinear filter of one axis,
    `scale` input pixels per output pixel; in float32 as torch computes it (in float64 the
    weights differ by ~1e-4 of a pixel's value)."""
    f = np.float32
    scale = f(scale)
    support = scale if scale >= 1.0 else f(1.0)
    inv = f(1.0) / scale if scale >= 1.0 else f(1.0)
    center = scale * (np.arange(n_out, dtype=f) + f(0.5))
    lo = np.maximum(np.trunc(center - support + f(0.5)).astype(np.int64), 0)
    hi = np.minimum(np.trunc(center + support + f(0.5)).astype(np.int64), n_in)
    j = lo[:, None] + np.arange(max(1, int((hi - lo).max())))
    w = np.clip(f(1.0) - np.abs((j.astype(f) - center[:, None] + f(0.5)) * inv), f(0.0), None).astype(f)
    w[j >= hi[:, None]] = 0.0
    total = w.sum(1, keepdims=True, dtype=f)
    w = np.where(total > 0, w / np.where(total > 0, total, f(1.0)), f(0.0)).astype(f)
    return np.minimum(j, n_in - 1), w


def _axis(x: np.ndarray, axis: int, n_out: int, scale: float) -> np.ndarray:
    """`x` filtered along `axis` (2: rows, 3: columns); columns are filtered as the rows of
    the transposed image (gathering whole rows is several times faster than single values)."""
    if axis == 3:
        return _axis(np.ascontiguousarray(x.transpose(0, 1, 3, 2)), 2, n_out, scale).transpose(0, 1, 3, 2)
    idx, w = _taps(x.shape[2], n_out, scale)
    out = x[:, :, idx[:, 0], :] * w[:, 0, None]
    for k in range(1, idx.shape[1]):
        out += x[:, :, idx[:, k], :] * w[:, k, None]
    return out


def resize(x: np.ndarray, height: int, width: int, factor: tuple[float, float] | None = None) -> np.ndarray:
    """(1, C, H, W) → (1, C, height, width), antialiased bilinear as torch's `interpolate`;
    `factor` (fy, fx): the scale factor torch was given (its coordinates use it, not the
    ratio of the sizes)."""
    h, w = x.shape[2:]
    fy, fx = factor if factor is not None else (height / h, width / w)
    if width != w or fx != 1.0:
        x = _axis(x, 3, width, 1.0 / fx)
    if height != h or fy != 1.0:
        x = _axis(x, 2, height, 1.0 / fy)
    return np.ascontiguousarray(x, np.float32)


def rescale(x: np.ndarray, s: float) -> np.ndarray:
    """`x` scaled by `s` as torch's `interpolate(scale_factor=s)` does: floor(side x s) pixels;
    `s` = 1 is `x` itself."""
    if abs(s - 1.0) < 1e-6:
        return x
    h, w = x.shape[2:]
    return resize(x, max(1, math.floor(h * s)), max(1, math.floor(w * s)), (s, s))


def gem(f: np.ndarray, p: float) -> np.ndarray:
    """GeM of a (1, C, h, w) feature map: (mean of max(f, 1e-6)^p)^(1/p), (C,) float32. Where f^p
    leaves float32 (a large p overflows or underflows it), the same with each channel divided by
    its largest value first: m * (mean of (f/m)^p)^(1/p), which stays in range."""
    f = np.maximum(f[0], np.float32(1e-6))
    with np.errstate(over="ignore", under="ignore"):
        fp = f * f * f if p == 3.0 else np.power(f, np.float32(p))
        out = np.power(fp.reshape(len(fp), -1).mean(1, dtype=np.float32), np.float32(1.0 / p)).astype(np.float32)
    if np.isfinite(out).all() and np.all(out > 0):
        return out
    m = f.reshape(len(f), -1).max(1)
    with np.errstate(under="ignore"):
        scaled = np.power(f / m[:, None, None], np.float32(p)).reshape(len(f), -1).mean(1, dtype=np.float32)
    return (m * np.power(scaled, np.float32(1.0 / p))).astype(np.float32)


def pool(out: np.ndarray, kind: str, p: float = 3.0, prefix: int = 1) -> np.ndarray:
    """One image's vector from a model's output: `descriptor` (1, D) as is, `feature_map`
    (1, C, h, w) GeM-pooled, `cls_token` (1, N, D) the first token, `mean_tokens` the mean of
    the tokens after the first `prefix` (CLS and register tokens)."""
    if kind == "feature_map":
        return gem(out, p)
    if kind == "cls_token":
        return np.asarray(out[0, 0], np.float32)
    if kind == "mean_tokens":
        if prefix >= out.shape[1]:
            raise UserError(f"prefix_tokens={prefix}, but the model outputs {out.shape[1]} token(s): no patch token "
                            "is left to average (prefix_tokens counts the CLS and register tokens: 1 for a plain "
                            "ViT, 5 for DINOv2 with registers)")
        return out[0, prefix:].mean(0, dtype=np.float32)
    return np.asarray(out, np.float32).reshape(-1)


def multiscale(x: np.ndarray, scales: Sequence[float], run: Callable[[np.ndarray, float], np.ndarray]) -> np.ndarray:
    """The sum of the L2-normalised vectors `run(x, s)` over the scales, L2-normalised."""
    acc = None
    for s in scales:
        v = l2_normalize(run(x, float(s)).astype(np.float32))
        acc = v if acc is None else acc + v
    return l2_normalize(acc).astype(np.float32)
