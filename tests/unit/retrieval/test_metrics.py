"""mining.retrieval.metrics against hand-worked examples, the protocol doc's cases and revisitop's loop."""

from fractions import Fraction as F

import numpy as np
import pytest
from oracle import compute_map_loop

from mining.retrieval.metrics import compute_ap, compute_map

# the protocol doc's sequence: good, junk, junk, ok, absent, good, junk, absent, ok
SEQ = ["good", "junk", "junk", "ok", "absent", "good", "junk", "absent", "ok"]
RANKS = np.arange(len(SEQ))[:, None]
IDX = {lab: [i for i, s in enumerate(SEQ) if s == lab] for lab in set(SEQ)}


def trapezoid(pairs, n):
    """Hand rule: sum over (j, r) of (prec_before + prec_at) / (2 n), exact fractions."""
    return sum(((F(1) if r == 0 else F(j, r)) + F(j + 1, r + 1)) / (2 * n) for j, r in pairs)


def test_protocol_sequence_three_junk_treatments_give_three_aps():
    pos = IDX["good"] + IDX["ok"]
    deleted, *_ = compute_map(RANKS, [{"ok": pos, "junk": IDX["junk"]}])
    negative, *_ = compute_map(RANKS, [{"ok": pos}])
    positive, *_ = compute_map(RANKS, [{"ok": pos + IDX["junk"]}])
    # junk deleted: positives at 0, 3-2, 5-2, 8-3
    assert deleted == pytest.approx(float(trapezoid([(0, 0), (1, 1), (2, 3), (3, 5)], 4)))
    assert deleted == pytest.approx(float(F(1, 4) + F(1, 4) + (F(2, 3) + F(3, 4)) / 8 + (F(3, 5) + F(4, 6)) / 8))
    assert negative == pytest.approx(float(trapezoid([(0, 0), (1, 3), (2, 5), (3, 8)], 4)))
    assert positive == pytest.approx(float(trapezoid([(0, 0), (1, 1), (2, 2), (3, 3), (4, 5), (5, 6), (6, 8)], 7)))
    assert len({round(deleted, 6), round(negative, 6), round(positive, 6)}) == 3
    assert negative < positive and negative < deleted


def test_trapezoid_is_not_mean_of_precisions():
    # one positive at rank 1 (0-based) of n=1: trapezoid (0/1 + 1/2)/2 = 1/4, not 1/2
    m, aps, _, _ = compute_map(np.array([[5], [7], [9]]), [{"ok": [7]}])
    assert m == pytest.approx(0.25)
    assert compute_ap([1], 1) == pytest.approx(0.25)


def test_truncated_list_counts_missing_positives():
    ranks = np.array([[3], [1], [4]])  # positive 2 never returned
    m, aps, _, _ = compute_map(ranks, [{"ok": [3, 1, 2]}])
    assert m == pytest.approx(float(trapezoid([(0, 0), (1, 1)], 3)))  # 2/3
    m0, *_ = compute_map(np.array([[0], [4]]), [{"ok": [9]}])  # none found at all
    assert m0 == 0.0


def test_query_without_positives_is_left_out_of_means():
    ranks = np.tile(np.arange(4)[:, None], (1, 2))
    m, aps, pr, prs = compute_map(ranks, [{"ok": [1]}, {"ok": [], "junk": [0]}], kappas=[1])
    assert np.isnan(aps[1]) and np.isnan(prs[1, 0])
    assert m == pytest.approx(aps[0]) == pytest.approx(0.25)
    assert pr[0] == 0.0


def test_precision_at_k_denominator_rule():
    ranks = np.arange(20)[:, None]
    # three positives at ranks 1-3: kq = min(10, 3) = 3 → P@10 = 1; P@1 = 1; P@5 = 3/3
    _, _, pr, _ = compute_map(ranks, [{"ok": [0, 1, 2]}], kappas=[1, 5, 10])
    assert list(pr) == [1.0, 1.0, 1.0]
    # positives at 1-based 2 and 12 with junk at 1: after deletion they sit at 1 and 11
    _, _, pr, _ = compute_map(ranks, [{"ok": [1, 11], "junk": [0]}], kappas=[1, 5, 10])
    assert pr[0] == 1.0 and pr[1] == pytest.approx(1 / 5) and pr[2] == pytest.approx(1 / 10)
    # positives at 1-based 3 and 4: P@10 uses kq = 4 → 2/4
    _, _, pr, _ = compute_map(ranks, [{"ok": [2, 3]}], kappas=[10, 1])
    assert pr[0] == pytest.approx(0.5) and pr[1] == 0.0


def test_duplicates_count_once_and_ok_wins_over_junk():
    ranks = np.arange(5)[:, None]
    a, *_ = compute_map(ranks, [{"ok": [1, 1, 3], "junk": [0, 3]}])
    b, *_ = compute_map(ranks, [{"ok": [1, 3], "junk": [0]}])
    assert a == b == pytest.approx(float(trapezoid([(0, 0), (1, 2)], 2)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorised_equals_revisitop_loop_on_random_data(seed):
    rng = np.random.default_rng(seed)
    ndb, nq = 400, 9
    ranks = np.stack([rng.permutation(ndb) for _ in range(nq)], axis=1)
    if seed == 2:
        ranks = ranks[:150]  # truncated lists
    gnd = []
    for q in range(nq):
        items = rng.permutation(ndb)
        npos = 0 if q == 4 else int(rng.integers(1, 30))
        gnd.append({"ok": items[:npos].tolist(), "junk": items[npos : npos + int(rng.integers(0, 20))].tolist()})
    got = compute_map(ranks, gnd, kappas=[1, 5, 10])
    ref = compute_map_loop(ranks, gnd, kappas=[1, 5, 10])
    assert got[0] == pytest.approx(ref[0])
    np.testing.assert_allclose(got[1], ref[1], equal_nan=True)
    np.testing.assert_allclose(got[2], ref[2])
    np.testing.assert_allclose(got[3], ref[3], equal_nan=True)


def test_threads_and_small_output_buffers_give_the_same_bits(monkeypatch):
    import mining.retrieval.metrics as metrics

    rng = np.random.default_rng(5)
    ranks = np.stack([rng.permutation(300) for _ in range(7)], axis=1)
    ranks[::7, 3] = ranks[0, 3]  # repeated entries: more hits than ok + junk items
    gnd = [{"ok": rng.choice(300, 10, replace=False).tolist(), "junk": [int(q)]} for q in range(7)]
    full = compute_map(ranks, gnd, [5])
    monkeypatch.setattr(metrics, "_CELLS_PER_THREAD", 50)  # several threads on row ranges
    monkeypatch.setattr(metrics, "available_cpus", lambda: 4)
    split = compute_map(ranks, gnd, [5])
    assert split[0] == full[0]
    np.testing.assert_array_equal(full[1], split[1])
    np.testing.assert_array_equal(full[3], split[3])


def _random_problem(rng, ndb, nq, nrows=None):
    """A revisitop-shaped random problem; ok and junk disjoint, empty and truncated cases."""
    ranks = np.stack([rng.permutation(ndb) for _ in range(nq)], axis=1)
    if nrows is not None:
        ranks = ranks[:nrows]
    gnd = []
    for q in range(nq):
        items = rng.permutation(ndb)
        npos = 0 if q % 7 == 3 else int(rng.integers(1, 40))
        gnd.append({"ok": items[:npos].tolist(), "junk": items[npos : npos + int(rng.integers(0, 25))].tolist()})
    return ranks, gnd


@pytest.mark.parametrize("seed", range(6))
def test_bit_identical_to_revisitop_loop(seed):
    rng = np.random.default_rng(100 + seed)
    ranks, gnd = _random_problem(rng, int(rng.integers(50, 2000)), int(rng.integers(1, 30)),
                                 nrows=None if seed % 2 else int(rng.integers(10, 50)))
    kappas = [1, 5, 10, 100]
    got = compute_map(ranks, gnd, kappas)
    ref = compute_map_loop(ranks, gnd, kappas)
    assert got[0] == ref[0]  # exact, not approx: same float operations in the same order
    np.testing.assert_array_equal(got[1], ref[1])
    np.testing.assert_array_equal(got[2], ref[2])
    np.testing.assert_array_equal(got[3], ref[3])


def test_positions_to_metrics_is_the_loops_arithmetic_on_tied_positions():
    """Positions as the distractor experiment makes them (many positives pushed down by the
    same number of tied distractors): still bit for bit the loop's result."""
    from mining.retrieval.metrics import positions_to_metrics

    rng = np.random.default_rng(9)
    nq, kappas = 12, [1, 5, 10]
    qidx, pos, npos = [], [], np.zeros(nq, np.int64)
    ranks_cols = []
    for q in range(nq):
        n = int(rng.integers(0, 30))
        npos[q] = n + int(rng.integers(0, 3)) if q != 4 else 0
        found = np.sort(rng.choice(5000, n, replace=False)) if q != 4 else np.zeros(0, np.int64)
        qidx += [q] * found.size
        pos += found.tolist()
        ranks_cols.append(found)
    got = positions_to_metrics(np.array(qidx, np.int64), np.array(pos, np.int64), npos, kappas)
    # the same problem as a ranks array for the loop: positive k of query q is item k
    ndb = 5000 + 40
    ranks = np.full((ndb, nq), -1, np.int64)
    gnd = []
    for q in range(nq):
        ok = list(range(100000 + 100 * q, 100000 + 100 * q + int(npos[q])))
        ranks[ranks_cols[q], q] = ok[: ranks_cols[q].size]
        gnd.append({"ok": ok})
    ref = compute_map_loop(ranks, gnd, kappas)
    assert got[0] == ref[0]
    np.testing.assert_array_equal(got[1], ref[1])
    np.testing.assert_array_equal(got[3], ref[3])


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.uint32, np.int64])
def test_any_integer_ranks_and_negative_padding(dtype):
    rng = np.random.default_rng(11)
    ranks, gnd = _random_problem(rng, 300, 8)
    ref = compute_map_loop(ranks, gnd, [1, 5])
    padded = ranks.astype(dtype)
    if np.issubdtype(dtype, np.signedinteger):  # a -1 padding row is never ok or junk
        padded = np.concatenate([padded, np.full((3, 8), -1, dtype)])
    got = compute_map(padded, gnd, [1, 5])
    assert got[0] == ref[0]
    np.testing.assert_array_equal(got[3], ref[3])


def test_many_queries_sharing_items_bit_identical_to_loop():
    """More queries than the filter's 8 residues, and every item relevant to several queries:
    every row is flagged and many entries of one residue are not hits of their own query."""
    rng = np.random.default_rng(21)
    ndb, nq = 120, 100
    ranks = np.stack([rng.permutation(ndb) for _ in range(nq)], axis=1)
    ranks[rng.random(ranks.shape) < 0.05] = ndb + 7  # beyond every ok/junk index
    gnd = []
    for q in range(nq):
        items = rng.permutation(ndb)
        npos = 0 if q == 50 else int(rng.integers(1, 15))
        gnd.append({"ok": items[:npos].tolist(), "junk": items[npos : npos + int(rng.integers(0, 10))].tolist()})
    kappas = [1, 5, 10]
    got = compute_map(ranks, gnd, kappas)
    ref = compute_map_loop(ranks, gnd, kappas)
    assert got[0] == ref[0]
    np.testing.assert_array_equal(got[1], ref[1])
    np.testing.assert_array_equal(got[3], ref[3])


def test_negative_ground_truth_index_is_a_user_error():
    from mining.errors import UserError

    with pytest.raises(UserError, match="negative database index"):
        compute_map(np.arange(5)[:, None], [{"ok": [1, -2]}])
