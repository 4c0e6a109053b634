"""The review budget: a total number of review items spread over the landmarks by leak risk.

Without a budget the review queue holds each landmark's top K (`review_top`): R1M's 2,000
per landmark is 44,000 items for 22 landmarks but 400,000 for a city of 200. With a budget B
(manifest `review: {budget: B, min_per_landmark: m}`) the queue holds B items in all
(fewer when fewer exist), chosen from every (landmark, candidate) pair the score ranks
(contribution > 0), by the pair's **risk**:

    risk(L, d) = contribution of d to L / rows of L

the contribution being the score's part for L (for every method and every query of L with
positives, the share of the query's positives that d outranks, a tie counting one half) and
"rows of L" the number of those (method, query) pairs, so that the risk is the mean share of
L's positives that d outranks: in [0, 1], comparable between landmarks with different
numbers of queries. The items are taken in two phases:

1. the top of every landmark: round r = 1 … m takes each landmark's r-th item (landmarks
   with fewer than r items skip the round), riskiest first within the round;
2. then every remaining item of any landmark, riskiest first,

until B items are taken. Every order is (risk descending, photo id ascending, landmark name
ascending): a total order, so the queue does not depend on anything else. Within a landmark
that is its ranking (contribution descending, photo id ascending), so each landmark keeps a
prefix of its ranking, and its items keep their ranks. B at least the number of pairs keeps
them all; m·(number of landmarks) ≥ B spends the whole budget in phase 1.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from mining.errors import UserError


def check(budget: int, min_per_landmark: int) -> None:
    """One clear line for a budget that cannot be spent."""
    if budget < 1 or min_per_landmark < 0:
        raise UserError(f"the review budget must be at least 1 (not {budget}) and the items every landmark gets "
                        f"first at least 0 (not {min_per_landmark})")


def allocate(risks: Mapping[str, np.ndarray], photo_ids: Mapping[str, np.ndarray], budget: int,
             min_per_landmark: int = 1) -> tuple[dict[str, int], dict]:
    """How many of its first items each landmark keeps (`risks[L]`, `photo_ids[L]`: its items
    in rank order), and how the budget was spent (items per phase, the last risk taken)."""
    check(budget, min_per_landmark)
    names = sorted(risks)
    counts = dict.fromkeys(risks, 0)
    sizes = np.array([len(risks[n]) for n in names], np.int64)
    owner = np.repeat(np.arange(len(names)), sizes)
    rank = np.concatenate([np.arange(s) for s in sizes]) if names else np.zeros(0, np.int64)
    risk = np.concatenate([np.asarray(risks[n], np.float64) for n in names]) if names else np.zeros(0)
    pid = np.concatenate([np.asarray(photo_ids[n], np.int64) for n in names]) if names else np.zeros(0, np.int64)
    first = rank < min_per_landmark
    # phase 1 ordered by round, then (risk desc, photo id, landmark); phase 2 by the latter alone
    order = np.lexsort((owner, pid, -risk, np.where(first, rank, min_per_landmark)))
    taken = order[:budget]
    per = np.bincount(owner[taken], minlength=len(names))
    for i, n in enumerate(names):
        counts[n] = int(per[i])
    in_first = int(first[taken].sum())
    later = taken[~first[taken]]
    spent = {"budget": int(budget), "min_per_landmark": int(min_per_landmark), "items": int(taken.size),
             "available": int(risk.size), "first_items": in_first, "risk_items": int(later.size),
             "risk_cutoff": round(float(risk[later[-1]]), 6) if later.size else None,
             "landmarks_with_items": int(np.count_nonzero(per)),
             "per_landmark": counts}
    return counts, spent


def apply_budget(result, budget: int, min_per_landmark: int = 1) -> dict:
    """Cut each landmark's queue (`ScoreResult.review`, its top `budget` at least) to its
    share of the budget; records the spending in `result.stats['review_budget']`."""
    lm_index = {lm: i for i, lm in enumerate(result.review)}
    risks = {lm: t.contrib / max(int(result.landmark_rows[lm_index[lm]]), 1) for lm, t in result.review.items()}
    counts, spent = allocate(risks, {lm: t.photo_id for lm, t in result.review.items()}, budget, min_per_landmark)
    for lm, t in result.review.items():
        n = counts[lm]
        t.contrib, t.photo_id, t.best_query = t.contrib[:n], t.photo_id[:n], t.best_query[:n]
    result.stats["review_budget"] = spent
    return spent
