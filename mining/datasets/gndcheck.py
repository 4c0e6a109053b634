"""A landmark ground truth's structure checked, without touching the disk: keys, index ranges,
`bbx`, image names. A broken file is one `UserError` naming the file, the query and the key
(`raise_first_error`); `mining.datasets.datasetcheck` adds the images on disk and the grouping.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mining.errors import UserError
from mining.datasets.gndfile import INDEX_KEYS, gnd_entry
from mining.console.shell import mining_command


@dataclass(frozen=True)
class GndProblem:
    """One thing wrong (error) or suspicious (warning) in a landmark dataset."""

    level: str  # "error" | "warning"
    message: str
    query: str | None = None
    key: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "query": self.query, "key": self.key, "message": self.message}


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


def raise_first_error(p: Path, problems: Sequence[GndProblem]) -> None:
    """UserError naming the first error of `problems` (and how many more `mining landmarks check` lists)."""
    errors = [x for x in problems if x.level == "error"]
    if errors:
        check = mining_command("landmarks", "check", p)  # as pasted in a fresh shell
        more = f" (and {len(errors) - 1} more; `{check}` lists them)" if len(errors) > 1 else ""
        raise UserError(f"{p}: {errors[0].message}{more}")
