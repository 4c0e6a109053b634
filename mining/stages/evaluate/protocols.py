"""Evaluation protocols (protocols.md): revisited setups, original Oxford, GLDv2, Holidays, UKBench.

Why here: each benchmark has its own ground-truth files and small rules (what is ignored,
what a missing query means); they all end in the same trapezoid AP from `metrics`.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from mining.errors import UserError
from mining.metrics import compute_ap, compute_map
from mining.landmarks import load_gnd

SETUPS = ("easy", "medium", "hard")
# setup -> (gnd keys that are positive, gnd keys that are ignored)
_SETUP_KEYS = {
    "easy": (("easy",), ("junk", "hard")),
    "medium": (("easy", "hard"), ("junk",)),
    "hard": (("hard",), ("junk", "easy")),
}


def _ints(g: Mapping[str, Any], keys: Iterable[str]) -> np.ndarray:
    parts = [np.asarray(g.get(k, []), dtype=np.int64).ravel() for k in keys]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def setup_gnd(gnd: Sequence[Mapping[str, Any]], setup: str) -> list[dict[str, np.ndarray]]:
    """revisitop's `{'ok', 'junk'}` per query for setup easy / medium / hard."""
    if setup not in _SETUP_KEYS:
        raise UserError(f"unknown setup {setup!r} (choose from {', '.join(SETUPS)})")
    pos_keys, junk_keys = _SETUP_KEYS[setup]
    return [{"ok": _ints(g, pos_keys), "junk": _ints(g, junk_keys)} for g in gnd]


# ----------------------------------------------------------------------------- original Oxford
@dataclass(frozen=True)
class OxfordQuery:
    """One query of the original Oxford/Paris protocol (gt_files folder)."""

    name: str  # e.g. all_souls_1
    image: str  # e.g. all_souls_000013 (the `oxc1_` prefix removed)
    bbox: tuple[float, float, float, float]
    good: frozenset[str]
    ok: frozenset[str]
    junk: frozenset[str]

    @property
    def positives(self) -> frozenset[str]:
        return self.good | self.ok


def _names(path: Path) -> frozenset[str]:
    if not path.is_file():
        raise UserError(f"{path}: missing (each query needs _good, _ok, _junk and _query files)")
    return frozenset(line.strip() for line in path.read_text().splitlines() if line.strip())


def load_oxford_gt(folder: str | Path) -> list[OxfordQuery]:
    """All queries of a `<query>_{good,ok,junk,query}.txt` folder, sorted by name."""
    root = Path(folder)
    files = sorted(root.glob("*_query.txt"))
    if not files:
        raise UserError(f"{root}: no *_query.txt files (expected the original Oxford gt_files)")
    out = []
    for f in files:
        name = f.name[: -len("_query.txt")]
        parts = f.read_text().split()
        if len(parts) != 5:
            raise UserError(f"{f}: expected `oxc1_<image> x1 y1 x2 y2`, got {' '.join(parts)!r}")
        try:
            bbox = tuple(float(v) for v in parts[1:])
        except ValueError:
            raise UserError(f"{f}: bbox values are not numbers: {' '.join(parts[1:])!r}") from None
        image = re.sub(r"^oxc1_", "", parts[0])
        out.append(OxfordQuery(name, image, bbox,  # type: ignore[arg-type]
                               _names(root / f"{name}_good.txt"), _names(root / f"{name}_ok.txt"),
                               _names(root / f"{name}_junk.txt")))
    return out


def oxford_gnd(queries: Sequence[OxfordQuery], imlist: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """revisitop-style `{'ok', 'junk'}` indices into imlist (good ∪ ok positive, junk ignored)."""
    index = {n: i for i, n in enumerate(imlist)}
    out = []
    for q in queries:
        unknown = sorted((q.positives | q.junk) - index.keys())
        if unknown:
            raise UserError(f"{q.name}: {len(unknown)} ground-truth images are not in the image list (e.g. {unknown[0]!r})")
        out.append({"ok": np.array(sorted(index[n] for n in q.positives), np.int64),
                    "junk": np.array(sorted(index[n] for n in q.junk - q.positives), np.int64)})
    return out


def oxford_map(queries: Sequence[OxfordQuery], ranked: Mapping[str, Sequence[str]]) -> tuple[float, dict[str, float]]:
    """Original-protocol mAP from ranked image names per query name; a missing query is refused."""
    missing = [q.name for q in queries if q.name not in ranked]
    if missing:
        raise UserError(f"results omit {len(missing)} queries (e.g. {missing[0]!r})")
    aps = {}
    for q in queries:
        names = list(dict.fromkeys(ranked[q.name]))  # a name returned twice takes its first rank
        imlist = sorted(set(names) | q.positives | q.junk)
        index = {n: i for i, n in enumerate(imlist)}
        ranks = np.array([index[n] for n in names], np.int64)[:, None]
        _, ap, _, _ = compute_map(ranks, oxford_gnd([q], imlist))
        aps[q.name] = float(ap[0])
    return float(np.mean(list(aps.values()))), aps


# ----------------------------------------------------------------------------- Google Landmarks v2
def _read_csv(path: str | Path, needed: Sequence[str]) -> list[dict[str, str]]:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: not found")
    try:
        with open(p, newline="") as f:
            rows = list(csv.DictReader(f))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"{p}: not a readable CSV file ({exc})") from None
    cols = set(rows[0].keys()) if rows else set()
    for c in needed:
        if rows and c not in cols:
            raise UserError(f"{p}: missing column {c!r}")
    return rows


def _ids(text: str | None) -> list[str]:
    toks = (text or "").split()
    return [] if toks in ([], ["None"]) else toks


def read_gldv2_solution(path: str | Path, column: str) -> dict[str, list[str]]:
    """GLDv2 solution CSV (`id,<images|landmarks>,Usage`); rows with Usage `Ignored` are dropped."""
    return {r["id"]: _ids(r[column]) for r in _read_csv(path, ["id", column]) if r.get("Usage", "") != "Ignored"}


def read_gldv2_retrieval_predictions(path: str | Path) -> dict[str, list[str]]:
    """Retrieval submission CSV `id,images` (space-separated index ids, best first)."""
    return {r["id"]: _ids(r["images"]) for r in _read_csv(path, ["id", "images"])}


def read_gldv2_recognition_predictions(path: str | Path) -> dict[str, tuple[str, float]]:
    """Recognition submission CSV `id,landmarks` with `landmarks` = "<label> <confidence>" (or empty)."""
    out = {}
    for r in _read_csv(path, ["id", "landmarks"]):
        toks = (r["landmarks"] or "").split()
        if not toks:
            continue
        if len(toks) != 2:
            raise UserError(f"{path}: query {r['id']}: expected '<label> <confidence>', got {r['landmarks']!r}")
        try:
            out[r["id"]] = (toks[0], float(toks[1]))
        except ValueError:
            raise UserError(f"{path}: query {r['id']}: confidence {toks[1]!r} is not a number") from None
    return out


def gldv2_map_at_k(predictions: Mapping[str, Sequence[str]], solution: Mapping[str, Sequence[str]], k: int = 100) -> float:
    """mAP@k over the queries with at least one relevant index image (a missing prediction scores 0)."""
    aps = []
    for qid, relevant in solution.items():
        rel = set(relevant)
        if not rel:
            continue
        pred = list(predictions.get(qid, []))[:k]
        hits = np.array([p in rel for p in pred], dtype=np.float64)
        prec = np.cumsum(hits) / np.arange(1, hits.size + 1) if hits.size else hits
        aps.append(float((prec * hits).sum()) / min(len(rel), k))
    return float(np.mean(aps)) if aps else float("nan")


def gldv2_gap(predictions: Mapping[str, tuple[str, float]], solution: Mapping[str, Sequence[str]]) -> float:
    """Micro AP (GAP): predictions sorted by confidence; out-of-domain predictions count against precision.

    M = number of queries that show a landmark; predictions for ids outside the solution
    (e.g. Ignored rows) are left out.
    """
    m = sum(1 for labels in solution.values() if labels)
    if m == 0:
        return float("nan")
    preds = [(qid, lab, conf) for qid, (lab, conf) in predictions.items() if qid in solution]
    preds.sort(key=lambda t: -t[2])  # stable: equal confidences keep file order
    rel = np.array([lab in set(solution[qid]) for qid, lab, _ in preds], dtype=np.float64)
    if rel.size == 0:
        return 0.0
    prec = np.cumsum(rel) / np.arange(1, rel.size + 1)
    return float((prec * rel).sum() / m)


# ----------------------------------------------------------------------------- INRIA Holidays
def holidays_groups(images: Iterable[str]) -> dict[str, list[str]]:
    """Query image → its positives: images `GGGGNN.jpg` share group GGGG; the first is the query."""
    groups: dict[int, list[str]] = {}
    for name in images:
        stem = Path(name).stem
        if not stem.isdigit():
            raise UserError(f"{name}: Holidays image names are numbers like 100000.jpg")
        groups.setdefault(int(stem) // 100, []).append(name)
    out = {}
    for members in groups.values():
        members = sorted(members, key=lambda n: int(Path(n).stem))
        out[members[0]] = members[1:]
    return out


def read_holidays_results(path: str | Path) -> dict[str, list[str]]:
    """Holidays result file: `query.jpg rank1 image1 rank2 image2 ...` per line, ranks 0-based."""
    out = {}
    for n, line in enumerate(_text(Path(path)).splitlines(), 1):
        toks = line.split()
        if not toks:
            continue
        if len(toks) % 2 != 1 or not all(t.isdigit() for t in toks[1::2]):
            raise UserError(f"{path}:{n}: expected `query rank image rank image ...` (ranks 0, 1, 2, ...)")
        if toks[0] in out:
            raise UserError(f"{path}:{n}: query {toks[0]!r} has a second line")
        pairs = sorted(((int(toks[i]), toks[i + 1]) for i in range(1, len(toks), 2)), key=lambda t: t[0])
        out[toks[0]] = [name for _, name in pairs]
    if not out:
        raise UserError(f"{path}: empty (expected `query rank image rank image ...` lines)")
    return out


def holidays_map(results: Mapping[str, Sequence[str]], groups: Mapping[str, Sequence[str]]) -> float:
    """Holidays mAP: the query itself is ignored if returned; a result set omitting a query is refused."""
    missing = [q for q in groups if q not in results]
    if missing:
        raise UserError(f"results omit {len(missing)} of {len(groups)} queries (e.g. {missing[0]!r})")
    aps = []
    for q, positives in groups.items():
        names = [n for n in dict.fromkeys(results[q]) if n != q]
        pos = set(positives)
        ranks = np.flatnonzero([n in pos for n in names])
        aps.append(compute_ap(ranks, len(pos)) if pos else float("nan"))
    valid = [a for a in aps if np.isfinite(a)]
    return float(np.mean(valid)) if valid else float("nan")


# ----------------------------------------------------------------------------- UKBench
def ukbench_score(top: np.ndarray) -> float:
    """Mean number of the query's object's 4 images (query included) among its top 4, 0 to 4.

    `top[i]` holds image indices ranked for query image i; image i shows object i // 4.
    """
    top = np.asarray(top)
    if top.ndim != 2 or top.shape[1] < 4 or top.shape[0] % 4:
        raise UserError(f"UKBench results must be (4·objects, ≥4) image indices, got shape {top.shape}")
    obj = np.arange(top.shape[0]) // 4
    return float((top[:, :4] // 4 == obj[:, None]).sum(axis=1).mean())


# ----------------------------------------------------------------------------- a user's own results
# `mining evaluate --protocol P --gt GT (--ranks R | --queries Q.npy --database X.npy)`: the
# protocols above on rankings or descriptors made outside this project. Index forms (.npy)
# use revisitop's layout: ranks[:, j] are query j's 0-based database indices, best first.
PROTOCOLS = ("oxford", "gldv2", "holidays", "ukbench")
KAPPAS = (1, 5, 10)
GLDV2_K = 100
_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".tif", ".tiff", ".webp"}
_RANK_CELLS = 1 << 24  # similarity cells sorted at once when ranking descriptors


@dataclass(frozen=True)
class Results:
    """Where a user's results are: `ranks` (.npy or the protocol's text/CSV form) or descriptors."""

    ranks: Path | None = None
    queries: Path | None = None  # .npy, one row per query
    database: Path | None = None  # .npy, one row per database image
    imlist: Path | None = None  # database image names, one a line (row/index order)
    qimlist: Path | None = None  # query names, one a line (row/column order)


def _load_npy(path: Path, what: str) -> np.ndarray:
    if not path.is_file():
        raise UserError(f"{path}: {what} not found")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - any failure to read is the user's file
        raise UserError(f"{path}: not a readable .npy array ({exc})") from None
    if not isinstance(arr, np.ndarray):
        raise UserError(f"{path}: expected one .npy array, not an archive")
    return arr


def read_name_list(path: Path, what: str) -> list[str]:
    """Non-empty lines of a text file (one name a line), refused if empty or repeated."""
    if not path.is_file():
        raise UserError(f"{path}: {what} not found")
    try:
        lines = [(n, line.strip()) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file ({what}: one name a line)") from None
    if not lines:
        raise UserError(f"{path}: empty ({what}: one name a line)")
    seen: set[str] = set()
    for n, name in lines:
        if name in seen:
            raise UserError(f"{path}:{n}: {name!r} is listed twice")
        seen.add(name)
    return [name for _, name in lines]


def read_ranks(path: Path, n_queries: int) -> np.ndarray:
    """A (list length, n_queries) integer .npy of 0-based database indices, best first per column."""
    arr = _load_npy(path, "ranks")
    if arr.ndim != 2 or arr.shape[1] != n_queries:
        raise UserError(f"{path}: ranks must have shape (list length, {n_queries} queries): column j holds "
                        f"query j's database indices, best first; got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise UserError(f"{path}: ranks must hold integer database indices, not {arr.dtype}")
    arr = np.asarray(arr, dtype=np.int64)
    if arr.size and arr.min() < 0:
        raise UserError(f"{path}: negative database index {int(arr.min())}")
    srt = np.sort(arr, axis=0)
    dup = np.argwhere(srt[1:] == srt[:-1])
    if dup.size:
        r, j = (int(v) for v in dup[0])
        raise UserError(f"{path}: query column {j} lists database index {int(srt[r, j])} twice")
    return arr


def _descriptors(path: Path, what: str, dim: int | None = None) -> np.ndarray:
    arr = _load_npy(path, what)
    if arr.ndim != 2 or arr.shape[0] == 0 or (dim is not None and arr.shape[1] != dim):
        want = f"(rows, {dim})" if dim is not None else "(rows, dimensions)"
        raise UserError(f"{path}: {what} must be a non-empty {want} array, got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise UserError(f"{path}: {what} must be numbers, not {arr.dtype}")
    out = np.asarray(arr, dtype=np.float64 if arr.dtype == np.float64 else np.float32)
    if not np.isfinite(out).all():
        raise UserError(f"{path}: {what} hold NaN or infinite values")
    return out


def rank_by_similarity(queries: np.ndarray, database: np.ndarray, k: int | None = None) -> np.ndarray:
    """(k or all, n queries) database indices by decreasing dot product; equal scores keep index order."""
    n = database.shape[0]
    k = n if k is None else min(k, n)
    out = np.empty((k, queries.shape[0]), dtype=np.int64)
    block = max(1, _RANK_CELLS // max(n, 1))
    for a in range(0, queries.shape[0], block):
        sim = queries[a : a + block] @ database.T  # one contiguous row per query: faster to sort
        out[:, a : a + block] = np.argsort(-sim, axis=1, kind="stable")[:, :k].T
    return out


def _index_ranks(res: Results, qnames: Sequence[str], n_db: int, k: int | None,
                 query_rows: Sequence[int] | None = None, distractors: bool = False) -> np.ndarray:
    """ranks (list length, len(qnames)) from a .npy or from descriptors.

    n_db: the number of database rows the descriptors must have (with `distractors`: at
    least, the rows past it being distractors). query_rows: database rows that are the
    queries, used when no --queries file is given (Holidays, UKBench: every query is a
    database image).
    """
    if res.ranks is not None:
        ranks = read_ranks(res.ranks, len(qnames))
        return ranks if k is None else ranks[:k]
    assert res.database is not None  # evaluate_protocol asks for ranks or descriptors
    x = _descriptors(res.database, "database descriptors")
    if x.shape[0] < n_db or (x.shape[0] > n_db and not distractors):
        raise UserError(f"{res.database}: {x.shape[0]} database rows, but the image list has {n_db} images"
                        + (" (rows in imlist order, then any distractors)" if distractors else ""))
    if res.queries is not None:
        q = _descriptors(res.queries, "query descriptors", x.shape[1])
        if q.shape[0] != len(qnames):
            raise UserError(f"{res.queries}: {q.shape[0]} query rows, but there are {len(qnames)} queries")
    elif query_rows is not None:
        q = x[np.asarray(query_rows, dtype=np.int64)]
    else:
        raise UserError("--queries (query descriptors, .npy) is needed with --database")
    return rank_by_similarity(q, x.astype(q.dtype, copy=False), k)


def _names_of(ranks: np.ndarray, qnames: Sequence[str], dbnames: Sequence[str], src: Path | None) -> dict[str, list[str]]:
    if ranks.size and int(ranks.max()) >= len(dbnames):
        raise UserError(f"{src or 'ranks'}: database index {int(ranks.max())} is beyond the "
                        f"{len(dbnames)} images of the image list")
    names = np.asarray(list(dbnames), dtype=object)
    return {q: names[ranks[:, j]].tolist() for j, q in enumerate(qnames)}


def read_ranked_lists(path: Path) -> dict[str, list[str]]:
    """Ranked image names per query: a folder of `<query>.txt` files (one name a line, best
    first: the original Oxford `compute_ap` input), or one file of `QUERY NAME NAME ...` lines."""
    if path.is_dir():
        files = sorted(path.glob("*.txt"))
        if not files:
            raise UserError(f"{path}: no <query>.txt ranked lists")
        return {f.stem: _text(f).split() for f in files}
    out: dict[str, list[str]] = {}
    for n, line in enumerate(_text(path).splitlines(), 1):
        toks = line.split()
        if not toks:
            continue
        if toks[0] in out:
            raise UserError(f"{path}:{n}: query {toks[0]!r} has a second line "
                            "(expected one `QUERY NAME NAME ...` line per query, best first)")
        out[toks[0]] = toks[1:]
    if not out:
        raise UserError(f"{path}: empty (expected `QUERY NAME NAME ...` lines, best first)")
    return out


def _text(path: Path) -> str:
    if not path.is_file():
        raise UserError(f"{path}: {'a folder, not a file' if path.is_dir() else 'not found'}")
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file") from None


def image_names(gt: Path) -> list[str]:
    """Image names of a Holidays / UKBench ground truth: its image folder, or a list (one a line)."""
    if gt.is_dir():
        names = sorted(p.name for p in gt.iterdir() if p.suffix.lower() in _IMAGE_SUFFIXES)
        if not names:
            raise UserError(f"{gt}: no images (expected the benchmark's image folder)")
        return names
    return read_name_list(gt, "image list")


def _number(name: str, pattern: str, example: str) -> int:
    m = re.fullmatch(pattern, Path(name).stem)
    if not m:
        raise UserError(f"{name}: expected image names like {example}")
    return int(m.group(1))


def _pct(v: float) -> float | None:
    return None if not np.isfinite(v) else float(v)


def _evaluate_oxford(gt: Path, res: Results, setups: Sequence[str] = SETUPS) -> dict[str, Any]:
    if gt.is_dir() and any(gt.glob("*_query.txt")):
        return _evaluate_oxford_original(gt, res)
    if res.imlist is not None or res.qimlist is not None:
        raise UserError("--imlist/--qimlist are not used with a gnd file: it holds its own imlist and qimlist")
    data = load_gnd(gt)
    qnames, imlist = list(data["qimlist"]), list(data["imlist"])
    if res.ranks is not None and res.ranks.suffix != ".npy":
        raise UserError(f"{res.ranks}: with a gnd file, ranks are a .npy (revisitop's layout)")
    ranks = _index_ranks(res, qnames, len(imlist), None, distractors=True)
    metrics, per_query = {}, {}
    for setup in setups:
        m, aps, pr, _ = compute_map(ranks, setup_gnd(data["gnd"], setup), KAPPAS)
        metrics[setup] = {"mAP": _pct(m), **{f"mP@{k}": _pct(float(p)) for k, p in zip(KAPPAS, pr)}}
        per_query[setup] = {q: _pct(float(a)) for q, a in zip(qnames, aps)}
    return {"variant": "revisited", "queries": len(qnames), "images": len(imlist), "metrics": metrics,
            "per_query": per_query}


def _evaluate_oxford_original(gt: Path, res: Results) -> dict[str, Any]:
    queries = load_oxford_gt(gt)
    if res.ranks is not None and res.ranks.suffix != ".npy":
        ranked = read_ranked_lists(res.ranks)
    else:
        if res.imlist is None:
            raise UserError("--imlist (database image names, one a line, in index order) is needed "
                            "with .npy ranks or descriptors and an original gt_files folder")
        dbnames = read_name_list(res.imlist, "image list")
        qnames = read_name_list(res.qimlist, "query list") if res.qimlist else [q.name for q in queries]
        ranked = _names_of(_index_ranks(res, qnames, len(dbnames), None), qnames, dbnames, res.ranks)
    m, aps = oxford_map(queries, ranked)
    return {"variant": "original", "queries": len(queries), "metrics": {"original": {"mAP": m}},
            "per_query": {"original": aps}}


def _evaluate_gldv2(gt: Path, res: Results) -> dict[str, Any]:
    header = _text(gt).partition("\n")[0]
    task = "recognition" if "landmarks" in next(csv.reader([header]), []) else "retrieval"
    sol = read_gldv2_solution(gt, "landmarks" if task == "recognition" else "images")
    if task == "recognition":
        if res.ranks is None or res.ranks.suffix != ".csv":
            raise UserError("a recognition solution (id,landmarks,Usage) is scored from a predictions CSV "
                            "(id,landmarks = '<label> <confidence>') given as --ranks")
        gap = gldv2_gap(read_gldv2_recognition_predictions(res.ranks), sol)
        return {"variant": "recognition", "queries": len(sol), "metrics": {"recognition": {"GAP": _pct(gap)}}}
    if res.ranks is not None and res.ranks.suffix == ".csv":
        pred = read_gldv2_retrieval_predictions(res.ranks)
    else:
        if res.imlist is None or res.qimlist is None:
            raise UserError("--imlist (index image ids) and --qimlist (test image ids), one a line in row "
                            "order, are needed with .npy ranks or descriptors")
        dbnames = read_name_list(res.imlist, "index image ids")
        qnames = read_name_list(res.qimlist, "test image ids")
        pred = _names_of(_index_ranks(res, qnames, len(dbnames), GLDV2_K), qnames, dbnames, res.ranks)
    scored = sum(1 for v in sol.values() if v)
    return {"variant": "retrieval", "queries": scored,
            "metrics": {"retrieval": {f"mAP@{GLDV2_K}": _pct(gldv2_map_at_k(pred, sol, GLDV2_K))}}}


def _evaluate_holidays(gt: Path, res: Results) -> dict[str, Any]:
    images = sorted(image_names(gt), key=lambda n: _number(n, r"(\d+)", "100000.jpg"))
    groups = holidays_groups(images)
    if res.ranks is not None and res.ranks.suffix != ".npy":
        results = read_holidays_results(res.ranks)
    else:
        dbnames = read_name_list(res.imlist, "image list") if res.imlist else images
        qnames = read_name_list(res.qimlist, "query list") if res.qimlist else list(groups)
        rows = _rows_of(qnames, dbnames) if res.queries is None else None
        results = _names_of(_index_ranks(res, qnames, len(dbnames), None, rows), qnames, dbnames, res.ranks)
    return {"variant": "holidays", "queries": len(groups), "images": len(images),
            "metrics": {"holidays": {"mAP": _pct(holidays_map(results, groups))}}}


def _rows_of(qnames: Sequence[str], dbnames: Sequence[str]) -> list[int]:
    index = {n: i for i, n in enumerate(dbnames)}
    missing = [q for q in qnames if q not in index]
    if missing:
        raise UserError(f"query {missing[0]!r} is not in the database images (give --queries descriptors)")
    return [index[q] for q in qnames]


def ukbench_objects(images: Iterable[str]) -> dict[str, int]:
    """Image name → object (`ukbenchNNNNN.jpg` shows object NNNNN // 4), every object with 4 images."""
    obj = {n: _number(n, r"ukbench(\d+)", "ukbench00000.jpg") // 4 for n in images}
    sizes: dict[int, int] = {}
    for o in obj.values():
        sizes[o] = sizes.get(o, 0) + 1
    bad = sorted(o for o, s in sizes.items() if s != 4)
    if bad:
        raise UserError(f"UKBench object {bad[0]} has {sizes[bad[0]]} images (each object has 4: "
                        "ukbench{4k..4k+3}.jpg)")
    return obj


def ukbench_counts(results: Mapping[str, Sequence[str]], obj: Mapping[str, int]) -> dict[str, int]:
    """Per query image: how many of its object's 4 images (itself included) are in its top 4."""
    images = list(obj)
    missing = [q for q in images if q not in results]
    if missing:
        raise UserError(f"results omit {len(missing)} of {len(images)} queries (e.g. {missing[0]!r})")
    out = {}
    for q in images:
        top = list(dict.fromkeys(results[q]))[:4]
        if len(top) < 4:
            raise UserError(f"query {q!r}: {len(top)} results, the score needs the top 4")
        unknown = [n for n in top if n not in obj]
        if unknown:
            raise UserError(f"query {q!r}: {unknown[0]!r} is not a UKBench image of the ground truth")
        out[q] = sum(obj[n] == obj[q] for n in top)
    return out


def _evaluate_ukbench(gt: Path, res: Results) -> dict[str, Any]:
    obj = ukbench_objects(image_names(gt))
    images = sorted(obj, key=lambda n: _number(n, r"ukbench(\d+)", "ukbench00000.jpg"))
    if res.ranks is not None and res.ranks.suffix != ".npy":
        results = read_ranked_lists(res.ranks)
    else:
        dbnames = read_name_list(res.imlist, "image list") if res.imlist else images
        qnames = read_name_list(res.qimlist, "query list") if res.qimlist else images
        rows = _rows_of(qnames, dbnames) if res.queries is None else None
        results = _names_of(_index_ranks(res, qnames, len(dbnames), 4, rows), qnames, dbnames, res.ranks)
    counts = ukbench_counts(results, {n: obj[n] for n in images})
    return {"variant": "ukbench", "queries": len(images), "metrics": {"ukbench": {"4-score": float(np.mean(list(counts.values())))}},
            "per_query": {"ukbench": counts}}


def evaluate_protocol(protocol: str, gt: str | Path, res: Results, setups: Sequence[str] = SETUPS) -> dict[str, Any]:
    """One benchmark's metrics on a user's own results; JSON-ready (nan → None).

    setups: the revisited setups reported for a gnd ground truth (default Easy, Medium, Hard).
    """
    evaluators = {"oxford": lambda g, r: _evaluate_oxford(g, r, setups), "gldv2": _evaluate_gldv2,
                  "holidays": _evaluate_holidays, "ukbench": _evaluate_ukbench}
    if protocol not in evaluators:
        raise UserError(f"unknown protocol {protocol!r} (choose from {', '.join(PROTOCOLS)})")
    gt = Path(gt)
    if not gt.exists():
        raise UserError(f"{gt}: ground truth not found")
    if res.ranks is not None and (res.queries is not None or res.database is not None):
        raise UserError("give --ranks or descriptors (--queries/--database), not both")
    if res.ranks is None and res.database is None:
        raise UserError("give --ranks (your rankings) or --database (and --queries) descriptors")
    if res.queries is not None and res.database is None:
        raise UserError("--queries needs --database (the database descriptors)")
    return {"protocol": protocol, "ground_truth": str(gt), **evaluators[protocol](gt, res)}


def protocol_table(report: Mapping[str, Any]) -> str:
    """The report as a Markdown table: rates in % (2 decimals), the UKBench score as 0–4."""
    rows = report["metrics"]
    cols = list(next(iter(rows.values())))
    head = f"{report['protocol']} ({report['variant']}, {report['queries']} queries)"

    def cell(name: str, v: float | None) -> str:
        if v is None:
            return "n/a"
        return f"{v:.3f}" if name == "4-score" else f"{100 * v:.2f}"

    first = "setup" if report["variant"] == "revisited" else "benchmark"
    lines = [head, "", "| " + " | ".join([first, *cols]) + " |", "|" + "---|" * (1 + len(cols))]
    lines += ["| " + " | ".join([name, *(cell(c, vals[c]) for c in cols)]) + " |" for name, vals in rows.items()]
    return "\n".join(lines)
