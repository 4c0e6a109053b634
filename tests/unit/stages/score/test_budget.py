"""The review budget (`mining.stages.score.budget`): a total number of review items spread over the
landmarks, against a slow, obviously correct reference and on a scored world whose per-landmark
risks are known."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from budget_queues import random_queues

from mining.errors import UserError
from mining.stages.score import CandidateVectors, MethodInput, Problem, score_candidates
from mining.stages.score.budget import allocate, apply_budget
from mining.stages.score.output import write_outputs


def reference(risks: dict, pids: dict, budget: int, m: int) -> dict[str, int]:
    """Phase 1: round r = 0 … m-1 takes each landmark's r-th item, riskiest first; phase 2:
    every item left, riskiest first; ties by photo id, then landmark name."""
    taken = {lm: 0 for lm in risks}
    left = budget
    for r in range(m):
        rnd = sorted((-risks[lm][r], int(pids[lm][r]), lm) for lm in risks if len(risks[lm]) > r)
        for _, _, lm in rnd[:left]:
            taken[lm] += 1
        left -= min(left, len(rnd))
    rest = sorted((-risks[lm][r], int(pids[lm][r]), lm) for lm in risks for r in range(min(m, len(risks[lm])),
                                                                                       len(risks[lm])))
    for _, _, lm in rest[:left]:
        taken[lm] += 1
    return taken


@pytest.mark.parametrize("seed", range(40))
def test_allocation_matches_reference_and_its_promises(seed):
    risks, pids = random_queues(seed)
    total = sum(len(r) for r in risks.values())
    rng = np.random.default_rng(1000 + seed)
    budget, m = int(rng.integers(1, total + 10)), int(rng.integers(0, 5))
    counts, spent = allocate(risks, pids, budget, m)
    assert counts == reference(risks, pids, budget, m)
    assert sum(counts.values()) == spent["items"] == min(budget, total)
    assert spent["per_landmark"] == counts and spent["available"] == total
    assert spent["first_items"] + spent["risk_items"] == spent["items"]
    first = sum(min(m, len(r)) for r in risks.values())
    if budget >= first:  # every landmark got its top m (all it has when fewer) before any other item
        assert all(counts[lm] >= min(m, len(r)) for lm, r in risks.items())
        assert spent["first_items"] == first
        # then risk order: nothing left out is riskier than the last item taken by risk
        left_out = [r[counts[lm]] for lm, r in risks.items() if counts[lm] < len(r) and counts[lm] >= m]
        if spent["risk_items"] and left_out:
            assert max(left_out) <= spent["risk_cutoff"]
    # deterministic: the landmarks' order in the mapping does not matter
    names = list(risks)[::-1]
    assert allocate({n: risks[n] for n in names}, {n: pids[n] for n in names}, budget, m)[0] == counts


def test_budget_at_least_every_item_keeps_everything_and_bad_budgets_are_refused():
    risks, pids = random_queues(3)
    total = sum(len(r) for r in risks.values())
    for budget in (total, total + 1, 10 * total):
        counts, spent = allocate(risks, pids, budget, 2)
        assert counts == {lm: len(r) for lm, r in risks.items()} and spent["items"] == total
    with pytest.raises(UserError, match="at least 1"):
        allocate(risks, pids, 0)
    with pytest.raises(UserError, match="at least 0"):
        allocate(risks, pids, 5, -1)


def test_tie_is_broken_by_photo_id_then_landmark():
    one = np.array([0.5])
    counts, _ = allocate({"b": one, "a": one, "c": one}, {"b": np.array([7]), "a": np.array([9]), "c": np.array([7])},
                         budget=2, min_per_landmark=0)
    assert counts == {"b": 1, "a": 0, "c": 1}  # photo 7 before 9; both 7s taken


# ----------------------------------------------------------------------------- on a scored world
def scored_world(seed: int = 5, n_cand: int = 400):
    """Six landmarks with 1-4 queries each, one global method; landmark `lm{i}`'s positives are
    spread so that its candidates' risks differ from landmark to landmark."""
    rng = np.random.default_rng(seed)
    n_q_per = [1, 2, 4, 3, 1, 2]
    q_landmark = [f"lm{i}" for i, k in enumerate(n_q_per) for _ in range(k)]
    n_q, dim = len(q_landmark), 8
    problem = Problem([f"q{i}" for i in range(n_q)], q_landmark, [f"lm{i}" for i in range(len(n_q_per))])
    q = (rng.integers(-2, 3, size=(n_q, dim)) / 4).astype(np.float32)
    cand = (rng.integers(-2, 3, size=(n_cand, dim)) / 4).astype(np.float16)
    sims = cand.astype(np.float32) @ q.T
    # positives: quantiles of each query's candidate similarities, higher for later landmarks
    pos = [np.quantile(sims[:, i], np.linspace(0.55 + 0.06 * int(q_landmark[i][2:]), 0.99, 5)).astype(np.float32)
           for i in range(n_q)]
    ids = rng.choice(10**9, size=n_cand, replace=False).astype(np.int64)
    method = MethodInput("g", np.arange(n_q), pos, ids, lambda: iter([CandidateVectors(cand)]), query_vectors=q)
    return problem, method, n_q_per


def queue_bytes(tmp_path, name, problem, result):
    out = tmp_path / name
    out.mkdir()
    write_outputs(result, problem, out)
    return (out / "review_queue.parquet").read_bytes(), out


def test_default_queue_is_unchanged_and_a_budget_is_spent_by_risk(tmp_path):
    problem, method, n_q_per = scored_world()
    k = 7
    default = score_candidates(problem, [method], chunk=64, review_top=k)
    assert all(len(t.photo_id) >= k for t in default.review.values())  # so the budget below is per landmark K
    want, _ = queue_bytes(tmp_path, "default", problem, default)
    # the budget that is the top K of every landmark gives today's queue, byte for byte
    wide = score_candidates(problem, [method], chunk=64, review_top=k * len(n_q_per))
    apply_budget(wide, k * len(n_q_per), k)
    got, out = queue_bytes(tmp_path, "as_default", problem, wide)
    assert got == want
    assert json.loads((out / "stats.json").read_text())["review_budget"]["per_landmark"] == \
        {f"lm{i}": k for i in range(len(n_q_per))}

    budget = 40
    full = score_candidates(problem, [method], chunk=64, review_top=10**6)  # every (landmark, candidate) pair
    run = score_candidates(problem, [method], chunk=64, review_top=budget)
    spent = apply_budget(run, budget, 2)
    _, out = queue_bytes(tmp_path, "budget", problem, run)
    queue = pq.read_table(out / "review_queue.parquet").to_pandas()
    assert len(queue) == budget == sum(spent["per_landmark"].values())
    assert queue.groupby("landmark").size().to_dict() == {k: v for k, v in spent["per_landmark"].items() if v}
    # risk = contribution / the landmark's queries (one method): the pairs left out are never riskier
    rows = dict(zip(problem.landmarks, n_q_per))
    risk = {lm: t.contrib / rows[lm] for lm, t in full.review.items()}
    assert full.landmark_rows.tolist() == n_q_per
    for lm, t in full.review.items():
        n = spent["per_landmark"][lm]
        assert n >= 2  # its top 2 first
        got = queue[queue.landmark == lm]
        assert got["rank"].tolist() == list(range(1, n + 1))  # a prefix of its ranking, ranks kept
        assert got.photo_id.tolist() == t.photo_id[:n].tolist()
        if n > 2 and n < len(t.photo_id):
            assert risk[lm][n] <= spent["risk_cutoff"] <= risk[lm][n - 1]
    assert len(set(spent["per_landmark"].values())) > 1  # spread by risk, not evenly
