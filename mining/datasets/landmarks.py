"""A landmark dataset in revisitop's format: `gnd_<name>.pkl` beside a `jpg/` folder.

Shared by every stage that needs queries, positives or landmark names (demo, describe,
score, review, evaluate), so that the rules about them live in one place:

- **Loading** never runs code: the pickle is read with a restricted unpickler that only
  builds what a gnd file holds (containers, strings, numbers, numpy arrays).
- **Validation** runs on every load: keys, index ranges, `bbx`; a broken file is one
  `UserError` naming the file, the query and the key. `check_dataset` (the
  `mining landmarks check` verb) adds the images on disk and the landmark grouping.
- **Landmarks come from the ground truth**, not from query names: a query's `landmark`
  key when present; otherwise queries whose positives (easy ∪ hard, or the original
  protocol's `ok`) are the same set, or nearly so (Jaccard ≥ `SAME_LANDMARK_JACCARD`),
  form one landmark. See `find_landmarks`.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image

from mining.errors import UserError
from mining.datasets.gndfile import INDEX_KEYS, gnd_entry, read_gnd
from mining.photos.imagedecode import shown_size
from mining.console.shell import mining_command

# Two queries whose positive sets have a Jaccard index at least this high show the same
# landmark. Queries of one landmark share their positives exactly in the original Oxford and
# Paris ground truth (Jaccard 1.0); different landmarks share almost nothing (the real Oxford
# maximum is 0.003: all_souls and radcliffe_camera have one positive image in common). 0.5
# leaves room for per-query labels (revisitop's Hard depends on the query's view).
SAME_LANDMARK_JACCARD = 0.5
# `check` flags a query when at least this share of its positives are positives of another
# landmark: the grouping (or the file's `landmark` keys) probably split one landmark in two.
OVERLAP_WARNING = 0.2

_POSITIVE_KEYS = ("easy", "hard", "ok")  # revisited protocol: easy ∪ hard; original protocol: ok
_TRAILING_NUMBER = re.compile(r"[_\d]+$")


@dataclass(frozen=True)
class GndProblem:
    """One thing wrong (error) or suspicious (warning) in a landmark dataset."""

    level: str  # "error" | "warning"
    message: str
    query: str | None = None
    key: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "query": self.query, "key": self.key, "message": self.message}


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
        return sorted(_positive_set(self.gnd[i]))

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


def _positive_set(g: dict[str, Any]) -> set[int]:
    return {int(v) for k in _POSITIVE_KEYS for v in np.asarray(g.get(k, []), dtype=object).ravel()}


def load_landmarks(path: str | Path) -> LandmarkDataset:
    """Load `gnd_<name>.pkl` or `.mat` (or a folder holding exactly one .pkl); clear error when malformed."""
    p = _gnd_file(path)
    return _dataset(p, load_gnd(p))


def _gnd_file(path: str | Path) -> Path:
    """The file itself, or the one gnd_*.pkl in a folder."""
    p = Path(path)
    if p.is_dir():
        found = sorted(p.glob("gnd_*.pkl"))
        if len(found) != 1:
            raise UserError(f"{p}: expected exactly one gnd_*.pkl, found {len(found)}")
        p = found[0]
    return p


def _dataset(p: Path, data: dict[str, Any]) -> LandmarkDataset:
    name = p.stem[4:] if p.stem.startswith("gnd_") else p.stem
    return LandmarkDataset(p, name, [str(x) for x in data["imlist"]], [str(x) for x in data["qimlist"]],
                           list(data["gnd"]))


# ---- landmarks from the ground truth -------------------------------------------------------


def _stem(name: str) -> str:
    """A query name without its trailing number: `all_souls_000013` → `all_souls`."""
    return _TRAILING_NUMBER.sub("", name)


def _common_prefix(names: Sequence[str]) -> str:
    return _stem(os.path.commonprefix(list(names)))


def _group_label(names: Sequence[str]) -> str:
    """What most of a group's query names say: the stem more than half of them share, else their common prefix."""
    stem, count = Counter(_stem(n) for n in names).most_common(1)[0]
    if stem and count * 2 > len(names):
        return stem
    return _common_prefix(names)


def _jaccard_pairs(sets: Sequence[set[int]]) -> dict[tuple[int, int], float]:
    """|A∩B| / |A∪B| of every pair i < j of sets that share an element, through one sparse
    product (pairs that share nothing have 0 and are left out: memory grows with the pairs
    that overlap, not with the square of the count)."""
    from scipy import sparse

    n = len(sets)
    rows = np.repeat(np.arange(n), [len(s) for s in sets])
    cols = np.fromiter((v for s in sets for v in sorted(s)), np.int64, count=len(rows))
    width = int(cols.max()) + 1 if len(cols) else 1
    a = sparse.csr_matrix((np.ones(len(rows), np.int32), (rows, cols)), shape=(n, width))
    inter = sparse.triu(a @ a.T, k=1).tocoo()
    size = [len(s) for s in sets]
    return {(i, j): v / (size[i] + size[j] - v) for i, j, v in zip(*(x.tolist() for x in (inter.row, inter.col, inter.data))) if v}


def _jaccard(a: set[int], b: set[int]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def find_landmarks(qimlist: Sequence[str], gnd: Sequence[dict[str, Any]],
                   threshold: float = SAME_LANDMARK_JACCARD) -> tuple[list[tuple[str, list[int]]], list[GndProblem]]:
    """Group the queries into landmarks from the ground truth; (groups, warnings about the grouping).

    1. A query with a `landmark` key belongs to that landmark.
    2. The other queries with positives are linked when their positive sets have a Jaccard
       index ≥ `threshold` (single linkage); a linked group joins the explicitly named
       landmark whose positives it matches that well, if any.
    3. A query without positives joins the one group whose queries' names share its name
       stem, if exactly one does; otherwise it is a landmark of its own.

    A found group is named by what its queries' names share (the stem most of them carry,
    `all_souls` for `all_souls_000013`, else their common prefix) when that name is unique
    among the groups, else `landmark_NN` (NN its position). Groups are ordered by their
    first query.
    """
    n = len(qimlist)
    pos = [_positive_set(g) for g in gnd]
    explicit = [g.get("landmark") or None for g in gnd]
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(i: int, j: int) -> None:
        ri, rj = root(i), root(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)

    first_of: dict[str, int] = {}
    for i, lm in enumerate(explicit):
        if lm is not None:
            join(first_of.setdefault(str(lm), i), i)
    jac = _jaccard_pairs(pos) if n else {}
    for (i, j), v in jac.items():
        if v >= threshold and explicit[i] is None and explicit[j] is None:
            join(i, j)

    def members() -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i in range(n):
            out.setdefault(root(i), []).append(i)
        return out

    # found groups that match a named landmark join it
    named_pos = {r: set().union(*(pos[i] for i in qs)) for r, qs in members().items() if explicit[r] is not None}
    holders = _holders(named_pos.items())
    for r, qs in members().items():
        if explicit[r] is not None or not pos[r]:
            continue
        union = set().union(*(pos[i] for i in qs))
        shared = Counter(k for v in union for k in holders.get(v, ()))  # named landmarks it overlaps at all
        best = max(shared, key=lambda k: (_jaccard(union, named_pos[k]), -k), default=None)
        if best is not None and _jaccard(union, named_pos[best]) >= threshold:
            join(best, r)
    # queries without positives: by name stem, when one group's names claim it
    stems: dict[str, set[int]] = {}  # name stem → the groups with positives whose queries carry it
    for r, qs in members().items():
        if any(pos[j] for j in qs):
            for j in qs:
                stems.setdefault(_stem(qimlist[j]), set()).add(r)
    for i in range(n):
        if explicit[i] is not None or pos[i]:
            continue
        claim = [r for r in stems.get(_stem(qimlist[i]), ()) if r != root(i)]
        if len(claim) == 1 and _stem(qimlist[i]):
            join(claim[0], i)
    ordered = sorted(members().values(), key=lambda qs: qs[0])

    given = [next((str(explicit[i]) for i in qs if explicit[i] is not None), None) for qs in ordered]
    labels = [g if g is not None else _group_label([qimlist[i] for i in qs]) for g, qs in zip(given, ordered)]
    taken = Counter(labels)
    reserved = {g for g in given if g is not None}
    width = max(2, len(str(len(ordered))))
    names = []
    for k, (g, lab) in enumerate(zip(given, labels)):
        if g is not None or (lab and taken[lab] == 1 and lab not in reserved):
            names.append(lab)
        else:
            names.append(f"landmark_{k + 1:0{width}d}")
    return list(zip(names, ordered)), _grouping_warnings(qimlist, pos, explicit, list(zip(names, ordered)), jac,
                                                         threshold)


def _grouping_warnings(qimlist: Sequence[str], pos: Sequence[set[int]], explicit: Sequence[Any],
                       groups: list[tuple[str, list[int]]], jac: dict[tuple[int, int], float],
                       threshold: float) -> list[GndProblem]:
    out = []
    holders = _holders(enumerate(set().union(*(pos[i] for i in qs)) for _, qs in groups))
    for g, (name, qs) in enumerate(groups):
        for i in qs:
            q = qimlist[i]
            if not pos[i]:
                out.append(GndProblem("warning", f"query {q!r} has no positives (no easy, hard or ok image): "
                                      "it cannot count in the score or the evaluation", q, "easy"))
                continue
            shared = Counter(k for v in pos[i] for k in holders[v])  # other landmarks' positives it holds
            for k in sorted(shared):
                if k != g and shared[k] >= OVERLAP_WARNING * len(pos[i]):
                    out.append(GndProblem("warning", f"query {q!r} (landmark {name!r}): {shared[k]} of its "
                                          f"{len(pos[i])} positives are positives of landmark {groups[k][0]!r}; one "
                                          "landmark split in two?", q, "landmark" if explicit[i] is not None else None))
            best = max((jac.get((min(i, j), max(i, j)), 0.0) for j in qs if j != i and pos[j]), default=None)
            if explicit[i] is not None and best is not None and best < threshold:
                out.append(GndProblem("warning", f"query {q!r} is labelled {name!r} but its positives share little with "
                                      f"the other queries of {name!r} (best Jaccard {best:.2f})", q, "landmark"))
    return out


def _holders(sets: Any) -> dict[int, list[int]]:
    """Image → the keys of the (key, set of images) pairs whose set holds it."""
    out: dict[int, list[int]] = {}
    for k, v in ((k, v) for k, images in sets for v in images):
        out.setdefault(v, []).append(k)
    return out


# ---- validation ------------------------------------------------------------------------------


def validate_gnd(data: Any) -> list[GndProblem]:
    """Everything wrong with a loaded gnd structure (errors), without touching the disk."""
    if not isinstance(data, dict) or any(k not in data for k in ("imlist", "qimlist", "gnd")):
        keys = sorted(map(str, data)) if isinstance(data, dict) else type(data).__name__
        return [GndProblem("error", f"expected keys imlist, qimlist and gnd (revisitop format), found {keys}")]
    out: list[GndProblem] = []
    lists = {}
    for key in ("imlist", "qimlist", "gnd"):
        try:
            lists[key] = list(data[key])
        except TypeError:
            out.append(GndProblem("error", f"{key} must be a list, found {type(data[key]).__name__}", key=key))
    if out:
        return out
    imlist, qimlist, gnd = lists["imlist"], lists["qimlist"], lists["gnd"]
    for key, names in (("imlist", imlist), ("qimlist", qimlist)):
        bad = next((k for k, x in enumerate(names) if not isinstance(x, str) or not x), None)
        if bad is not None:
            out.append(GndProblem("error", f"{key}[{bad}] must be a non-empty image name, found {names[bad]!r}", key=key))
        outside = next((k for k, x in enumerate(names) if isinstance(x, str) and x and not _inside_jpg(x)), None)
        if outside is not None:
            out.append(GndProblem("error", f"{key}[{outside}] must name an image inside the dataset's jpg/ folder "
                                  f"(a relative path without '..'), found {names[outside]!r}", key=key))
        dup = [x for x, c in Counter(map(str, names)).items() if c > 1]
        if dup:
            out.append(GndProblem("warning", f"{key} names {len(dup)} images more than once (e.g. {dup[0]!r})", key=key))
    if len(gnd) != len(qimlist):
        out.append(GndProblem("error", f"gnd has {len(gnd)} entries but qimlist {len(qimlist)}", key="gnd"))
    n_db = len(imlist)
    for i, g in enumerate(gnd):
        where = gnd_entry(qimlist, i)
        q = str(qimlist[i]) if i < len(qimlist) else None
        if not isinstance(g, dict):
            out.append(GndProblem("error", f"{where}: gnd entry must be a dict, found {type(g).__name__}", q, "gnd"))
            continue
        for key in INDEX_KEYS:
            if key in g:
                msg = _index_problem(g[key], n_db)
                if msg:
                    out.append(GndProblem("error", f"{where}: gnd.{key} {msg}", q, key))
        msg = _bbox_problem(g.get("bbx"))
        if msg:
            out.append(GndProblem("error", f"{where}: gnd.bbx {msg}", q, "bbx"))
        lm = g.get("landmark")
        if lm is not None and not isinstance(lm, str):
            out.append(GndProblem("error", f"{where}: gnd.landmark must be a name (string), found {lm!r}", q, "landmark"))
    return out


def _inside_jpg(name: str) -> bool:
    """A name that stays inside `jpg/`: relative, no `..`, `.` or empty parts, no backslash or NUL."""
    parts = name.split("/")
    return not ("\\" in name or "\0" in name or any(p in ("", ".", "..") for p in parts))


def _index_problem(value: Any, n_db: int) -> str | None:
    try:
        arr = np.asarray(value)
    except Exception:  # noqa: BLE001 - ragged or exotic: not an index list either way
        return f"must be a list of database indices, found {type(value).__name__}"
    if arr.ndim != 1:
        shape = f" of shape {arr.shape}" if arr.ndim > 1 else ""
        return f"must be a list of database indices, found {type(value).__name__}{shape}"
    if arr.size == 0:
        return None
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        return f"must hold integer indices, found {arr.dtype} values such as {arr.ravel()[0]!r}"
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= n_db:
        bad = lo if lo < 0 else hi
        return f"holds index {bad}, outside the database (imlist has {n_db} images: 0..{n_db - 1})"
    return None


def _bbox_problem(value: Any) -> str | None:
    if value is None:
        return "is missing (every query needs its box: x1 y1 x2 y2)"
    try:
        box = np.asarray(value, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return f"must be 4 numbers x1 y1 x2 y2, found {value!r}"
    if box.size != 4:
        return f"must be 4 numbers x1 y1 x2 y2, found {box.size}"
    if not all(math.isfinite(v) for v in box):
        return f"must be 4 finite numbers, found {box.tolist()}"
    x1, y1, x2, y2 = box.tolist()
    if not (x1 < x2 and y1 < y2):
        return f"must have x1 < x2 and y1 < y2, found {box.tolist()}"
    return None


def _raise_first(p: Path, problems: Sequence[GndProblem]) -> None:
    errors = [x for x in problems if x.level == "error"]
    if errors:
        check = mining_command("landmarks", "check", p)  # as pasted in a fresh shell
        more = f" (and {len(errors) - 1} more; `{check}` lists them)" if len(errors) > 1 else ""
        raise UserError(f"{p}: {errors[0].message}{more}")


@dataclass
class CheckReport:
    """What `mining landmarks check` prints."""

    landmarks: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "queries": [names]}]
    queries: int = 0
    database: int = 0
    problems: list[GndProblem] = field(default_factory=list)

    @property
    def errors(self) -> list[GndProblem]:
        return [x for x in self.problems if x.level == "error"]

    def as_dict(self) -> dict[str, Any]:
        return {"landmarks": self.landmarks, "queries": self.queries, "database": self.database,
                "problems": [x.as_dict() for x in self.problems]}

    def text(self, path: Path | str) -> str:
        lines = [f"{path}: {self.queries} queries, {self.database} database images, {len(self.landmarks)} landmarks"]
        lines += [f"  {lm['name']} ({len(lm['queries'])}): {', '.join(lm['queries'])}" for lm in self.landmarks]
        lines += [f"{x.level}: {x.message}" for x in self.problems]
        return "\n".join(lines)

    def raise_errors(self, path: Path | str) -> None:
        """UserError naming the first error (its query and key), when there is one."""
        _raise_first(Path(path), self.problems)


def check_dataset(path: str | Path, images: bool = True) -> CheckReport:
    """Validate a landmark dataset completely (structure, images on disk, grouping) and find its landmarks.

    Problems are collected, not raised; only a file that cannot be read at all raises UserError.
    """
    p = _gnd_file(path)
    data = read_gnd(p)
    problems = validate_gnd(data)
    if not isinstance(data, dict) or any(x.level == "error" and x.key in (None, "imlist", "qimlist", "gnd")
                                         for x in problems):
        return CheckReport(problems=problems)
    rep = CheckReport(queries=len(data["qimlist"]), database=len(data["imlist"]), problems=problems)
    if rep.errors:
        return rep  # grouping needs valid indices
    ds = _dataset(p, data)
    groups, warnings = find_landmarks(ds.qimlist, ds.gnd)
    rep.landmarks = [{"name": lm, "queries": [ds.qimlist[i] for i in qs]} for lm, qs in groups]
    rep.problems += warnings
    if images:
        rep.problems += _image_problems(ds)
    return rep


def _image_problems(ds: LandmarkDataset) -> list[GndProblem]:
    out = []
    missing_db = [n for n in ds.imlist if not ds.image_path(n).is_file()]
    if missing_db:
        out.append(GndProblem("error", f"{len(missing_db)} of {len(ds.imlist)} database images are missing from "
                              f"{ds.image_root} (e.g. {ds.image_path(missing_db[0]).name})", key="imlist"))
    for i, q in enumerate(ds.qimlist):
        path = ds.image_path(q)
        if not path.is_file():
            out.append(GndProblem("error", f"query {q!r} (#{i}): image {path} is missing", q, "qimlist"))
            continue
        try:
            with Image.open(path) as im:  # the size as shown, as `mining.stages.describe.stage` crops it
                w, h = shown_size(im)
        except Exception as exc:  # noqa: BLE001 - any decoder failure is the user's file
            out.append(GndProblem("error", f"query {q!r} (#{i}): {path} is not a readable image ({exc})", q, "qimlist"))
            continue
        x1, y1, x2, y2 = ds.bbox(i)
        if x1 < -1 or y1 < -1 or x2 > w + 1 or y2 > h + 1:
            out.append(GndProblem("warning", f"query {q!r} (#{i}): gnd.bbx {[x1, y1, x2, y2]} reaches outside "
                                  f"the {w}×{h} image", q, "bbx"))
    return out


def load_gnd(path: str | Path) -> dict[str, Any]:
    """{'imlist', 'qimlist', 'gnd'} with 0-based index lists, from a .pkl or a .mat file; validated."""
    p = Path(path)
    data = read_gnd(p)
    _raise_first(p, validate_gnd(data))
    return data
