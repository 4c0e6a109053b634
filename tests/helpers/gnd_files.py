"""Landmark ground-truth files for the tests of `mining/datasets/`: the real Oxford 5k ground truth
as revisitop lays it out (`oxford_revisitop`), a small valid gnd (`small_gnd`) and writing one
(`write_gnd`)."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np

from mining.stages.evaluate.protocols.oxford import load_oxford_gt

from paths import OXFORD


def oxford_revisitop(folder: Path, layout: str = "revisited") -> tuple[Path, dict[str, list[str]]]:
    """The real Oxford 5k ground truth as revisitop lays it out: qimlist = the query images' own names.

    `revisited`: easy = good, hard = ok, junk = junk (gnd_roxford5k.pkl's keys); `original`: ok = good ∪ ok,
    junk (gnd_oxford5k.pkl's keys). Numpy arrays, as revisitop's pickles hold them. Returns the file and the
    truth: landmark (the gt file name minus `_<n>`) → its query image names.
    """
    qs = load_oxford_gt(OXFORD)
    imlist = sorted(set().union(*(q.good | q.ok | q.junk for q in qs)) | {q.image for q in qs})
    index = {n: i for i, n in enumerate(imlist)}
    ids = lambda names: np.array(sorted(index[n] for n in names), np.int64)  # noqa: E731
    gnd = []
    for q in qs:
        g = {"bbx": np.array(q.bbox, np.float64), "junk": ids(q.junk - q.positives)}
        if layout == "revisited":
            g.update(easy=ids(q.good), hard=ids(q.ok - q.good))
        else:
            g.update(ok=ids(q.positives))
        gnd.append(g)
    path = folder / f"gnd_oxford5k_{layout}.pkl"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({"imlist": imlist, "qimlist": [q.image for q in qs], "gnd": gnd}, protocol=2))
    truth: dict[str, list[str]] = {}
    for q in qs:
        truth.setdefault(re.sub(r"_\d+$", "", q.name), []).append(q.image)
    return path, truth


def write_gnd(folder: Path, data) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gnd_city.pkl"
    path.write_bytes(pickle.dumps(data))
    return path


def small_gnd():
    return {"imlist": ["a", "b", "c", "d"], "qimlist": ["tower_001", "tower_002"],
            "gnd": [{"bbx": [0, 0, 10, 10], "easy": [0], "hard": [1], "junk": []},
                    {"bbx": [1, 1, 5, 6], "easy": [0, 1], "hard": [], "junk": [3]}]}
