"""cnn-gem's built-in backbone run by ONNX Runtime (`backend: onnx`, the default).

The model file is never downloaded: at first use it is exported from the shipped weights
(`build_lite0(generic_padding=True)`, torch's exporter, one symbolic height and width so
that one file serves every image size), checked against the torch module at sizes of every
parity (`VERIFY_SIZES`: TF "same" padding depends on it), and only then moved into the cache
under its final name. The cache folder is `$MINING_CACHE_DIR`, else
`$XDG_CACHE_HOME/distractor-mining`, else `~/.cache/distractor-mining`; the file's name
carries the weights' checksum, torch's version and `EXPORT_VERSION`, so a new torch or new
weights export anew. Processes exporting at once take turns (a lock file), the others then
find it cached.

Sessions run one thread (intra- and inter-op) in sequential execution, as torch does in the
describe stage: the bits of a description do not depend on the worker's CPU count.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from mining import atomic
from mining.errors import UserError

EXPORT_VERSION = 1  # bump when the export (graph, padding, opset) changes: a new cache file
OPSET = 18
# (height, width): even and odd at every stride-2 level, both orientations, the demo's and
# R1M's 768 px long side at scales 1 and 1/sqrt(2), and small inputs.
VERIFY_SIZES = [(576, 768), (768, 576), (577, 769), (543, 768), (407, 543), (333, 250), (97, 131), (33, 47)]
TOLERANCE = 1e-3  # max |onnx - torch| on the feature map (ReLU6 outputs, 0..6); measured ~4e-5


def cache_dir() -> Path:
    env = os.environ.get("MINING_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "distractor-mining"


def onnx_file_name() -> str:
    import torch

    from mining.methods.cnn_gem import file_sha256, lite0_weights_path

    weights = file_sha256(str(lite0_weights_path()))
    return f"efficientnet-lite0-{weights}-torch{torch.__version__.split('+')[0]}-v{EXPORT_VERSION}.onnx"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_LOCK = threading.Lock()


def ensure_model() -> Path:
    """The cached ONNX file of the built-in backbone, exported and verified on first use."""
    folder = cache_dir()
    path = folder / onnx_file_name()
    if path.is_file():
        return path
    with _LOCK:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cnn-gem: cannot create the model cache {folder} ({exc.strerror}; set MINING_CACHE_DIR)") from None
        with _locked(folder / (path.name + ".lock")):
            if not path.is_file():
                with atomic.atomic_path(path) as tmp:
                    export(Path(tmp))
                    verify(Path(tmp))
    return path


def export(path: Path) -> None:
    """Write the backbone as ONNX to `path` (dynamic height and width)."""
    import logging
    import warnings

    import torch

    from mining.methods.cnn_gem import build_lite0

    net = build_lite0(generic_padding=True)
    h, w = torch.export.Dim("height", min=32, max=16384), torch.export.Dim("width", min=32, max=16384)
    x = torch.zeros(1, 3, 576, 768)
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            warnings.simplefilter("ignore")
            prog = torch.onnx.export(net, (x,), dynamo=True, dynamic_shapes={"x": {2: h, 3: w}}, opset_version=OPSET,
                                     input_names=["x"], output_names=["features"], optimize=True, verbose=False)
            prog.save(str(path), external_data=False)
    finally:
        quiet.setLevel(level)


def verify(path: Path) -> None:
    """UserError (one line) unless the ONNX model matches the torch module at every
    `VERIFY_SIZES` size: same feature-map shape, max |difference| <= TOLERANCE."""
    import torch

    from mining.methods.cnn_gem import build_lite0

    net = build_lite0()
    sess = _new_session(str(path), "cpu")
    rng = np.random.default_rng(0)
    for hw in VERIFY_SIZES:
        x = rng.uniform(-1, 1, (1, 3, *hw)).astype(np.float32)
        with torch.inference_mode():
            ref = net(torch.from_numpy(x)).numpy()
        got = sess.run(None, {"x": x})[0]
        diff = float(np.abs(got - ref).max()) if got.shape == ref.shape else math.inf
        if not diff <= TOLERANCE:
            raise UserError(f"cnn-gem: the ONNX export differs from the torch backbone at {hw[0]}x{hw[1]} "
                            f"(shape {got.shape} vs {ref.shape}, max |diff| {diff:.3g} > {TOLERANCE}); use backend=torch")


def _providers(device: str) -> list[Any]:
    import onnxruntime as ort

    if not device.startswith("cuda"):
        return ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise UserError(f"cnn-gem: device={device} with backend=onnx needs onnxruntime-gpu (CUDAExecutionProvider "
                        "is not available here); install it, or use backend=torch")
    return [("CUDAExecutionProvider", {"device_id": int(device.partition(":")[2] or 0)})]


def _new_session(path: str, device: str) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=_providers(device))


@lru_cache(maxsize=4)
def _session(path: str, device: str) -> Any:
    return _new_session(path, device)


def session(device: str) -> Any:
    """One ONNX Runtime session per process and device (Dask workers describe many shards)."""
    path = str(ensure_model())
    with _LOCK:
        return _session(path, device)


def features(sess: Any, x: np.ndarray) -> np.ndarray:
    """The (1, 1280, ceil(H/32), ceil(W/32)) feature map of a normalised (1, 3, H, W) image;
    RuntimeError when the shape is not TF padding's (a wrong model file must not pass)."""
    out = sess.run(None, {"x": np.ascontiguousarray(x, np.float32)})[0]
    want = (1, 1280, math.ceil(x.shape[2] / 32), math.ceil(x.shape[3] / 32))
    if out.shape != want:
        raise RuntimeError(f"cnn-gem ONNX backbone: feature map {out.shape} for input {x.shape}, expected {want}")
    return out
