"""Protocols (original Oxford, revisited setups, GLDv2, Holidays, UKBench) and gnd loaders."""

import pickle
from fractions import Fraction as F

import numpy as np
import pytest
import scipy.io as sio

from mining.errors import UserError
from mining.datasets.landmarks import load_gnd
from mining.stages.evaluate.protocols.gldv2 import (gldv2_gap, gldv2_map_at_k, read_gldv2_recognition_predictions,
                                                    read_gldv2_retrieval_predictions, read_gldv2_solution)
from mining.stages.evaluate.protocols.holidays import holidays_groups, holidays_map, read_holidays_results
from mining.stages.evaluate.protocols.oxford import load_oxford_gt, oxford_gnd, oxford_map
from mining.stages.evaluate.protocols.setups import setup_gnd
from mining.stages.evaluate.protocols.ukbench import ukbench_counts, ukbench_objects

from paths import OXFORD


def test_loads_all_55_real_oxford_queries_with_set_semantics():
    qs = load_oxford_gt(OXFORD)
    assert len(qs) == 55 and len({q.name for q in qs}) == 55
    q = next(q for q in qs if q.name == "all_souls_1")
    assert q.image == "all_souls_000013" and q.bbox == (136.5, 34.1, 648.5, 955.7)
    raw = (OXFORD / "all_souls_1_good.txt").read_text().split()
    assert len(raw) > len(set(raw)) and q.good == frozenset(raw)  # a duplicate line counts once
    assert all(q.positives and not (q.positives & q.junk) for q in qs)
    imlist = sorted(set().union(*(q.positives | q.junk for q in qs)))
    gnd = oxford_gnd(qs, imlist)
    assert all(g["ok"].size == len(q.positives) for g, q in zip(gnd, qs))
    # a perfect ranking (positives first) scores 1 for every query; reversed scores less
    ranked = {q.name: sorted(q.positives) + sorted(set(imlist) - q.positives) for q in qs}
    assert oxford_map(qs, ranked)[0] == pytest.approx(1.0)
    worst = {q.name: sorted(set(imlist) - q.positives - q.junk) + sorted(q.positives) for q in qs}
    assert oxford_map(qs, worst)[0] < 0.5
    with pytest.raises(UserError, match="omit"):
        oxford_map(qs, {qs[0].name: []})


def test_oxford_junk_is_deleted_and_bad_query_file_refused(tmp_path):
    for kind, names in (("good", "a\na\n"), ("ok", "b\n"), ("junk", "j\n")):
        (tmp_path / f"x_1_{kind}.txt").write_text(names)
    (tmp_path / "x_1_query.txt").write_text("oxc1_x_000001 1 2 3.5 4\n")
    qs = load_oxford_gt(tmp_path)
    m, aps = oxford_map(qs, {"x_1": ["j", "n", "a", "b"]})
    # j deleted: a at 1, b at 2 of n = 2 → (0/1 + 1/2)/4 + (1/2 + 2/3)/4
    assert m == pytest.approx(float((F(0, 1) + F(1, 2)) / 4 + (F(1, 2) + F(2, 3)) / 4))
    (tmp_path / "x_1_query.txt").write_text("oxc1_x_000001 1 2\n")
    with pytest.raises(UserError, match="x1 y1 x2 y2"):
        load_oxford_gt(tmp_path)


def test_revisited_setups():
    g = [{"easy": [1, 2], "hard": [3], "junk": [4]}]
    e, m, h = (setup_gnd(g, s)[0] for s in ("easy", "medium", "hard"))
    assert e["ok"].tolist() == [1, 2] and e["junk"].tolist() == [3, 4]
    assert m["ok"].tolist() == [1, 2, 3] and m["junk"].tolist() == [4]
    assert h["ok"].tolist() == [3] and h["junk"].tolist() == [1, 2, 4]
    with pytest.raises(UserError):
        setup_gnd(g, "extreme")


def test_gldv2_map_at_100_from_csv(tmp_path):
    (tmp_path / "sol.csv").write_text("id,images,Usage\nq1,a b c,Public\nq2,d,Private\nq3,None,Ignored\nq4,e,Public\n")
    (tmp_path / "pred.csv").write_text("id,images\nq1,a x b\nq2,y d\nq3,a\n")
    sol = read_gldv2_solution(tmp_path / "sol.csv", "images")
    assert set(sol) == {"q1", "q2", "q4"}
    got = gldv2_map_at_k(read_gldv2_retrieval_predictions(tmp_path / "pred.csv"), sol)
    # q1: (1/1 + 2/3)/3; q2: (1/2)/1; q4 (no prediction): 0
    assert got == pytest.approx(((1 + 2 / 3) / 3 + 0.5 + 0) / 3)
    # the relevant count is capped at k: 150 relevant, 100 perfect predictions → 1
    assert gldv2_map_at_k({"q": [str(i) for i in range(100)]}, {"q": [str(i) for i in range(150)]}) == 1.0


def test_gldv2_gap_out_of_domain_predictions_lower_precision(tmp_path):
    (tmp_path / "sol.csv").write_text("id,landmarks,Usage\nq1,7,Public\nq2,8,Public\nood,,Public\nign,9,Ignored\n")
    (tmp_path / "pred.csv").write_text("id,landmarks\nq1,7 0.9\nood,3 0.95\nq2,5 0.5\nign,9 0.99\n")
    sol = read_gldv2_solution(tmp_path / "sol.csv", "landmarks")
    preds = read_gldv2_recognition_predictions(tmp_path / "pred.csv")
    # sorted: ood (wrong), q1 (right), q2 (wrong); M = 2 → (1/2)/2
    assert gldv2_gap(preds, sol) == pytest.approx(0.25)
    del preds["ood"]
    assert gldv2_gap(preds, sol) == pytest.approx(0.5)


def test_holidays_query_ignored_and_missing_query_refused(tmp_path):
    groups = holidays_groups(["100000.jpg", "100001.jpg", "100002.jpg", "100100.jpg", "100101.jpg"])
    assert groups == {"100000.jpg": ["100001.jpg", "100002.jpg"], "100100.jpg": ["100101.jpg"]}
    (tmp_path / "res.txt").write_text("100000.jpg 0 100000.jpg 1 100001.jpg 2 100100.jpg 3 100002.jpg\n"
                                      "100100.jpg 1 100101.jpg 0 100000.jpg\n")
    res = read_holidays_results(tmp_path / "res.txt")
    # q1 without itself: 100001 at 0, 100002 at 2 → (1 + 1)/4 + (1/2 + 2/3)/4; q2: at rank 1 → 1/4
    assert holidays_map(res, groups) == pytest.approx(((0.5 + (0.5 + 2 / 3) / 4) + 0.25) / 2)
    with pytest.raises(UserError, match="omit"):
        holidays_map({"100000.jpg": []}, groups)


def test_ukbench_counts():
    top = [[0, 1, 2, 3], [1, 0, 5, 6], [2, 4, 5, 6], [3, 7, 1, 0], [4, 5, 6, 7], [5, 4, 7, 6], [6, 0, 1, 2], [7, 6, 3, 5]]
    names = [f"ukbench{i:05d}.jpg" for i in range(8)]
    obj = ukbench_objects(names)
    results = {names[q]: [names[i] for i in row] for q, row in enumerate(top)}
    assert list(ukbench_counts(results, obj).values()) == [4, 2, 1, 3, 4, 4, 1, 3]
    with pytest.raises(UserError, match="the score needs the top 4"):
        ukbench_counts({**results, names[0]: names[:3]}, obj)


def test_load_gnd_pkl_and_one_based_mat(tmp_path):
    data = {"imlist": ["a", "b", "c"], "qimlist": ["q1"], "gnd": [{"bbx": [1.0, 2.0, 3.0, 4.0], "easy": [0, 2], "hard": [1], "junk": []}]}
    (tmp_path / "gnd_x.pkl").write_bytes(pickle.dumps(data))
    assert load_gnd(tmp_path / "gnd_x.pkl") == data
    gnd = np.zeros((1,), dtype=[("bbx", "O"), ("easy", "O"), ("hard", "O"), ("junk", "O")])
    gnd[0] = (np.array([1.0, 2, 3, 4]), np.array([1, 3]), np.array([2]), np.zeros(0))
    sio.savemat(tmp_path / "gnd_x.mat", {"imlist": np.array(["a", "b", "c"], dtype=object),
                                         "qimlist": np.array(["q1"], dtype=object), "gnd": gnd})
    assert load_gnd(tmp_path / "gnd_x.mat") == data
    gnd[0] = (np.array([1.0, 2, 3, 4]), np.array([0]), np.zeros(0), np.zeros(0))
    sio.savemat(tmp_path / "bad.mat", {"imlist": np.array(["a"], dtype=object), "qimlist": np.array(["q1"], dtype=object), "gnd": gnd})
    with pytest.raises(UserError, match="1-based"):
        load_gnd(tmp_path / "bad.mat")


def test_rank_by_similarity_is_a_stable_sort_in_blocks(monkeypatch):
    from mining.stages.evaluate.protocols import ranking

    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, (50, 4)).astype(np.float32)  # few distinct values: many equal scores
    q = rng.integers(0, 3, (7, 4)).astype(np.float32)
    want = np.stack([sorted(range(50), key=lambda i: (-float(x[i] @ q[j]), i)) for j in range(7)], axis=1)
    monkeypatch.setattr(ranking, "_RANK_CELLS", 120)  # 2 queries a block: 4 blocks
    assert np.array_equal(ranking.rank_by_similarity(q, x), want)
    assert np.array_equal(ranking.rank_by_similarity(q, x, k=5), want[:5])
