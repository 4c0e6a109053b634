"""Loading an evaluation kit (the format: `mining.kit`, docs/formats.md).

    from mining.kit import open_kit
    kit = open_kit("release/kit")              # checks SHA256SUMS first (one-line error if not)
    kit.methods                                # ['cnn-gem', 'rsift-asmk', 'rsift-vlad']
    ids, x = kit.vectors("cnn-gem", "distractors")   # photo ids, float32 (n, dim) unit rows
    q_ids, q = kit.vectors("cnn-gem", "queries")     # landmark query names, in store order
    scores = q @ x.T                           # what the run's evaluation ranked by
    kit.model("cnn-gem")                       # {'pca_mean': ..., 'pca_proj': ...} (whitening)
    kit.stores("cnn-gem")                      # a method's stores, as `mining.retrieval` opens a run's
    open_kit("release/kit", method_of=mining.methods.get_method).stores("rsift-asmk")  # any method's
    kit.distractors()                          # rank, photo_id, path, released (pandas)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow.parquet as pq

from mining.files import checksums
from mining.files.names import DISTRACTORS, EVALUATION
from mining.datasets.benchmarks import store_dir
from mining.retrieval.descriptors import GLOBAL, MODEL_FILE, open_store
from mining.errors import UserError
from mining.kit.check import check_kit
from mining.files.plainpaths import check_tree
from mining.retrieval.methodstores import MethodStores

FORMAT = "distractor-mining evaluation kit"
VERSION = 1
INFO = "kit.json"
TABLE = DISTRACTORS  # the selection (rank, photo_id, path, released); EVALUATION: the run's, timeless
METHODS = "methods"
PARTS = ("queries", "database", "distractors")
SIMS = "similarities"  # the run's own similarities, beside a method's (or benchmark's) landmark stores
SIMS_SP = "similarities+SP"  # its +SP (verified) similarities, for a method that kept keypoints


@dataclass
class Kit:
    """An opened kit folder (read-only)."""
    root: Path
    info: dict[str, Any]
    method_of: Callable[[str], Any] | None = None  # reads a non-global method's payloads (mining.retrieval.descriptors.Store)

    @property
    def methods(self) -> list[str]:
        return list(self.info["methods"])

    @property
    def benchmarks(self) -> list[str] | None:
        """The benchmarks' names when the run had several, else None."""
        return self.info.get("benchmarks")

    def evaluation(self) -> dict[str, Any]:
        """The run's evaluation.json."""
        return json.loads((self.root / EVALUATION).read_text())

    def distractors(self) -> Any:
        """The selected set, rank order: rank, photo_id, path, released."""
        return pq.read_table(self.root / TABLE).to_pandas().sort_values("rank", kind="stable").reset_index(drop=True)

    def method_dir(self, method: str) -> Path:
        if method not in self.info["methods"]:
            raise UserError(f"{self.root}: the kit has no method {method!r} (it has: {', '.join(self.methods)})")
        return self.root / METHODS / method

    def store(self, method: str, part: str, benchmark: str | None = None) -> Any:
        """One descriptor store (`mining.retrieval.descriptors.Store`): part = queries, database or distractors."""
        if part not in PARTS:
            raise ValueError(f"part is one of {PARTS}, not {part!r}")
        base = self.method_dir(method)
        return open_store(base / part if part == "distractors" else store_dir(base, self._bench(benchmark)) / part,
                          self.method_of)

    def stores(self, method: str, benchmark: str | None = None, queries: Any = None) -> Any:
        """The method's stores as `mining.retrieval.methodstores.MethodStores` (its candidates are the
        distractors), so score's and evaluate's readers take them as they are. `queries`: a
        Store to use instead of the kit's queries (a user's own)."""
        q = queries if queries is not None else self.store(method, "queries", benchmark)
        return MethodStores(self.method_dir(method), q, self.store(method, "database", benchmark),
                            self.store(method, "distractors"))

    def similarities(self, method: str, benchmark: str | None = None,
                     spatial: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The float32 similarities the run's evaluation ranked by: queries × database (rows and
        columns in the queries' and database's store order) and queries × distractors (the
        distractors store's order); `spatial`: those of its `<method>+SP` rows (`spatial_of`)."""
        folder = store_dir(self.method_dir(method), self._bench(benchmark)) / (SIMS_SP if spatial else SIMS)
        return (np.load(folder / "landmarks.npy", allow_pickle=False),
                np.load(folder / "distractors.npy", allow_pickle=False))

    def spatial_of(self, method: str) -> dict[str, int] | None:
        """The method's spatial verification settings when the kit has its +SP similarities."""
        spec = self.info["methods"][method].get("spatial") if method in self.info["methods"] else None
        return spec if isinstance(spec, dict) else None

    def model(self, method: str) -> dict[str, np.ndarray] | None:
        """What the method learned on the candidates (PCA-whitening, codebook), or None."""
        path = self.method_dir(method) / "distractors" / MODEL_FILE
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    def vectors(self, method: str, part: str, benchmark: str | None = None) -> tuple[list[str], np.ndarray]:
        """A global method's ids and float32 rows (decoded from the float16 the kit keeps)."""
        st = self.store(method, part, benchmark)
        if st.kind != GLOBAL:
            raise UserError(f"{self.root}: method {method!r} is {st.kind!r}, not a global descriptor; "
                            "use kit.stores() and its similarity kernel")
        return st.load_all()

    def _bench(self, benchmark: str | None) -> str | None:
        names = self.benchmarks
        if names is None:
            if benchmark is not None:
                raise UserError(f"{self.root}: the kit has one benchmark; no benchmark name is needed ({benchmark!r})")
            return None
        if benchmark not in names:
            raise UserError(f"{self.root}: name one of the kit's benchmarks ({', '.join(names)}), not {benchmark!r}")
        return benchmark


def open_kit(path: str | Path, verify: bool = True, method_of: Callable[[str], Any] | None = None) -> Kit:
    """Open a kit folder; `verify` (default) checks every file against its SHA256SUMS first
    (a changed, missing or added file: one-line UserError). Whether or not, the folder holds
    no symbolic link and every file is what kit.json says (`mining.kit.check`: headers and
    sizes, nothing loaded), so a reader below never meets a pickle, an array of a size the file
    chose, or a path outside the kit. `method_of` (`mining.methods.get_method`): what reads a
    non-global method's stores (`mining.retrieval.descriptors.Store`); a global method's need nothing."""
    root = Path(path)
    if not root.is_dir():
        raise UserError(f"--kit {root}: not a folder (the kit is RELEASE/kit/ of `mining release --kit`)")
    check_tree(root, "the kit")  # before any file is read: nothing is followed out of the folder
    if verify:
        checksums.verify(root, "the kit")
    try:
        info = json.loads((root / INFO).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{root / INFO}: not readable as JSON ({exc}); not an evaluation kit") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise UserError(f"{root / INFO}: not an evaluation kit (format is not {FORMAT!r})")
    if info.get("version") != VERSION:
        raise UserError(f"{root / INFO}: kit format version {info.get('version')!r}; this code reads version {VERSION}")
    check_kit(root / INFO, info)
    return Kit(root, info, method_of)
