"""What the other stages do with the near-duplicate and leak-risk files.

`mining neardup` writes NEARDUP/neardup.parquet (near-duplicate groups, near-copies of
landmark images) and `mining leakrisk` LEAKRISK/leakrisk.parquet (candidates close to a
landmark image that nobody reviewed). `mining score` heads each landmark's review queue with
its probable landmark images, and `mining select` drops probable landmarks, redundant group
members and unreviewed high-risk candidates from its ranking. Those rules read only the
files, so they live here, where score and select reach them without importing the stages
that wrote the files.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mining.errors import UserError
from mining.files.tables import read_table

log = logging.getLogger(__name__)

NEARDUP_POLICIES = ("one_per_group", "keep")
LEAKRISK_POLICIES = ("refuse", "allow")


# ----------------------------------------------------------------------------- near-duplicates
def load_neardup(path: Path) -> Any:
    """neardup.parquet as a DataFrame (photo_id, group, copy_of, probable_landmark, ...)."""
    return read_table(Path(path), ("photo_id", "group", "copy_of", "probable_landmark"), "near-duplicates file",
                      hint="made by `mining neardup`").to_pandas()


def neardup_filter_order(order: np.ndarray, photo_id: np.ndarray, decisions: Any, path: Path,
                 policy: str = "one_per_group") -> tuple[np.ndarray, dict[str, Any]]:
    """`mining select`'s ranked candidate indices `order` (into `photo_id`), filtered:
    a probable landmark (a near-copy of a landmark image) stays only if reviewers decided it
    `not_landmark`; with `one_per_group` only the best-ranked member of each near-duplicate
    group stays (`keep`: all of them)."""
    if policy not in NEARDUP_POLICIES:
        raise UserError(f"near-duplicates policy must be one of {', '.join(NEARDUP_POLICIES)}, not {policy!r}")
    table = load_neardup(path)
    ids = table["photo_id"].to_numpy(np.int64)
    copies = ids[table["copy_of"].notna().to_numpy()]
    cleared = np.unique(decisions.loc[decisions["decision"] == "not_landmark", "photo_id"].to_numpy(np.int64))
    blocked = np.setdiff1d(copies, cleared)
    ranked = photo_id[order]
    keep = ~np.isin(ranked, blocked)
    n_blocked = int((~keep).sum())
    order, ranked = order[keep], ranked[keep]
    redundant = 0
    if policy == "one_per_group" and ranked.size:
        srt = np.argsort(ids, kind="stable")
        at = np.minimum(np.searchsorted(ids[srt], ranked), max(ids.size - 1, 0))
        known = ids.size > 0
        found = (ids[srt][at] == ranked) if known else np.zeros(ranked.size, bool)
        group = np.where(found, table["group"].to_numpy(np.int64)[srt][at] if known else 0, ranked)
        _, first = np.unique(group, return_index=True)  # the best-ranked member of each group
        first = np.sort(first)
        redundant = int(ranked.size - first.size)
        order = order[first]
    stats = {"policy": policy, "probable_landmark_dropped": n_blocked,
             "probable_landmark_cleared_by_review": int(np.isin(copies, cleared).sum()),
             "redundant_dropped": redundant}
    return order, stats


def prepend_probable(rows: dict[str, list], path: Path, photo_ids: np.ndarray, scores: np.ndarray,
                     landmarks: Sequence[str]) -> dict[str, list]:
    """The review queue (`mining score`'s rows, per landmark in rank order) with each
    landmark's probable landmark images (near-copies of its images) first, marked
    `probable_landmark`, and the rest renumbered after them (a copy already queued moves up)."""
    table = load_neardup(path)
    table = table[table["probable_landmark"].notna()].sort_values("photo_id", kind="stable")
    out: dict[str, list] = {k: [] for k in list(rows) + ["probable_landmark"]}
    score_of = dict(zip(photo_ids.tolist(), scores.tolist()))
    for lm in landmarks:
        idx = [i for i, x in enumerate(rows["landmark"]) if x == lm]
        queued = {rows["photo_id"][i]: i for i in idx}
        top = [int(p) for p in table.loc[table["probable_landmark"] == lm, "photo_id"]]
        rank = 0
        for p in top:
            rank += 1
            i = queued.get(p)
            for k in rows:
                if k in ("landmark", "photo_id", "rank"):
                    continue
                out[k].append(rows[k][i] if i is not None else score_of.get(p) if k == "total_score" else None)
            out["landmark"].append(lm)
            out["photo_id"].append(p)
            out["rank"].append(rank)
            out["probable_landmark"].append(True)
        for i in idx:
            if rows["photo_id"][i] in top:
                continue
            rank += 1
            for k in rows:
                out[k].append(rank if k == "rank" else rows[k][i])
            out["probable_landmark"].append(False)
    return out


# ----------------------------------------------------------------------------- leak risk
def leakrisk_filter_order(order: np.ndarray, photo_id: np.ndarray, decisions: Any, path: Path,
                 policy: str = "refuse") -> tuple[np.ndarray, dict[str, Any]]:
    """`mining select`'s ranked indices without the high-risk candidates nobody reviewed
    (policy `refuse`); `allow` keeps them and only counts them."""
    if policy not in LEAKRISK_POLICIES:
        raise UserError(f"leak-risk policy must be one of {', '.join(LEAKRISK_POLICIES)}, not {policy!r}")
    t = read_table(Path(path), ("photo_id", "high"), "leak-risk file", hint="made by `mining leakrisk`").to_pandas()
    reviewed = np.unique(decisions["photo_id"].to_numpy(np.int64))
    risky = np.setdiff1d(t.loc[t["high"].astype(bool), "photo_id"].to_numpy(np.int64), reviewed)
    hit = np.isin(photo_id[order], risky)
    stats = {"policy": policy, "high_risk_unreviewed": int(risky.size), "high_risk_unreviewed_in_ranking": int(hit.sum()),
             "left_out": int(hit.sum()) if policy == "refuse" else 0}
    if policy == "refuse":
        if hit.any():
            log.warning("leak risk: %d high-risk candidates that nobody reviewed are left out of the selection "
                        "(review deeper: score.review_top, or select.leak_risk: allow)", int(hit.sum()))
        order = order[~hit]
    return order, stats
