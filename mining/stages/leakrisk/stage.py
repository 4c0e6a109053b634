"""Leak risk: how likely each candidate is to show a landmark, beyond the reviewed queue.

Why: the review queue holds the top K of each landmark by the distractor score, which
measures how many *positives a query* a candidate outranks. A real landmark photo taken from
an unusual viewpoint can score low against the queries and still be very close to one of the
landmark's database views; on an unseen city one ranked 43rd, outside a top-20 queue, and would
have been selected without review.

The risk of candidate d is its best cosine similarity (a global descriptor, cnn-gem) to any
image of a landmark: its queries (bbox crops) and its positives (Easy ∪ Hard database images),
`risk(d) = max_L max_{x ∈ Q_L ∪ P_L} cos(d, x)`, with that landmark and image named. It is
**high** when it reaches the landmark's own threshold τ_L, the median over L's positives of
their cosine to the nearest other image of L: a candidate as close to a landmark image as the
landmark's own views typically are to one another.

`mining select --leak-risk` then refuses to select past the reviewed depth where the risk is
high: a high-risk candidate that no reviewer decided on is left out of the selection (counted
in stats.json) unless `--select-leak-risk allow` (manifest `select: {leak_risk: allow}`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from mining.files import atomic
from mining.datasets.benchmarks import as_list, fingerprint, load_all, qualify
from mining.errors import UserError
from mining.evidence.geometry import Evidence, columns, geometry_of, landmark_images
from mining.files.names import LEAKRISK, REVIEW_QUEUE, STATS
from mining.retrieval.methodstores import open_method, parse_ids, unit_rows
from mining.evidence.since import before, check_late, days_taken, exempt_counts, of_benchmarks
from mining.files.tables import read_table

log = logging.getLogger(__name__)



def thresholds(vectors: np.ndarray, owners: np.ndarray, is_positive: np.ndarray) -> dict[str, float]:
    """τ_L per landmark: median over its positives of the cosine to the nearest other image of L."""
    out = {}
    for lm in dict.fromkeys(owners.tolist()):
        mine = np.flatnonzero(owners == lm)
        pos = mine[is_positive[mine]]
        if pos.size == 0 or mine.size < 2:
            out[lm] = float("inf")
            continue
        s = vectors[pos] @ vectors[mine].T
        s[np.arange(pos.size), np.searchsorted(mine, pos)] = -np.inf  # not itself
        out[lm] = float(np.median(s.max(axis=1)))
    return out


GEOMETRY_TOP = 1000  # the riskiest candidates verified against their nearest landmark


def run(*, landmarks: Any, descriptors: Path, scores: Path, out: Path, candidates: Path | None = None,
        geometry: Path | None = None) -> dict[str, Any]:
    """`mining leakrisk`: LEAKRISK/leakrisk.parquet (one row per candidate) + stats.json.
    `landmarks`: [NAME=]GND, one ground truth or several benchmarks (`mining.datasets.benchmarks.as_list`);
    with several, landmark and image names are `<benchmark>/<name>`. `descriptors`: a global
    method's DESC/<method> folder (queries/, database/, candidates/); `scores`: `mining score`'s
    folder (review_queue.parquet). With `candidates` (their date_taken), a candidate taken before
    a landmark's `since` day is not compared with that landmark's images (mining/evidence/since.py); risk
    is -1 when that leaves no landmark. `geometry`: a DESC/<method> keeping keypoints, whose
    inliers are evidence too (mining/evidence/geometry.py)."""
    benchmarks = as_list(landmarks)
    datasets = load_all(benchmarks)
    several = len(benchmarks) > 1
    stores = open_method(Path(descriptors), global_for="the leak risk needs",  # the candidates (any benchmark's view)
                         benchmark=benchmarks[0].name if several else None)
    queue = read_table(Path(scores) / REVIEW_QUEUE, ("landmark", "photo_id", "rank"), "review queue",
                       hint="made by `mining score`").to_pandas()
    lm = _landmark_images(descriptors, benchmarks, datasets)
    tau = thresholds(lm.vectors, lm.owners, lm.is_positive)
    since = of_benchmarks(benchmarks, datasets) if candidates else {}
    pid, risk, best = _nearest(stores.candidates, lm, since, candidates, descriptors)
    taken_all = days_taken(candidates, pid) if since else None
    late = _late_as_scored(since, taken_all, Path(scores)) if since else []
    lm_of = lm.owners[best] if best.size else np.zeros(0, object)
    tau_of = np.array([tau[x] for x in lm_of], dtype=np.float64)
    high = risk >= tau_of
    evidence = _geometry(geometry, benchmarks, datasets, pid, lm_of, risk)
    if evidence is not None:
        high |= evidence[0].inliers >= evidence[1]
    queued = np.isin(pid, queue["photo_id"].to_numpy(np.int64))
    rank = np.empty(pid.size, np.int64)  # 1 = the riskiest candidate
    rank[np.lexsort((pid, -risk))] = np.arange(1, pid.size + 1)
    table = pa.table({
        "photo_id": pa.array(pid, pa.int64()), "risk": pa.array(risk, pa.float64()),
        "risk_rank": pa.array(rank, pa.int64()),
        "landmark": pa.array(lm_of.tolist(), pa.string()), "nearest": pa.array([lm.names[b] for b in best], pa.string()),
        "threshold": pa.array(tau_of, pa.float64()), "high": pa.array(high, pa.bool_()),
        "in_queue": pa.array(queued, pa.bool_()),
    })
    if evidence is not None:
        for name, col in list(columns(evidence[0]).items())[:2]:  # inliers, inlier_image
            table = table.append_column(name, col)
    outside = high & ~queued
    examples = np.flatnonzero(outside)[np.argsort(-risk[outside], kind="stable")][:10]
    stats = {
        "method": stores.name, "candidates": int(pid.size),
        "thresholds": {x: round(t, 6) for x, t in tau.items()},
        "high_risk": int(high.sum()), "high_risk_in_queue": int((high & queued).sum()),
        "high_risk_outside_queue": int(outside.sum()),
        "outside_queue_examples": [{"photo_id": int(pid[i]), "risk": round(float(risk[i]), 4), "landmark": str(lm_of[i]),
                                    "nearest": lm.names[best[i]], "risk_rank": int(rank[i])} for i in examples],
        **({"since": exempt_counts(taken_all, since, late)} if since else {}),
        **({"geometry": _geometry_stats(evidence, risk >= tau_of, queued)} if evidence is not None else {}),
        "landmarks_fingerprint": fingerprint([(b.name, d.fingerprint()) for b, d in zip(benchmarks, datasets)]),
    }
    atomic.write_parquet(Path(out) / LEAKRISK, table)
    atomic.write_json(Path(out) / STATS, stats)
    return stats


@dataclass(frozen=True)
class LandmarkImages:
    """Every landmark image with a descriptor: its unit vector, landmark, name and whether it
    is a positive (a database image) rather than a query crop."""

    vectors: np.ndarray
    owners: np.ndarray
    names: list[str]
    is_positive: np.ndarray


def _landmark_images(descriptors: Path, benchmarks: Any, datasets: Any) -> LandmarkImages:
    """The queries and positives of every benchmark's landmarks that `descriptors` describes."""
    several = len(benchmarks) > 1
    vec: dict[tuple[str, str], np.ndarray] = {}
    items = []
    for b, dataset in zip(benchmarks, datasets):
        mine = open_method(Path(descriptors), global_for="the leak risk needs", benchmark=b.name if several else None)
        for part in ("queries", "database"):
            ids, payload = getattr(mine, part).load_all()
            for i, v in zip(ids, unit_rows(payload) if len(ids) else []):
                vec[(part, qualify(b.name, i, several))] = v
        items += [(s, qualify(b.name, n, several), qualify(b.name, lm, several)) for s, n, lm in landmark_images(dataset)]
    items = [(s, n, lm) for s, n, lm in items if (s, n) in vec]
    if not items:
        raise UserError(f"{descriptors}: no landmark image has a descriptor")
    return LandmarkImages(np.stack([vec[(s, n)] for s, n, _ in items]), np.array([lm for _, _, lm in items], dtype=object),
                          [n for _, n, _ in items], np.array([s == "database" for s, _, _ in items]))


def _nearest(store: Any, lm: LandmarkImages, since: dict[str, np.datetime64], candidates: Path | None,
             descriptors: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(photo ids, risk, index of the nearest landmark image) of every candidate in `store`, by
    photo id: a candidate taken before a landmark's `since` day is not compared with its images."""
    dated = [(lm.owners == name, day) for name, day in since.items()]
    pid_parts, risk_parts, best_parts = [], [], []
    for ids, payload in store.iter_blocks():
        sims = unit_rows(payload) @ lm.vectors.T
        block_ids = parse_ids(ids, f"{descriptors}/candidates")
        if dated:  # taken before a landmark existed: no risk for it
            taken = days_taken(candidates, block_ids)
            for cols, day in dated:
                sims[np.ix_(before(taken, day), cols)] = -np.inf
        best = np.argmax(sims, axis=1)
        pid_parts.append(block_ids)
        risk_parts.append(np.maximum(sims[np.arange(len(best)), best].astype(np.float64), -1.0))
        best_parts.append(best)
    pid = np.concatenate(pid_parts) if pid_parts else np.zeros(0, np.int64)
    risk = np.concatenate(risk_parts) if risk_parts else np.zeros(0)
    best = np.concatenate(best_parts) if best_parts else np.zeros(0, np.int64)
    order = np.argsort(pid, kind="stable")
    return pid[order], risk[order], best[order]


def _late_as_scored(since: dict[str, np.datetime64], taken: np.ndarray, scores: Path) -> list[str]:
    """The landmarks whose `since` is later than every candidate's date_taken, each one allowed
    by the score run (its stats.json marks it late: `score.late_since: allow`); otherwise
    refused as score refuses it (mining/evidence/since.py `check_late`)."""
    late = check_late(since, taken, allow=True)
    try:
        st = json.loads((scores / STATS).read_text())
    except (OSError, ValueError):
        st = {}  # no score stats to go by: nothing allowed
    allowed = {lm for lm, d in ((st.get("since") or {}).get("landmarks") or {}).items() if d.get("late")}
    for lm in late:
        if lm not in allowed:
            raise UserError(f"landmark {lm}: since {since[lm]} is later than every candidate's date_taken, and the "
                            f"score run ({scores}) did not allow it (score.late_since: allow); check the date in the "
                            "ground truth")
    return late


def _geometry(method_dir: Path | None, benchmarks: Any, datasets: Any, pid: np.ndarray, lm_of: np.ndarray,
              risk: np.ndarray) -> tuple[Any, int] | None:
    """(Evidence, min_inliers) per candidate: the GEOMETRY_TOP riskiest verified against their
    nearest landmark's images, -1 inliers for the others."""
    if method_dir is None:
        return None
    geo = geometry_of([method_dir], benchmarks, datasets)
    if geo is None:
        raise UserError(f"--geometry {method_dir}: its stores keep no keypoints (set spatial_verification)")
    top = np.lexsort((pid, -risk))[:GEOMETRY_TOP]
    part = geo.best([str(lm_of[i]) for i in top], pid[top].tolist())
    ev = Evidence.none(pid.size)
    ev.inliers[top] = part.inliers
    for j, i in enumerate(top):
        ev.image[i] = part.image[j]
    return ev, geo.min_inliers


def _geometry_stats(geometry: tuple[Any, int], by_cosine: np.ndarray, queued: np.ndarray) -> dict[str, int]:
    ev, t = geometry
    hit = ev.inliers >= t
    return {"min_inliers": t, "verified": int((ev.inliers >= 0).sum()), "at_min_inliers": int(hit.sum()),
            "high_by_geometry_only": int((hit & ~by_cosine).sum()), "at_min_inliers_outside_queue": int((hit & ~queued).sum())}
