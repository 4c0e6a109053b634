"""`mining landmarks build`: a new city's ground truth from one CSV table.

The table (UTF-8, a header row; columns in any order, names as below) has one row per image
and what it is for a landmark:

- `image`: the image file, relative to `--images` (default: the table's folder) or absolute; a
  JPEG. Its name in the ground truth is the file's stem (`photos/colosseum_01.jpg` →
  `colosseum_01`), so two files with one stem are refused.
- `landmark`: the landmark's name (empty for `negative`).
- `role`: `query` (a query image: give its box), `easy`, `hard`, `junk` (a database image of
  the landmark, as revisitop labels them) or `negative` (a database image showing none).
- `query` (optional): empty → the label holds for every query of the landmark; a query's image
  (as written in its row) or name → for that query only, replacing the landmark's label there.
- `x1`, `y1`, `x2`, `y2`: a query's box, in pixels of the image as shown (EXIF orientation
  applied); only on query rows. Each side at least `MIN_BOX_SIDE` px once the image is scaled
  to a long side of `MIN_BOX_SCALE` px (describe crops the query from the scaled image and
  drops a crop under 8 px: a smaller box would leave its query out of every score).

The output is revisitop's format (`mining.datasets.landmarks`): OUT/gnd_<name>.pkl with plain lists (read
back by `mining.datasets.gndfile`'s restricted unpickler) and OUT/jpg/<image name>.jpg, copied byte for
byte; queries in table order, the database sorted by name, each query's `landmark` key set.
Every image is decoded whole first (a truncated JPEG is refused), and every bad row is refused
before anything is written, with its file and line. Time and memory are linear in the rows
(benchmarks/landmarks_build.py): the problems keep the first message and a few line numbers.
"""

from __future__ import annotations

import csv
import math
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from mining.files import atomic
from mining.datasets.benchmarks import valid_name
from mining.errors import UserError
from mining.photos.imagedecode import shown_size
from mining.datasets.datasetcheck import CheckReport, check_dataset
from mining.datasets.gndcheck import validate_gnd
from mining.files.plainpaths import plain_name

COLUMNS = ("image", "landmark", "role", "query", "x1", "y1", "x2", "y2")
REQUIRED = ("image", "landmark", "role")
BOX = ("x1", "y1", "x2", "y2")
LABELS = ("easy", "hard", "junk")
ROLES = ("query", *LABELS, "negative")
MIN_BOX_SIDE = 8  # px: describe's smallest query crop (mining.photos.imagedecode.load_image)
MIN_BOX_SCALE = 768  # px: the smallest long side a built-in method describes at (cnn-gem's max_side)
_SHOWN_LINES = 10  # line numbers of further problems named in the message


@dataclass(frozen=True, slots=True)
class Row:
    line: int
    image: str  # as written
    path: Path
    name: str
    landmark: str
    role: str
    query: str  # as written ("" = every query of the landmark)
    box: tuple[float, float, float, float] | None


class _Problems:
    """Every bad row of the table, raised as one line: the first, and which lines hold the others
    (the first message and a few line numbers are kept, whatever the count: memory stays flat)."""
    def __init__(self, table: Path) -> None:
        self.table, self.first, self.lines, self.count = table, None, [], 0

    def add(self, line: int, message: str) -> None:
        if self.first is None:
            self.first = (line, message)
        elif len(self.lines) < _SHOWN_LINES:
            self.lines.append(line)
        self.count += 1

    def raise_any(self) -> None:
        if self.first is None:
            return
        line, msg = self.first
        rest = self.count - 1
        where = f"{self.table} line {line}" if line else str(self.table)
        more = f" (and {rest} more, on lines {', '.join(map(str, self.lines))}" \
               f"{', …' if rest > len(self.lines) else ''})" if rest else ""
        raise UserError(f"{where}: {msg}{more}")


def read_table(table: Path, images: Path | None = None) -> list[Row]:
    """The table's rows, each checked alone (columns, role, image on disk, a query's box inside
    its image); UserError naming the file and line of the first bad one."""


    root = images if images is not None else table.parent
    try:
        with open(table, encoding="utf-8-sig", newline="") as f:
            return _read_rows(table, csv.reader(f), root)
    except FileNotFoundError:
        raise UserError(f"{table}: annotation table not found") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"{table}: not a readable CSV table (UTF-8) ({exc})") from None


def _read_header(table: Path, reader: Any) -> list[str]:
    """The table's column names (lower case), checked: each known, the required ones there, none twice."""
    header = next(reader, None)
    if header is None:
        raise UserError(f"{table}: empty (expected a header row: {', '.join(COLUMNS)})")
    head = [h.strip().lower() for h in header]
    unknown = [h for h in head if h not in COLUMNS]
    missing = [c for c in REQUIRED if c not in head]
    if unknown or missing or len(set(head)) != len(head):
        what = (f"unknown column {unknown[0]!r}" if unknown else f"no column {missing[0]!r}" if missing
                else "a column named twice")
        raise UserError(f"{table} line 1: {what} (the columns are {', '.join(COLUMNS)}; "
                        f"{', '.join(REQUIRED)} are required)")
    return head


def _read_rows(table: Path, reader: Any, root: Path) -> list[Row]:
    problems = _Problems(table)
    head = _read_header(table, reader)
    files: dict[str, tuple[Path, str, tuple[int, int] | str]] = {}  # image as written → (path, name, size or problem)
    rows = []
    for line, values in enumerate(reader, start=2):
        if not any(v.strip() for v in values):
            continue
        if len(values) != len(head):
            problems.add(line, f"{len(values)} fields, the header has {len(head)}")
            continue
        cell = dict(zip(head, map(str.strip, values)))
        image, landmark, role, query = cell["image"], cell["landmark"], cell["role"].lower(), cell.get("query", "")
        if role not in ROLES:
            problems.add(line, f"role {cell['role']!r} is not one of {', '.join(ROLES)}")
            continue
        if not image:
            problems.add(line, "no image")
            continue
        if role == "negative" and (landmark or query):
            problems.add(line, "a negative shows no landmark: leave landmark and query empty")
            continue
        if role != "negative" and not landmark:
            problems.add(line, f"a {role} row needs its landmark")
            continue
        if role == "query" and query:
            problems.add(line, "the query column is for labels of one query; a query row leaves it empty")
            continue
        if image not in files:  # each image looked at once, however many rows name it
            path = Path(image) if Path(image).is_absolute() else root / image
            files[image] = (path, path.stem, _image_size(path) if plain_name(path.stem) else
                            f"its name {path.stem!r} (the file's stem) is not a plain file name (not empty, '.' or "
                            "'..'; no slash, backslash or control character): rename the file")
        path, name, size = files[image]
        if isinstance(size, str):
            problems.add(line, f"image {image}: {size}")
            continue
        box_cells = [cell.get(k, "") for k in BOX]
        box = None
        if role == "query":
            box, msg = _box(box_cells, size, image)
            if msg:
                problems.add(line, msg)
                continue
        elif any(box_cells):
            problems.add(line, "only a query row has a box (x1, y1, x2, y2)")
            continue
        rows.append(Row(line, image, path, name, landmark, role, query, box))
    problems.raise_any()
    return rows


def _image_size(path: Path) -> tuple[int, int] | str:
    """The image's size as shown, or what is wrong with the file. The whole image is decoded
    (at 1/8 scale: every byte of the compressed data is still read), so a truncated or damaged
    JPEG is refused here rather than dropped by describe later."""
    if not path.is_file():
        return f"not found ({path})"
    try:
        with Image.open(path) as im:
            if im.format != "JPEG":
                return f"a {im.format} file, not a JPEG (convert it: the ground truth's images are jpg/<name>.jpg)"
            size = shown_size(im)
            im.draft("RGB", (max(1, im.size[0] // 8), max(1, im.size[1] // 8)))
            im.load()
            return size
    except Exception as exc:  # noqa: BLE001 - any decoder failure is the user's file
        return f"not a readable image ({exc})"


def _box(cells: list[str], size: tuple[int, int], image: str) -> tuple[tuple[float, float, float, float] | None, str]:
    if not all(cells):
        return None, "a query row needs its box: x1, y1, x2, y2 (pixels of the image as shown)"
    try:
        box = tuple(float(v) for v in cells)
    except ValueError:
        return None, f"the box {', '.join(cells)} must be 4 numbers"
    x1, y1, x2, y2 = box
    w, h = size
    if not all(math.isfinite(v) for v in box) or not (x1 < x2 and y1 < y2):
        return None, f"the box [{', '.join(cells)}] must be finite with x1 < x2 and y1 < y2"
    if x1 < 0 or y1 < 0 or x2 > w or y2 > h:
        return None, f"the box [{', '.join(cells)}] reaches outside the {w}×{h} image {image}"
    scale = min(1.0, MIN_BOX_SCALE / max(w, h))
    if min(x2 - x1, y2 - y1) * scale < MIN_BOX_SIDE:
        least = MIN_BOX_SIDE / scale
        return None, (f"the box [{', '.join(cells)}] is {x2 - x1:g}×{y2 - y1:g} px: each side must be at least "
                      f"{least:g} px in this {w}×{h} image ({MIN_BOX_SIDE} px at a long side of {MIN_BOX_SCALE} px, "
                      "the smallest crop describe takes)")
    return box, ""  # type: ignore[return-value]


def ground_truth(table: Path, rows: list[Row]) -> tuple[dict[str, Any], dict[str, Path]]:
    """({imlist, qimlist, gnd}, image name → file) from checked rows; UserError for rows that
    disagree with each other (a duplicate query, one file name for two files, a landmark
    without a query, a query that is not there, one image labelled twice for one query)."""
    problems = _Problems(table)
    files: dict[str, tuple[Path, int]] = {}
    for r in rows:
        seen = files.setdefault(r.name, (r.path, r.line))
        if seen[0] is not r.path and seen[0].resolve() != r.path.resolve():
            problems.add(r.line, f"{r.image} and line {seen[1]}'s image would both be jpg/{r.name}.jpg; rename one")
    queries: dict[str, Row] = {}
    for r in rows:
        if r.role == "query":
            if r.name in queries:
                problems.add(r.line, f"duplicate query: {r.image} is a query on line {queries[r.name].line} already")
            else:
                queries[r.name] = r
    by_written = {q.image: q for q in queries.values()} | queries
    landmarks = {q.landmark for q in queries.values()}
    labels: dict[tuple[str, str, str], Row] = {}  # (image name, landmark, query name or "") → its row
    negatives: dict[str, Row] = {}
    for r in rows:
        if r.role == "query":
            continue
        if r.role == "negative":
            if r.name in negatives:
                problems.add(r.line, f"{r.image} is a negative on line {negatives[r.name].line} already")
            negatives.setdefault(r.name, r)
            continue
        if r.landmark not in landmarks:
            problems.add(r.line, f"unknown landmark {r.landmark!r}: no query row names it")
            continue
        q = by_written.get(r.query) if r.query else None
        if r.query and q is None:
            problems.add(r.line, f"unknown query {r.query!r}: no query row has that image")
            continue
        if q is not None and q.landmark != r.landmark:
            problems.add(r.line, f"query {r.query!r} is of landmark {q.landmark!r}, not {r.landmark!r}")
            continue
        key = (r.name, r.landmark, q.name if q else "")
        if key in labels:
            first = labels[key]
            problems.add(r.line, f"{r.image} is labelled for {r.landmark!r}" + (f" (query {r.query})" if q else "")
                         + f" on line {first.line} already ({first.role})")
            continue
        labels[key] = r
    for (name, lm, _), r in labels.items():
        if name in negatives:
            problems.add(negatives[name].line, f"{negatives[name].image} is a negative but line {r.line} makes it "
                                               f"{r.role} for {lm!r}")
    _queries_labelled_against(rows, queries, problems)
    if not queries:
        problems.add(0, "no query rows (role query, with its box): a benchmark needs queries")
    problems.raise_any()
    return _gnd(queries, labels, negatives), {n: p for n, (p, _) in files.items()}


def _gnd(queries: dict[str, Row], labels: dict[tuple[str, str, str], Row], negatives: dict[str, Row]) -> dict[str, Any]:
    """{imlist, qimlist, gnd} of the checked rows: each query's labels are its landmark's, those
    for it alone replacing them."""
    imlist = sorted({name for name, _, _ in labels} | set(negatives))
    index = {n: i for i, n in enumerate(imlist)}
    per_landmark: dict[str, dict[str, str]] = {}  # landmark → image name → role (labels for all its queries)
    per_query: dict[str, dict[str, str]] = {}  # query name → image name → role (labels for it alone)
    for (name, lm, only), r in labels.items():
        (per_query.setdefault(only, {}) if only else per_landmark.setdefault(lm, {}))[name] = r.role
    gnd = []
    for q in queries.values():
        role = per_landmark.get(q.landmark, {}) | per_query.get(q.name, {})
        g: dict[str, Any] = {"bbx": list(q.box or ())}
        for label in LABELS:
            g[label] = sorted(index[n] for n, lab in role.items() if lab == label)
        g["landmark"] = q.landmark
        gnd.append(g)
    return {"imlist": imlist, "qimlist": list(queries), "gnd": gnd}


def _queries_labelled_against(rows: list[Row], queries: dict[str, Row], problems: _Problems) -> None:
    """A query's image shows its landmark: the same image as a negative (it shows none) or as junk
    of that landmark (too little of it to tell) contradicts the query row."""
    for r in rows:
        q = queries.get(r.name)
        if q is None or r is q or not (r.role == "negative" or (r.role == "junk" and r.landmark == q.landmark)):
            continue
        what = "a negative (it shows no landmark)" if r.role == "negative" else f"junk for {q.landmark!r}"
        problems.add(r.line, f"{r.image} is the query of {q.landmark!r} on line {q.line}, so it shows {q.landmark!r}; "
                             f"it cannot also be {what}: remove this row or choose another query image")


def build_landmarks(table: str | Path, out: str | Path, name: str | None = None,
                    images: str | Path | None = None) -> tuple[Path, CheckReport]:
    """Write OUT/jpg/ and OUT/gnd_<name>.pkl (name: OUT's folder name by default) from the table;
    (the gnd file, `check_dataset`'s report on it)."""
    table, out = Path(table), Path(out)
    name = out.resolve().name if name is None else name
    gnd_path = out / f"gnd_{name}.pkl"
    if not valid_name(name):  # a name the manifest and a run's folders take
        raise UserError(f"benchmark name {name!r}: 1-64 letters, digits, '_', '.' or '-', starting with a "
                        "letter or digit (give --name)")
    other = sorted(p.name for p in out.glob("gnd_*.pkl") if p != gnd_path) if out.is_dir() else []
    if other:
        raise UserError(f"{out} already holds {other[0]}: one landmark dataset per folder (choose another --out)")
    data, files = ground_truth(table, read_table(table, Path(images) if images is not None else None))
    errors = [x for x in validate_gnd(data) if x.level == "error"]  # what the check below would refuse
    if errors:
        raise UserError(f"{table}: {errors[0].message}; nothing was written")
    jpgs = {f"jpg/{image_name}.jpg": src for image_name, src in sorted(files.items())}
    # all or nothing (a full disk leaves no image and no gnd file, an old build whole); the gnd file last
    with atomic.output_folder(out), atomic.output_folder(out / "jpg"), \
            atomic.files_together(out, [*jpgs, gnd_path.name]) as tmp:
        for rel, src in jpgs.items():
            tmp[rel].write_bytes(src.read_bytes())
        tmp[gnd_path.name].write_bytes(pickle.dumps(data, protocol=4))
    return gnd_path, check_dataset(gnd_path)
