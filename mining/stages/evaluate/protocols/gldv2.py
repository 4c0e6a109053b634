"""Google Landmarks v2: retrieval (mAP@100) and recognition (GAP) from the Kaggle CSV files."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from mining.errors import UserError
from mining.stages.evaluate.protocols.ranking import index_ranks, names_of
from mining.stages.evaluate.protocols.readers import Results, read_name_list, read_text
from mining.stages.evaluate.protocols.report import finite_or_none


GLDV2_K = 100


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


def evaluate(gt: Path, res: Results, setups: Sequence[str] = ()) -> dict[str, Any]:
    header = read_text(gt).partition("\n")[0]
    task = "recognition" if "landmarks" in next(csv.reader([header]), []) else "retrieval"
    sol = read_gldv2_solution(gt, "landmarks" if task == "recognition" else "images")
    if task == "recognition":
        if res.ranks is None or res.ranks.suffix != ".csv":
            raise UserError("a recognition solution (id,landmarks,Usage) is scored from a predictions CSV "
                            "(id,landmarks = '<label> <confidence>') given as --ranks")
        gap = gldv2_gap(read_gldv2_recognition_predictions(res.ranks), sol)
        return {"variant": "recognition", "queries": len(sol), "metrics": {"recognition": {"GAP": finite_or_none(gap)}}}
    if res.ranks is not None and res.ranks.suffix == ".csv":
        pred = read_gldv2_retrieval_predictions(res.ranks)
    else:
        if res.imlist is None or res.qimlist is None:
            raise UserError("--imlist (index image ids) and --qimlist (test image ids), one a line in row "
                            "order, are needed with .npy ranks or descriptors")
        dbnames = read_name_list(res.imlist, "index image ids")
        qnames = read_name_list(res.qimlist, "test image ids")
        pred = names_of(index_ranks(res, qnames, len(dbnames), GLDV2_K), qnames, dbnames, res.ranks)
    scored = sum(1 for v in sol.values() if v)
    return {"variant": "retrieval", "queries": scored,
            "metrics": {"retrieval": {f"mAP@{GLDV2_K}": finite_or_none(gldv2_map_at_k(pred, sol, GLDV2_K))}}}
