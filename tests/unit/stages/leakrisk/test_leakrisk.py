"""Leak risk: best cosine to a landmark's queries and positives, high-risk candidates outside the
queue counted, and select leaving out the unreviewed ones (synthetic stores of the evaluate tests:
ten candidates are exact copies of a landmark positive)."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mining.evidence import screening
from mining.stages.leakrisk import stage as leakrisk
from mining.cli import main
from mining.retrieval.descriptors import open_store
from mining.datasets.landmarks import load_landmarks
from evaluate_world import build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = build_world(tmp_path_factory.mktemp("risk"))
    ids = [1000 + 7 * i for i in range(240)]
    scores = root / "scores"
    scores.mkdir()
    # a queue that holds only 3 of the 10 copies of a positive (ids 1000..1063)
    pq.write_table(pa.table({"landmark": ["lm0"] * 3 + ["lm1"] * 2, "photo_id": [ids[0], ids[1], ids[2], ids[50], ids[51]],
                             "rank": [1, 2, 3, 1, 2]}), scores / "review_queue.parquet")
    return root, ids


def test_risk_is_the_best_cosine_to_a_landmark_image_and_copies_are_high(world, tmp_path):
    root, ids = world
    assert main(["leakrisk", "--landmarks", str(root / "lm"), "--descriptors", str(root / "desc" / "gem"),
                 "--scores", str(root / "scores"), "--out", str(tmp_path / "r")]) == 0
    t = pq.read_table(tmp_path / "r" / "leakrisk.parquet").to_pandas()
    st = json.loads((tmp_path / "r" / "stats.json").read_text())
    # brute force: every candidate against every query and positive descriptor
    ds = load_landmarks(root / "lm")
    cid, cv = open_store(root / "desc" / "gem" / "candidates").load_all()
    cv = np.asarray(cv, np.float32)
    cv /= np.linalg.norm(cv, axis=1, keepdims=True)
    best = np.full(len(cid), -np.inf)
    for part in ("queries", "database"):
        lid, lv = open_store(root / "desc" / "gem" / part).load_all()
        lv = np.asarray(lv, np.float32)
        lv /= np.linalg.norm(lv, axis=1, keepdims=True)
        wanted = set(ds.qimlist) if part == "queries" else {ds.imlist[j] for q in range(len(ds.qimlist)) for j in ds.positives(q)}
        keep = [i for i, n in enumerate(lid) if n in wanted]
        best = np.maximum(best, (cv @ lv[keep].T).max(axis=1))
    got = t.set_index("photo_id")["risk"].reindex([int(i) for i in cid]).to_numpy()
    assert np.allclose(got, best, atol=1e-5)
    copies = t[t.photo_id.isin(ids[:10])]
    assert copies["high"].all() and np.allclose(copies["risk"], 1.0, atol=1e-3) and (copies["landmark"] == "lm0").all()
    assert sorted(copies["risk_rank"]) == list(range(1, 11))  # the riskiest of all
    assert st["high_risk"] == int(t["high"].sum()) >= 10
    assert st["high_risk_outside_queue"] == int((t["high"] & ~t["in_queue"]).sum()) >= 7
    assert st["outside_queue_examples"][0]["landmark"] == "lm0"
    assert 0 < st["thresholds"]["lm0"] < 1


def test_select_filter_leaves_out_unreviewed_high_risk(tmp_path):
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"photo_id": [1, 2, 3, 4], "high": [True, True, False, True]}), path)
    pid = np.array([1, 2, 3, 4, 5])
    order = np.array([0, 1, 2, 3, 4])
    dec = pd.DataFrame({"landmark": ["a"], "photo_id": [2], "decision": ["not_landmark"]})
    got, st = screening.leakrisk_filter_order(order, pid, dec, path, "refuse")
    assert pid[got].tolist() == [2, 3, 5]
    assert st == {"policy": "refuse", "high_risk_unreviewed": 2, "high_risk_unreviewed_in_ranking": 2, "left_out": 2}
    got, st = screening.leakrisk_filter_order(order, pid, dec, path, "allow")
    assert pid[got].tolist() == [1, 2, 3, 4, 5] and st["left_out"] == 0 and st["high_risk_unreviewed_in_ranking"] == 2


def test_thresholds_are_the_median_nearest_sibling_cosine():
    v = np.array([[1, 0], [0.8, 0.6], [0.6, 0.8], [0, 1]], np.float32)
    owners = np.array(["a", "a", "a", "b"], dtype=object)
    is_pos = np.array([False, True, True, True])
    tau = leakrisk.thresholds(v, owners, is_pos)
    # positives of a: 1 (nearest other: 0 at 0.8 or 2 at 0.96) and 2 (1 at 0.96): median 0.96
    assert tau["a"] == pytest.approx(0.96) and tau["b"] == float("inf")
