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
    """Load `gnd_<name>.pkl` (or a folder holding exactly one); clear error when malformed."""
    p = Path(path)
    if p.is_dir():
        found = sorted(p.glob("gnd_*.pkl"))
        if len(found) != 1:
            raise UserError(f"{p}: expected exactly one gnd_*.pkl, found {len(found)}")
        p = found[0]
    if not p.is_file():
        raise UserError(f"{p}: landmark ground truth not found")
    try:
        with open(p, "rb") as f:
            data = pickle.load(f)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is the user's file
        raise UserError(f"{p}: not a readable revisitop gnd pickle ({exc})") from None
    for key in ("imlist", "qimlist", "gnd"):
        if key not in data:
            raise UserError(f"{p}: missing key '{key}' (expected revisitop gnd format)")
    if len(data["gnd"]) != len(data["qimlist"]):
        raise UserError(f"{p}: gnd has {len(data['gnd'])} entries but qimlist {len(data['qimlist'])}")
    name = p.stem[4:] if p.stem.startswith("gnd_") else p.stem
    return LandmarkDataset(p, name, list(data["imlist"]), list(data["qimlist"]), list(data["gnd"]))
