"""GLDv2 (protocols/gldv2.py): retrieval mAP@100 and recognition GAP from the CSV files."""

import pytest

from mining.stages.evaluate.protocols.gldv2 import (gldv2_gap, gldv2_map_at_k, read_gldv2_recognition_predictions,
                                                    read_gldv2_retrieval_predictions, read_gldv2_solution)


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
