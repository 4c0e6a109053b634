"""`mining landmarks check`: a landmark dataset validated completely — the gnd file's structure
(`mining.datasets.gndcheck`), the images on disk and the landmark grouping — with every problem
collected, not raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from mining.datasets.gndcheck import GndProblem, raise_first_error, validate_gnd
from mining.datasets.gndfile import read_gnd
from mining.datasets.grouping import find_landmarks
from mining.datasets.landmarks import LandmarkDataset, find_gnd_file
from mining.photos.imagedecode import shown_size


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
        raise_first_error(Path(path), self.problems)


def check_dataset(path: str | Path, images: bool = True) -> CheckReport:
    """Validate a landmark dataset completely (structure, images on disk, grouping) and find its landmarks.

    Problems are collected, not raised; only a file that cannot be read at all raises UserError.
    """
    p = find_gnd_file(path)
    data = read_gnd(p)
    problems = validate_gnd(data)
    if not isinstance(data, dict) or any(x.level == "error" and x.key in (None, "imlist", "qimlist", "gnd")
                                         for x in problems):
        return CheckReport(problems=problems)
    rep = CheckReport(queries=len(data["qimlist"]), database=len(data["imlist"]), problems=problems)
    if rep.errors:
        return rep  # grouping needs valid indices
    ds = LandmarkDataset.from_gnd(p, data)
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
