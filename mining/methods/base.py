"""The retrieval-method plug-in interface and its registry.

A method turns a decoded image into a payload (`describe`), may learn something from a
sample of candidate images first (`fit_features` + `fit`, state kept as named numpy arrays
so it is stored without pickle), and scores query payloads against one database shard
(`similarity`). Global methods return one L2-normalised vector per image and get the
store's float16 `.npy` shards and a GEMM for free; other kinds write their own shard files
and bring their own kernel, which `mining.descriptors` calls through `load_payload` /
`concat_payloads` / `similarity`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mining.descriptors import GLOBAL  # the store kind a global descriptor writes (one definition)
from mining.errors import UserError

# name -> "module:Class"; imported lazily so `mining --help` never loads torch or OpenCV.
REGISTRY: dict[str, str] = {
    "cnn-gem": "mining.methods.cnn_gem:CnnGem",
    "rsift-asmk": "mining.methods.rsift_asmk:RSiftAsmk",
    "rsift-vlad": "mining.methods.rsift_vlad:RSiftVlad",
}


class Method:
    """Base class of a retrieval method; subclasses set the class attributes and override."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = GLOBAL
    mode: ClassVar[str] = "RGB"  # the Pillow mode images are decoded to ("RGB" or "L")
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, params: dict[str, Any] | None = None, query: bool = False) -> None:
        unknown = set(params or {}) - set(self.defaults)
        if unknown:
            raise UserError(f"method {self.name}: unknown parameter(s) {sorted(unknown)}")
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

    # ---- one extraction shared by several methods (mining.describe runs them together) --
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

    # ---- store I/O for non-global kinds (global ones use mining.descriptors) ----------
    def write_payloads(self, shards_dir: Path, shard: str, payloads: list[Any]) -> None:
        raise NotImplementedError

    def load_payload(self, shards_dir: Path, shard: str, info: dict[str, Any]) -> Any:
        raise NotImplementedError

    def concat_payloads(self, blocks: list[Any], info: dict[str, Any]) -> Any:
        raise NotImplementedError

    def similarity(self, queries: Any, database: Any, info: dict[str, Any]) -> np.ndarray:
        """float32 (n_queries, n_database) similarities; higher is more similar."""
        return np.asarray(queries, np.float32) @ np.asarray(database, np.float32).T


ENTRY_POINT_GROUP = "mining.methods"


def registry() -> dict[str, str]:
    """Method name -> "module:Class": the built-ins and the plug-ins installed under the
    `mining.methods` entry-point group (metadata only: nothing is imported)."""
    from importlib.metadata import entry_points

    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return {**found, **REGISTRY}


def method_names() -> list[str]:
    return sorted(registry())


def get_method(name: str, params: dict[str, Any] | None = None, query: bool = False) -> Method:
    """Instantiate the method called `name` (a built-in, an installed plug-in, or
    `package.module:Class`)."""
    target = registry().get(name, name if ":" in name else None)
    if target is None:
        raise UserError(f"unknown method {name!r}; built-ins: {', '.join(method_names())} (or module:Class)")
    module, _, cls_name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), cls_name)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot load method {name!r} from {target} ({exc})") from None
    return cls(params, query=query)


def l2_normalize(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Unit rows; zero rows stay zero (an image without features matches nothing)."""
    n = np.linalg.norm(x, axis=axis, keepdims=True)
    return x / np.maximum(n, 1e-12)


def fit_pca_whitening(x: np.ndarray, dim: int, shrink: float = 0.0) -> dict[str, np.ndarray]:
    """PCA-whitening (Jégou & Chum 2012) learned on candidate descriptors.

    `dim` is capped by the sample size; `shrink` adds that fraction of the mean eigenvalue
    before whitening, which keeps noise directions from being blown up on small samples.
    """
    x = np.asarray(x, np.float64)
    mean = x.mean(0)
    xc = x - mean
    cov = xc.T @ xc / max(1, len(x) - 1)
    eig, vec = np.linalg.eigh(cov)
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
        return fit_pca_whitening(x, dim, shrink)
    import logging

    logging.getLogger(__name__).warning("%s: %d training images < 2 x dim %d: not whitening", who, len(x), dim)
    return {}


def apply_pca_whitening(x: np.ndarray, state: dict[str, np.ndarray]) -> np.ndarray:
    return l2_normalize((np.asarray(x, np.float32) - state["pca_mean"]) @ state["pca_proj"])
