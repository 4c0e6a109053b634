"""The retrieval-method plug-in interface and its registry.

A method turns a decoded image into a payload (`describe`), may learn something from a
sample of candidate images first (`fit_features` + `fit`, state kept as named numpy arrays
so it is stored without pickle), and scores query payloads against one database shard
(`similarity`). Global methods return one L2-normalised vector per image and get the
store's float16 `.npy` shards and a GEMM for free; other kinds write their own shard files
and bring their own kernel, which `mining.retrieval.descriptors` calls through `load_payload` /
`concat_payloads` / `similarity`.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import re
import threading
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, Iterator, Sequence

import numpy as np

from mining.retrieval import spatial
from mining.retrieval.descriptors import GLOBAL, l2_normalize
from mining.errors import UserError
from mining.files.yamlfile import number_as_text


# name -> "module:Class"; imported lazily so `mining --help` never loads torch or OpenCV.
REGISTRY: dict[str, str] = {
    "cnn-gem": "mining.methods.cnn_gem:CnnGem",
    "rsift-asmk": "mining.methods.rsift_asmk:RSiftAsmk",
    "rsift-vlad": "mining.methods.rsift_vlad:RSiftVlad",
    "onnx-global": "mining.methods.onnx_global:OnnxGlobal",
}
# `onnx-global-NAME`, `cnn-gem-NAME`: another instance of the method (its own settings and
# store), so that a manifest can describe with several ONNX models or backbones
INSTANCES = re.compile(r"(onnx-global|cnn-gem)-[A-Za-z0-9][A-Za-z0-9_-]*")


_DEVICE = re.compile(r"auto|cpu|cuda(:[0-9]+)?")


@dataclass(frozen=True)
class Param:
    """The type and domain of one method setting: `int`, `float` (ints accepted), `bool`,
    `str`, `floats` (a non-empty list of floats), `device` (auto, cpu, cuda, cuda:N),
    `choice` (one of `choices`) or `spatial` (a mapping of `top_k` and `min_inliers`, each an
    integer >= 1, as `mining.retrieval.spatial` reads it); numbers within [low, high] (`open_low`: low itself
    excluded); `none`: null allowed."""

    type: str
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    none: bool = False
    choices: tuple[str, ...] = ()

    def allowed(self) -> str:
        if self.type == "choice":
            text = " or ".join(self.choices)
        elif self.type == "device":
            text = "auto, cpu, cuda or cuda:N"
        elif self.type == "spatial":
            text = spatial.RULE
        elif self.type in ("bool", "str"):
            text = {"bool": "true or false", "str": "text"}[self.type]
        else:
            what = {"int": "an integer", "float": "a number", "floats": "a non-empty list of numbers, each"}[self.type]
            lo = "" if self.low is None else f"{'>' if self.open_low else '>='} {self.low:g}"
            hi = "" if self.high is None else f"<= {self.high:g}"
            text = f"{what} {lo}{' and ' if lo and hi else ''}{hi}".rstrip()
        return text + (" or null" if self.none else "")

    def _number(self, v: Any, integer: bool) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float) if not integer else int):
            return False
        if not math.isfinite(v):
            return False
        if self.low is not None and (v <= self.low if self.open_low else v < self.low):
            return False
        return self.high is None or v <= self.high

    def accepts(self, v: Any) -> bool:
        if v is None:
            return self.none
        if self.type in ("int", "float"):
            return self._number(v, self.type == "int")
        if self.type == "floats":
            return isinstance(v, (list, tuple)) and len(v) > 0 and all(self._number(x, False) for x in v)
        if self.type == "bool":
            return isinstance(v, bool)
        if self.type == "device":
            return isinstance(v, str) and _DEVICE.fullmatch(v) is not None
        if self.type == "choice":
            return v in self.choices
        if self.type == "spatial":
            return spatial.valid(v)
        return isinstance(v, str)


_SAID: set[str] = set()
_SAID_LOCK = threading.Lock()
_REMADE = threading.local()  # this thread is making a method again (`remade`): its warnings were said


@contextlib.contextmanager
def remade() -> Iterator[None]:
    """A method made again from settings the stage already made it with (a describe worker's
    copy): what it would warn about its settings was said there, once; this thread says nothing."""
    _REMADE.on = True
    try:
        yield
    finally:
        _REMADE.on = False


def warn_once(logger: str, message: str) -> None:
    """A warning on the log, the first time this process meets it (a method is made several
    times per run: by the stage, per landmark set, per worker task), never while `remade`."""
    if getattr(_REMADE, "on", False):
        return
    with _SAID_LOCK:
        if message in _SAID:
            return
        _SAID.add(message)
    logging.getLogger(logger).warning("%s", message)


class Method:
    """Base class of a retrieval method; subclasses set the class attributes and override."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = GLOBAL
    mode: ClassVar[str] = "RGB"  # the Pillow mode images are decoded to ("RGB" or "L")
    defaults: ClassVar[dict[str, Any]] = {}
    # the type and domain of each setting in `defaults` (every built-in declares them all; a
    # plug-in's setting without one is passed on unchecked)
    domains: ClassVar[dict[str, Param]] = {}
    # settings without which nothing can be described (e.g. onnx-global's model file): checked
    # when a manifest loads and when a store is planned
    required: ClassVar[tuple[str, ...]] = ()
    # settings that name a local file (a model): checked to be a readable file when the workflow
    # loads its manifest (mining.settings.manifest.check_inputs), before anything runs; a store, a
    # kit and a card record its name only, beside its checksum setting, never the local path
    files: ClassVar[tuple[str, ...]] = ()

    def recorded_params(self) -> dict[str, Any]:
        """The settings as a store records them: each file setting by its file's name."""
        return {k: (os.path.basename(str(v)) if k in self.files and v else v) for k, v in self.params.items()}

    @classmethod
    def check_params(cls, params: dict[str, Any] | None) -> None:
        """UserError (one line naming the method, the key and what is allowed) for a setting
        the method does not declare or a value outside its domain; None values mean "the
        default". Called when a manifest loads, when `mining describe` parses its options
        and when a method is made."""
        unknown = set(params or {}) - set(cls.defaults)
        if unknown:
            raise UserError(f"method {cls.name}: unknown parameter(s) {sorted(unknown)} "
                            f"(it has: {', '.join(sorted(cls.defaults))})")
        for key, value in (params or {}).items():
            dom = cls.domains.get(key)
            if value is not None and dom is not None and not dom.accepts(value):
                hint = next((h for v in (value if isinstance(value, list) else [value]) if (h := number_as_text(v))), "")
                raise UserError(f"method {cls.name}: {key}={value!r} is not allowed ({key} must be {dom.allowed()})"
                                + hint)

    @classmethod
    def missing(cls, params: dict[str, Any] | None) -> list[str]:
        """The `required` settings that `params` lacks."""
        return [k for k in cls.required if (params or {}).get(k) is None]

    @classmethod
    def check_here(cls, params: dict[str, Any] | None) -> None:
        """UserError (one line) when this machine cannot describe with these settings (e.g.
        a GPU asked for and none present). `mining describe` calls it when its workers run
        here (no --scheduler or --slurm); elsewhere the worker finds out at first use."""

    def __init__(self, params: dict[str, Any] | None = None, query: bool = False) -> None:
        self.check_params(params)
        self.params: dict[str, Any] = {**self.defaults, **{k: v for k, v in (params or {}).items() if v is not None}}
        self.query = query  # queries may be described differently (e.g. ASMK multiple assignment)
        self.state: dict[str, np.ndarray] | None = None

    # ---- what the describe stage needs -------------------------------------------------
    @property
    def max_side(self) -> int:
        """Long side (px) images are decoded to before `describe`."""
        return int(self.params.get("max_side", 1024))

    @property
    def learns(self) -> bool:
        """True when `fit` must run on candidates before anything can be described."""
        return False

    def small_pool(self, sample: int) -> str | None:
        """Why `sample` candidate images are too few for part of what the method learns (its
        whitening), known before the learning pass and said once by the stage; None: enough."""
        return None

    def skip_learning(self, sample: int) -> bool:
        """True when the learning pass would learn nothing on `sample` images: it is not run, and
        the state is empty."""
        return False

    def fit_features(self, image: np.ndarray) -> np.ndarray:
        """Raw features of one training image (rows), what `fit` learns from."""
        raise NotImplementedError

    def fit(self, features: list[np.ndarray], seed: int = 0) -> dict[str, np.ndarray]:
        """Learn the state from the training features; returns it (also kept on self)."""
        raise NotImplementedError

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        self.state = dict(state)

    def describe(self, image: np.ndarray) -> Any:
        """Payload of one decoded image (HxWx3 RGB or HxW gray uint8, long side <= max_side)."""
        raise NotImplementedError

    # ---- one extraction shared by several methods (mining.stages.describe.stage runs them together) --
    def extractor(self) -> tuple[Any, ...] | None:
        """Key of the intermediate features this method describes from (e.g. RootSIFT with
        its settings), or None. Methods with the same key, `max_side` and `mode` get one
        `extract` per image between them: `describe_extracted(extract(image))` must be
        `describe(image)`, bit for bit."""
        return None

    def extract(self, image: np.ndarray) -> Any:
        """The intermediate features of a decoded image (default: the image itself)."""
        return image

    def describe_extracted(self, features: Any) -> Any:
        """The payload from `extract`'s output (default: `describe`, for the identity extract)."""
        return self.describe(features)

    def fit_features_extracted(self, features: Any) -> np.ndarray:
        """`fit_features` from `extract`'s output (default: `fit_features`, identity extract)."""
        return self.fit_features(features)

    def dim(self) -> int:
        """Dimension of a global descriptor (0 for other kinds)."""
        return 0

    # ---- store I/O for non-global kinds (global ones use mining.retrieval.descriptors) ----------
    def write_extras(self, shards_dir: Path, shard: str, payloads: list[Any]) -> list[Any]:
        """Write what a shard keeps beside its payloads (e.g. keypoints) and return the payloads
        proper; called before the payloads and the ids are written (`descriptors.write_shard`)."""
        return payloads

    def write_payloads(self, shards_dir: Path, shard: str, payloads: list[Any]) -> None:
        raise NotImplementedError

    def load_payload(self, shards_dir: Path, shard: str, info: dict[str, Any]) -> Any:
        raise NotImplementedError

    def concat_payloads(self, blocks: list[Any], info: dict[str, Any]) -> Any:
        raise NotImplementedError

    def take_rows(self, payload: Any, rows: np.ndarray) -> list[Any]:
        """The payloads of these images (rows) of one loaded shard, as `write_payloads` takes
        them: the evaluation kit (`mining.kit`) keeps the selected distractors of a store."""
        raise NotImplementedError

    def similarity(self, queries: Any, database: Any, info: dict[str, Any]) -> np.ndarray:
        """float32 (n_queries, n_database) similarities; higher is more similar."""
        return np.asarray(queries, np.float32) @ np.asarray(database, np.float32).T


ENTRY_POINT_GROUP = "mining.methods"


def registry() -> dict[str, str]:
    """Method name -> "module:Class": the built-ins and the plug-ins installed under the
    `mining.methods` entry-point group (metadata only: nothing is imported)."""
    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return {**found, **REGISTRY}


def method_names() -> list[str]:
    return sorted(registry())


def get_method(name: str, params: dict[str, Any] | None = None, query: bool = False) -> Method:
    """Instantiate the method called `name` (a built-in, an installed plug-in, or
    `package.module:Class`)."""
    return method_class(name)(params, query=query)


def resolve(name: str) -> str | None:
    """The "module:Class" of the method called `name` (a built-in, an instance name such as
    `onnx-global-dino`, an installed plug-in, or `package.module:Class`), or None."""
    found = registry()
    if name in found:
        return found[name]
    inst = INSTANCES.fullmatch(name)
    if inst:
        return REGISTRY[inst.group(1)]
    return name if ":" in name else None


def method_class(name: str) -> type[Method]:
    """The class of the method called `name` (imported, not instantiated)."""
    target = resolve(name)
    if target is None:
        raise UserError(f"unknown method {name!r}; built-ins: {', '.join(method_names())} (or module:Class)")
    module, _, cls_name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), cls_name)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot load method {name!r} from {target} ({exc})") from None
    return cls


def fit_pca_whitening(x: np.ndarray, dim: int, shrink: float = 0.0, who: str = "whitening") -> dict[str, np.ndarray]:
    """PCA-whitening (Jégou & Chum 2012) learned on candidate descriptors.

    `dim` is capped by the sample size; `shrink` adds that fraction of the mean eigenvalue
    before whitening, which keeps noise directions from being blown up on small samples.
    Descriptors it cannot learn from (not finite, or all the same: nothing to whiten but
    rounding noise, blown up into zero descriptors) are refused in one line (`who`: the method).
    """
    x = np.asarray(x, np.float64)
    cannot = f"{who}: cannot learn the whitening from {len(x)} candidate descriptors"
    mean = x.mean(0)
    xc = x - mean
    with np.errstate(over="ignore", invalid="ignore"):
        cov = xc.T @ xc / max(1, len(x) - 1)
    if not np.isfinite(cov).all():
        raise UserError(f"{cannot}: their values are NaN, infinite or too large (the model's output); set "
                        "whiten: false (--param whiten=false) or use a model whose descriptors are finite unit vectors")
    eig, vec = np.linalg.eigh(cov)
    if eig.max() <= 1e-12:
        raise UserError(f"{cannot}: they are all the same (no variance: copies of one photo, or a model that ignores "
                        "its image); set whiten: false (--param whiten=false), or check the model and the candidates")
    order = np.argsort(eig)[::-1]
    keep = max(1, min(dim, len(x) - 1, x.shape[1]))
    eig, vec = eig[order][:keep], vec[:, order][:, :keep]
    eig = np.maximum(eig, 1e-12) + shrink * float(np.mean(np.maximum(eig, 0)))
    proj = (vec / np.sqrt(eig)).astype(np.float32)
    return {"pca_mean": mean.astype(np.float32), "pca_proj": proj}


def fit_pca_whitening_if_enough(x: np.ndarray, dim: int, shrink: float, who: str) -> dict[str, np.ndarray]:
    """PCA-whitening, or {} (no whitening) when the sample has fewer than 2 x `dim` rows.

    A projection learned on fewer images than twice its dimension mostly keeps the
    directions that separate those few training images, and discards what tells the others
    apart (measured: it turns a correct top-1 into a wrong one on small worlds).
    """
    if dim and len(x) >= 2 * dim:
        return fit_pca_whitening(x, dim, shrink, who)

    warn_once(__name__, f"{who}: {len(x)} training images < 2 x dim {dim}: not whitening")
    return {}


def small_pool_reason(sample: int, dim: int, key: str, then: str) -> str | None:
    """`fit_pca_whitening_if_enough`'s rule, known before any image is read: why a learning
    sample of `sample` images is too small to whiten to `dim` (the setting `key`), or None."""
    if sample >= 2 * dim:
        return None
    hint = f"whiten: false says so; {key} ≤ {sample // 2} whitens" if key == "whiten_dim" else \
        f"{key} ≤ {sample // 2} whitens"
    return f"{sample} candidates to learn from < 2 x {key} {dim}: not whitening, {then} ({hint})"


def apply_pca_whitening(x: np.ndarray, state: dict[str, np.ndarray]) -> np.ndarray:
    return l2_normalize((np.asarray(x, np.float32) - state["pca_mean"]) @ state["pca_proj"])


class WhitenedGlobal(Method):
    """A global method whose vector (`raw`, L2-normalised) may be PCA-whitened, learned on
    candidates: settings `whiten`, `whiten_dim`, `whiten_shrink` (cnn-gem, onnx-global)."""

    def raw(self, image: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def raw_dim(self) -> int:
        """Dimension of `raw` (0 when known only after the first image)."""
        return 0

    @property
    def learns(self) -> bool:
        return bool(self.params["whiten"])

    def small_pool(self, sample: int) -> str | None:
        return small_pool_reason(sample, int(self.params["whiten_dim"]), "whiten_dim", "no learning pass")

    def skip_learning(self, sample: int) -> bool:
        return self.small_pool(sample) is not None  # the pass learns the whitening only

    def fit_features(self, image: np.ndarray) -> np.ndarray:
        return self.raw(image)[None, :]

    def fit(self, features: list[np.ndarray], seed: int = 0) -> dict[str, np.ndarray]:
        if not features:
            raise UserError(f"{self.name}: cannot learn the whitening: none of the sampled images gave a usable "
                            "descriptor (the model or its settings?); check them, or set whiten: false "
                            "(--param whiten=false)")
        x = np.concatenate(features)
        if len(x) < 2:
            raise UserError(f"{self.name}: whitening needs at least 2 candidate images (or use --param whiten=false)")
        self.state = fit_pca_whitening_if_enough(x, int(self.params["whiten_dim"]), float(self.params["whiten_shrink"]),
                                                 self.name)
        return self.state

    def describe(self, image: np.ndarray) -> np.ndarray:
        v = self.raw(image)
        if self.learns:
            if self.state is None:
                raise UserError(f"{self.name}: whitening state missing (describe candidates first, pass --model)")
            if "pca_proj" in self.state:
                v = apply_pca_whitening(v[None, :], self.state)[0]
        return v

    def dim(self) -> int:
        if self.learns and self.state is not None and "pca_proj" in self.state:
            return int(self.state["pca_proj"].shape[1])
        return self.raw_dim()


def shared_groups(names: Sequence[str], params: dict[str, dict[str, Any]] | None = None) -> list[list[str]]:
    """The methods grouped by what one pass can share: the same decode (max_side, mode) and
    the same `extractor()` (with their settings; default settings when not given). Methods
    without an extractor are alone. Order: the methods' own, groups by their first member."""
    groups: dict[Any, list[str]] = {}
    for i, name in enumerate(names):
        m = get_method(name, (params or {}).get(name))
        key = m.extractor()
        groups.setdefault((m.max_side, m.mode, key) if key is not None else ("alone", i), []).append(name)
    return list(groups.values())
