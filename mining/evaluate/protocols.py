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
from mining.evaluate.metrics import compute_ap, compute_map

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
    with open(p, newline="") as f:
        rows = list(csv.DictReader(f))
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
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        toks = line.split()
        if not toks:
            continue
        if len(toks) % 2 != 1:
            raise UserError(f"{path}:{n}: expected `query rank image rank image ...`")
        pairs = sorted(((int(toks[i]), toks[i + 1]) for i in range(1, len(toks), 2)), key=lambda t: t[0])
        out[toks[0]] = [name for _, name in pairs]
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
