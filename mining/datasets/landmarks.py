"""A landmark dataset in revisitop's format: `gnd_<name>.pkl` beside a `jpg/` folder.

Shared by every stage that needs queries, positives or landmark names (demo, describe,
score, review, evaluate), so that the rules about them live in one place:

- **Loading** never runs code: the pickle is read with a restricted unpickler that only
  builds what a gnd file holds (containers, strings, numbers, numpy arrays)
  (`mining.datasets.gndfile`).
- **Validation** runs on every load: keys, index ranges, `bbx`; a broken file is one
  `UserError` naming the file, the query and the key (`mining.datasets.gndcheck`).
  `mining.datasets.datasetcheck.check_dataset` (the `mining landmarks check` verb) adds the
  images on disk and the landmark grouping.
- **Landmarks come from the ground truth**, not from query names (`mining.datasets.grouping`).
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from mining.errors import UserError
from mining.datasets.gndcheck import raise_first_error, validate_gnd
from mining.datasets.gndfile import positive_set, read_gnd
from mining.datasets.grouping import find_landmarks


@dataclass(frozen=True)
class LandmarkDataset:
    """The parsed ground truth plus where its images are."""

    path: Path  # the gnd_*.pkl file
    name: str  # e.g. "roxford5k" from gnd_roxford5k.pkl
    imlist: list[str]
    qimlist: list[str]
    gnd: list[dict[str, Any]]

    @classmethod
    def from_gnd(cls, p: Path, data: dict[str, Any]) -> "LandmarkDataset":
        """The dataset of gnd file `p` holding `data` (read, validated); its name from `gnd_<name>`."""
        name = p.stem[4:] if p.stem.startswith("gnd_") else p.stem
        return cls(p, name, [str(x) for x in data["imlist"]], [str(x) for x in data["qimlist"]], list(data["gnd"]))

    @property
    def image_root(self) -> Path:
        """Folder holding `<name>.jpg` for every entry of imlist and qimlist."""
        return self.path.parent / "jpg"

    def image_path(self, name: str) -> Path:
        return self.image_root / f"{name}.jpg"

    @cached_property
    def groups(self) -> list[tuple[str, list[int]]]:
        """(landmark name, its query indices), in first-appearance order (see `find_landmarks`)."""
        return find_landmarks(self.qimlist, self.gnd)[0]

    @cached_property
    def _landmark_of(self) -> dict[int, str]:
        return {i: name for name, qs in self.groups for i in qs}

    def query_landmark(self, i: int) -> str:
        """Landmark of query i, found from the ground truth (see `find_landmarks`)."""
        return self._landmark_of[i]

    @property
    def landmarks(self) -> list[str]:
        """Landmark names in first-appearance order."""
        return [name for name, _ in self.groups]

    def landmark_queries(self) -> dict[str, list[str]]:
        """Landmark name → its query names: the grouping, as stats and reports show it."""
        return {name: [self.qimlist[i] for i in qs] for name, qs in self.groups}

    def positives(self, i: int) -> list[int]:
        """Easy ∪ Hard database indices of query i (the score's P_q); `ok` in the original protocol's files."""
        return sorted(positive_set(self.gnd[i]))

    def locate(self, i: int) -> tuple["LandmarkDataset", int]:
        """(dataset, index) holding query i: itself (`mining.datasets.benchmarks.Combined` maps a run's
        query onto its benchmark's)."""
        return self, i

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
    p = find_gnd_file(path)
    return LandmarkDataset.from_gnd(p, load_gnd(p))


def find_gnd_file(path: str | Path) -> Path:
    """The file itself, or the one gnd_*.pkl in a folder."""
    p = Path(path)
    if p.is_dir():
        found = sorted(p.glob("gnd_*.pkl"))
        if len(found) != 1:
            raise UserError(f"{p}: expected exactly one gnd_*.pkl, found {len(found)}")
        p = found[0]
    return p


def load_gnd(path: str | Path) -> dict[str, Any]:
    """{'imlist', 'qimlist', 'gnd'} with 0-based index lists, from a .pkl or a .mat file; validated."""
    p = Path(path)
    data = read_gnd(p)
    raise_first_error(p, validate_gnd(data))
    return data
