"""cnn-gem's built-in backbone run by ONNX Runtime (`backend: onnx`, the default).

The model file is never downloaded: at first use the torch module (`build_lite`, the
shipped weights) is exported at 576x768, its height and width made symbolic, its stride-2
convolutions set to `auto_pad = SAME_UPPER`, checked against torch at sizes of every parity
(`VERIFY_SIZES`), and only then moved into the cache under its final name. TF "same" padding
depends on the input's size: ONNX's SAME_UPPER is that padding (the odd pixel at the end),
computed by ONNX Runtime from the actual input, so one session serves every image size (every
other convolution pads k - 1 whatever the size, as exported). ONNX Runtime still fuses each
Conv with its Clip; measured as fast as a graph with the padding baked for one size.

The cache folder is `$MINING_CACHE_DIR`, else `$XDG_CACHE_HOME/distractor-mining`, else
`~/.cache/distractor-mining`; the file's name carries the weights' checksum, torch's
version and `EXPORT_VERSION`, so a new torch or new weights export anew (~25 CPU s, the
verification included; the only step that imports torch). Processes exporting at once take
turns (a lock file); the others then find it cached. A SLURM run's jobs share the cache of
the environment they start in (set MINING_CACHE_DIR to a shared folder).

Describing imports neither torch nor onnx: ONNX Runtime reads the file itself, once per
process (`backbone`: Dask workers keep it across tasks).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import threading
import warnings
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from mining.files import atomic
from mining.errors import UserError
from mining.methods.efficientnet_lite import build_lite, cached_sha256, lite_weights_path
from mining.methods.onnx_run import session

EXPORT_VERSION = 4  # bump when the export (graph, padding, opset) changes: a new cache file
OPSET = 18
TRACE_SIZE = (576, 768)
STRIDE2_KERNELS = (3, 3, 5, 3, 5)  # EfficientNet-Lite0's stride-2 convolutions, in graph order
# (height, width): a side's residue mod 32 fixes its parity at each of the 5 stride-2 levels,
# so 32 consecutive heights and widths cover every parity pattern of each side, landscape and
# portrait; then the Flickr mix at 768 px at scales 1 and 1/sqrt(2), and tiny inputs.
PARITY_SIZES = [(96 + i, 160 + i) for i in range(32)] + [(160 + i, 96 + i) for i in range(32)]
VERIFY_SIZES = PARITY_SIZES + [(576, 768), (768, 576), (512, 768), (768, 512), (543, 768), (407, 543),
                               (362, 724), (1, 1), (33, 47)]
TOLERANCE = 1e-3  # max |onnx - torch| on the feature map (ReLU6 outputs, 0..6); measured ~4e-5


def cache_dir() -> Path:
    env = os.environ.get("MINING_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "distractor-mining"


def onnx_file_name(variant: str = "lite0") -> str:
    # torch's version from its installed metadata (the same string as torch.__version__):
    # importing torch here cost every Snakefile parse ~2.5 s of CPU (get_method("cnn-gem")
    # runs while the rules are read, in each dry run and each SLURM job)

    weights = cached_sha256(str(lite_weights_path(variant)))
    return f"efficientnet-{variant}-{weights}-torch{version('torch').split('+')[0]}-v{EXPORT_VERSION}.onnx"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_LOCK = threading.Lock()


def ensure_model(variant: str = "lite0") -> Path:
    """The cached ONNX file of a built-in backbone (EfficientNet-Lite0 or -Lite2), exported and
    verified on first use."""
    folder = cache_dir()
    path = folder / onnx_file_name(variant)
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
                    export(Path(tmp), variant)
                    verify(Path(tmp), variant)
    return path


def export(path: Path, variant: str = "lite0") -> None:
    """Write the backbone as ONNX to `path`: traced at TRACE_SIZE, height and width symbolic."""
    import onnx
    import torch

    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            warnings.simplefilter("ignore")
            prog = torch.onnx.export(build_lite(variant), (torch.zeros(1, 3, *TRACE_SIZE),), dynamo=True,
                                     opset_version=OPSET, input_names=["x"], output_names=["features"],
                                     optimize=True, verbose=False)
            model = prog.model_proto
    finally:
        quiet.setLevel(level)
    del model.graph.value_info[:]  # the traced size's intermediate shapes
    anonymous(model)
    same_upper(model)
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


def _stride2(model: Any) -> list[Any]:
    return [n for n in model.graph.node if n.op_type == "Conv"
            and [list(a.ints) for a in n.attribute if a.name == "strides"] == [[2, 2]]]


def same_upper(model: Any) -> None:
    """Set the stride-2 convolutions' padding to SAME_UPPER (TF "same", computed from the
    input's size at run time) in place of the traced size's `pads`."""
    inits = {i.name: i for i in model.graph.initializer}
    convs = _stride2(model)
    kernels = tuple(int(inits[n.input[1]].dims[2]) for n in convs)
    if kernels != STRIDE2_KERNELS:
        raise UserError(f"cnn-gem: the ONNX export has stride-2 kernels {kernels}, not EfficientNet-Lite0's "
                        f"{STRIDE2_KERNELS} (another torch version?); use backend=torch")
    set_same_upper(convs)


def set_same_upper(convs: list[Any]) -> None:
    """In place: these Conv nodes pad `auto_pad = SAME_UPPER` (TF "same", from the input's size
    at run time) in place of their `pads`."""
    import onnx

    for node in convs:
        keep = [a for a in node.attribute if a.name not in ("pads", "auto_pad")]
        del node.attribute[:]
        node.attribute.extend(keep + [onnx.helper.make_attribute("auto_pad", "SAME_UPPER")])


def verify(path: Path, variant: str = "lite0") -> None:
    """UserError (one line) unless the ONNX model matches the torch module at every
    `VERIFY_SIZES` size: same feature-map shape, max |difference| <= TOLERANCE."""
    import torch

    net = build_lite(variant)
    runner = Backbone(path, "cpu")
    rng = np.random.default_rng(0)
    for hw in VERIFY_SIZES:
        x = rng.uniform(-1, 1, (1, 3, *hw)).astype(np.float32)
        with torch.inference_mode():
            ref = net(torch.from_numpy(x)).numpy()
        got = runner.session.run(None, {"x": x})[0]
        diff = float(np.abs(got - ref).max()) if got.shape == ref.shape else math.inf
        if not diff <= TOLERANCE:
            raise UserError(f"cnn-gem: the ONNX export differs from the torch backbone at {hw[0]}x{hw[1]} "
                            f"(shape {got.shape} vs {ref.shape}, max |diff| {diff:.3g} > {TOLERANCE}); use backend=torch")


class Backbone:
    """The backbone on one device: one ONNX Runtime session for every input size."""

    def __init__(self, path: Path, device: str) -> None:
        self.session = session(str(path), device, "cnn-gem")

    def features(self, x: np.ndarray) -> np.ndarray:
        """The (1, 1280, ceil(H/32), ceil(W/32)) feature map of a normalised (1, 3, H, W)
        image; RuntimeError when the shape is not TF padding's."""
        out = self.session.run(None, {"x": np.ascontiguousarray(x, np.float32)})[0]
        want = (1, 1280, math.ceil(x.shape[2] / 32), math.ceil(x.shape[3] / 32))
        if out.shape != want:
            raise RuntimeError(f"cnn-gem ONNX backbone: feature map {out.shape} for input {x.shape}, expected {want}")
        return out


@lru_cache(maxsize=4)
def _backbone(path: str, device: str) -> Backbone:
    return Backbone(Path(path), device)


def backbone(device: str, variant: str = "lite0") -> Backbone:
    """One runner per process, device and network (Dask workers describe many shards with it)."""
    path = str(ensure_model(variant))
    with _LOCK:
        return _backbone(path, device)
