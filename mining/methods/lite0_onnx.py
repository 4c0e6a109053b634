"""cnn-gem's built-in backbone run by ONNX Runtime (`backend: onnx`, the default).

The model file is never downloaded: at first use the torch module (`build_lite0`, the
shipped weights) is exported at 576x768, its height and width made symbolic, checked
against torch at sizes of every parity (`VERIFY_SIZES`), and only then moved into the cache
under its final name. TF "same" padding depends on the input's size, and an export bakes
the traced size's into the stride-2 convolutions' `pads` (every other convolution pads
k - 1 whatever the size); so each input size runs a copy of the model with those 5 `pads`
recomputed for it (`specialize`; the graph must be Conv/Clip/Add only, else refused): one
ONNX Runtime session per padding pattern, created in ~40 ms and kept in a small LRU. (A
graph with the padding as shape arithmetic exports too, but ran 1.4-1.7x slower: its Pad
and Slice ops copy the expanded tensors and keep ONNX Runtime from fusing them.)

The cache folder is `$MINING_CACHE_DIR`, else `$XDG_CACHE_HOME/distractor-mining`, else
`~/.cache/distractor-mining`; the file's name carries the weights' checksum, torch's
version and `EXPORT_VERSION`, so a new torch or new weights export anew (~40 s). Processes
exporting at once take turns (a lock file); the others then find it cached.

Sessions run one thread (intra- and inter-op) in sequential execution, as torch does in the
describe stage: the bits of a description do not depend on the worker's CPU count.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import threading
import warnings
from collections import OrderedDict
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from mining import atomic
from mining.errors import UserError
from mining.methods.lite0 import build_lite0, file_sha256, lite0_weights_path

EXPORT_VERSION = 3  # bump when the export (graph, padding, opset) changes: a new cache file
OPSET = 18
TRACE_SIZE = (576, 768)
SESSIONS = 4  # padding patterns kept per process (each ~35 MB + its activations' arena)
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
    # torch's version from its installed metadata (the same string as torch.__version__):
    # importing torch here cost every Snakefile parse ~2.5 s of CPU (get_method("cnn-gem")
    # runs while the rules are read, in each dry run and each SLURM job)

    weights = file_sha256(str(lite0_weights_path()))
    return f"efficientnet-lite0-{weights}-torch{version('torch').split('+')[0]}-v{EXPORT_VERSION}.onnx"


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
    """Write the backbone as ONNX to `path`: traced at TRACE_SIZE, height and width symbolic."""
    import onnx
    import torch

    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            warnings.simplefilter("ignore")
            prog = torch.onnx.export(build_lite0(), (torch.zeros(1, 3, *TRACE_SIZE),), dynamo=True,
                                     opset_version=OPSET, input_names=["x"], output_names=["features"],
                                     optimize=True, verbose=False)
            model = prog.model_proto
    finally:
        quiet.setLevel(level)
    del model.graph.value_info[:]  # the traced size's intermediate shapes
    anonymous(model)
    for vi in (model.graph.input[0], model.graph.output[0]):
        dims = vi.type.tensor_type.shape.dim
        dims[2].dim_param, dims[3].dim_param = "height", "width"
    ops = {n.op_type for n in model.graph.node}
    if not ops <= {"Conv", "Clip", "Add"}:
        raise UserError(f"cnn-gem: the ONNX export has ops {sorted(ops - {'Conv', 'Clip', 'Add'})} besides "
                        "Conv/Clip/Add (another torch version?); use backend=torch")
    onnx.save(model, str(path))


def anonymous(model: Any) -> None:
    """Drop what the exporter records about where the graph came from (each node's Python stack
    trace with absolute file paths, module names, the FX graph): the file's bytes, and the
    `onnx_sha256` a descriptor store records, then depend on the weights, torch and
    EXPORT_VERSION only, not on where the package is installed."""
    for holder in (model, model.graph, *model.graph.node):
        del holder.metadata_props[:]
        holder.doc_string = ""


def _same_pad(n: int, k: int) -> tuple[int, int]:
    """TF "same" padding (before, after) of a stride-2 convolution over `n` pixels."""
    p = max((math.ceil(n / 2) - 1) * 2 + k - n, 0)
    return p // 2, p - p // 2


def pattern(height: int, width: int, kernels: tuple[int, ...]) -> tuple[int, ...]:
    """The `pads` (top, left, bottom, right) of each stride-2 convolution, in graph order."""
    out: list[int] = []
    for k in kernels:
        (t, b), (l, r) = _same_pad(height, k), _same_pad(width, k)
        out += [t, l, b, r]
        height, width = math.ceil(height / 2), math.ceil(width / 2)
    return tuple(out)


def _stride2(model: Any) -> list[Any]:
    return [n for n in model.graph.node if n.op_type == "Conv"
            and [list(a.ints) for a in n.attribute if a.name == "strides"] == [[2, 2]]]


class Template:
    """The cached model and what specialising it to a size needs."""

    def __init__(self, path: Path) -> None:
        import onnx

        self.model = onnx.load(str(path))
        inits = {i.name: i for i in self.model.graph.initializer}
        self.kernels = tuple(int(inits[n.input[1]].dims[2]) for n in _stride2(self.model))
        if self.kernels != (3, 3, 5, 3, 5):
            raise UserError(f"cnn-gem: {path.name}: stride-2 kernels {self.kernels}, not EfficientNet-Lite0's "
                            "(3, 3, 5, 3, 5); delete the file to export it again")

    def specialize(self, pads: tuple[int, ...]) -> bytes:
        """The model with the stride-2 convolutions' `pads` set to `pads` (see `pattern`)."""
        import onnx

        m = onnx.ModelProto()
        m.CopyFrom(self.model)
        for i, node in enumerate(_stride2(m)):
            attr = next((a for a in node.attribute if a.name == "pads"), None)
            if attr is None:
                attr = onnx.helper.make_attribute("pads", [0, 0, 0, 0])
                node.attribute.append(attr)
            attr.ints[:] = pads[4 * i: 4 * i + 4]
        return m.SerializeToString()


def verify(path: Path) -> None:
    """UserError (one line) unless the ONNX model matches the torch module at every
    `VERIFY_SIZES` size: same feature-map shape, max |difference| <= TOLERANCE."""
    import torch

    net = build_lite0()
    runner = Backbone(path, "cpu")
    rng = np.random.default_rng(0)
    for hw in VERIFY_SIZES:
        x = rng.uniform(-1, 1, (1, 3, *hw)).astype(np.float32)
        with torch.inference_mode():
            ref = net(torch.from_numpy(x)).numpy()
        got = runner.features(x)
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


def _new_session(model: bytes, device: str) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=_providers(device))


class Backbone:
    """The backbone on one device: a session per padding pattern (LRU of SESSIONS)."""

    def __init__(self, path: Path, device: str) -> None:
        self.template = Template(path)
        self.device = device
        self.sessions: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.lock = threading.Lock()  # several threads describe at once in a worker

    def session(self, height: int, width: int) -> Any:
        key = pattern(height, width, self.template.kernels)
        with self.lock:
            sess = self.sessions.pop(key, None)
            if sess is None:
                sess = _new_session(self.template.specialize(key), self.device)
            self.sessions[key] = sess
            while len(self.sessions) > SESSIONS:
                self.sessions.popitem(last=False)
            return sess

    def features(self, x: np.ndarray) -> np.ndarray:
        """The (1, 1280, ceil(H/32), ceil(W/32)) feature map of a normalised (1, 3, H, W)
        image; RuntimeError when the shape is not TF padding's."""
        out = self.session(x.shape[2], x.shape[3]).run(None, {"x": np.ascontiguousarray(x, np.float32)})[0]
        want = (1, 1280, math.ceil(x.shape[2] / 32), math.ceil(x.shape[3] / 32))
        if out.shape != want:
            raise RuntimeError(f"cnn-gem ONNX backbone: feature map {out.shape} for input {x.shape}, expected {want}")
        return out


@lru_cache(maxsize=4)
def _backbone(path: str, device: str) -> Backbone:
    return Backbone(Path(path), device)


def backbone(device: str) -> Backbone:
    """One runner per process and device (Dask workers describe many shards with it)."""
    path = str(ensure_model())
    with _LOCK:
        return _backbone(path, device)
