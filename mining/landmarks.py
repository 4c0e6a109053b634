"""A landmark dataset in revisitop's format: `gnd_<name>.pkl` beside a `jpg/` folder.

Shared by every stage that needs queries, positives or landmark names (demo, describe,
score, review, evaluate), so that the rules about them live in one place.
"""

from __future__ import annotations

import hashlib
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mining.errors import UserError

_TRAILING_NUMBER = re.compile(r"_\d+$")


@dataclass(frozen=True)
class LandmarkDataset:
    """The parsed ground truth plus where its images are."""

    path: Path  # the gnd_*.pkl file
    name: str  # e.g. "roxford5k" from gnd_roxford5k.pkl
    imlist: list[str]
    qimlist: list[str]
    gnd: list[dict[str, Any]]

    @property
    def image_root(self) -> Path:
        """Folder holding `<name>.jpg` for every entry of imlist and qimlist."""
        return self.path.parent / "jpg"

    def image_path(self, name: str) -> Path:
        return self.image_root / f"{name}.jpg"

    def query_landmark(self, i: int) -> str:
        """Landmark of query i: the gnd entry's `landmark` key, else the query name minus `_NNN`."""
        explicit = self.gnd[i].get("landmark")
        if explicit:
            return str(explicit)
        return _TRAILING_NUMBER.sub("", self.qimlist[i])

    @property
    def landmarks(self) -> list[str]:
        """Landmark names in first-appearance order."""
        return list(dict.fromkeys(self.query_landmark(i) for i in range(len(self.qimlist))))

    def positives(self, i: int) -> list[int]:
        """Easy ∪ Hard database indices of query i (the score's P_q)."""
        g = self.gnd[i]
        return sorted(set(map(int, g.get("easy", []))) | set(map(int, g.get("hard", []))))

    def bbox(self, i: int) -> tuple[float, float, float, float]:
        x1, y1, x2, y2 = (float(v) for v in self.gnd[i]["bbx"])
        return x1, y1, x2, y2

    def fingerprint(self) -> str:
        """Content hash of the ground truth, so later stages can refuse mismatched inputs."""
        h = hashlib.sha256()
        h.update(pickle.dumps((self.imlist, self.qimlist, [
            (sorted(map(int, g.get("easy", []))), sorted(map(int, g.get("hard", []))),
             sorted(map(int, g.get("junk", []))), [float(v) for v in g.get("bbx", [])])
            for g in self.gnd
        ]), protocol=4))
        return h.hexdigest()[:16]


def load_landmarks(path: str | Path) -> LandmarkDataset:
    """Load `gnd_<name>.pkl` or `.mat` (or a folder holding exactly one .pkl); clear error when malformed."""
    p = Path(path)
    if p.is_dir():
        found = sorted(p.glob("gnd_*.pkl"))
        if len(found) != 1:
            raise UserError(f"{p}: expected exactly one gnd_*.pkl, found {len(found)}")
        p = found[0]
    data = load_gnd(p)
    name = p.stem[4:] if p.stem.startswith("gnd_") else p.stem
    return LandmarkDataset(p, name, list(data["imlist"]), list(data["qimlist"]), list(data["gnd"]))


# ---- the ground-truth file itself: revisitop's pickle, or the older 1-based .mat --------

_INDEX_KEYS = ("easy", "hard", "junk", "ok")


def load_gnd(path: str | Path) -> dict[str, Any]:
    """{'imlist', 'qimlist', 'gnd'} with 0-based index lists, from a .pkl or a .mat file."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: landmark ground truth not found")
    if p.suffix == ".mat":
        return _load_mat(p)
    try:
        with open(p, "rb") as f:
            data = pickle.load(f)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is the user's file
        raise UserError(f"{p}: not a readable gnd pickle ({exc})") from None
    _check(p, data)
    return data


def _check(p: Path, data: Any) -> None:
    if not isinstance(data, dict) or any(k not in data for k in ("imlist", "qimlist", "gnd")):
        raise UserError(f"{p}: expected keys imlist, qimlist and gnd (revisitop format)")
    if len(data["gnd"]) != len(data["qimlist"]):
        raise UserError(f"{p}: gnd has {len(data['gnd'])} entries but qimlist {len(data['qimlist'])}")


def _names(arr: Any) -> list[str]:
    return [str(np.asarray(x).ravel()[0]) if np.asarray(x).size else "" for x in np.atleast_1d(np.asarray(arr, dtype=object))]


def _load_mat(p: Path) -> dict[str, Any]:
    from scipy.io import loadmat

    try:
        raw = loadmat(str(p), squeeze_me=False, struct_as_record=True)
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"{p}: not a readable .mat file ({exc})") from None
    for key in ("imlist", "qimlist", "gnd"):
        if key not in raw:
            raise UserError(f"{p}: missing variable {key!r} (expected revisitop's gnd .mat)")
    gnd_raw = raw["gnd"].ravel()
    fields = gnd_raw.dtype.names or ()
    gnd = []
    for entry in gnd_raw:
        g: dict[str, Any] = {}
        for key in fields:
            val = np.asarray(entry[key]).ravel()
            if key in _INDEX_KEYS:
                idx = val.astype(np.int64) - 1  # 1-based in MATLAB
                if idx.size and idx.min() < 0:
                    raise UserError(f"{p}: gnd.{key} holds index 0 (the .mat form is 1-based)")
                g[key] = idx.tolist()
            elif key == "bbx":
                g[key] = val.astype(np.float64).tolist()
            else:
                g[key] = val.tolist()
        gnd.append(g)
    data = {"imlist": _names(raw["imlist"].ravel()), "qimlist": _names(raw["qimlist"].ravel()), "gnd": gnd}
    _check(p, data)
    return data
