"""Dates as evidence (mining/evidence/since.py): a landmark with `since` in its ground truth has no leak risk
for photos taken before that day; the review queue and the leak risk leave them out for it, and
stats.json counts them. Generated world (tests/unit/stages/evaluate/test_experiment.py's): lm0 exists from
2016-05-01; even-numbered candidates were taken in 2012, odd ones in 2018, every tenth has no date."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from evaluate_world import build_world

from mining.evidence import since
from mining.cli import main
from mining.errors import UserError

IDS = [1000 + 7 * i for i in range(240)]


def _taken(i):
    return None if i % 10 == 5 else ("2012-03-04 10:00:00.0" if i % 2 == 0 else "2018-01-01 09:30:00.0")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = build_world(tmp_path_factory.mktemp("since"))
    gnd_path = root / "lm" / "gnd_city.pkl"
    data = pickle.loads(gnd_path.read_bytes())
    for g in data["gnd"]:
        if g["landmark"] == "lm0":
            g["since"] = "2016-05-01"
    gnd_path.write_bytes(pickle.dumps(data))
    pq.write_table(pa.table({"photo_id": pa.array(IDS, pa.int64()),
                             "date_taken": pa.array([_taken(i) for i in range(240)], pa.string())}),
                   root / "candidates.parquet")
    for name, extra in (("plain", []), ("dated", ["--candidates", str(root / "candidates.parquet")])):
        assert main(["score", "--landmarks", str(root / "lm"), "--descriptors", str(root / "desc" / "gem"),
                     str(root / "desc" / "sift"), "--out", str(root / name), "--review-top", "30",
                     "--no-progress", *extra]) == 0
        assert main(["leakrisk", "--landmarks", str(root / "lm"), "--descriptors", str(root / "desc" / "gem"),
                     "--scores", str(root / name), "--out", str(root / f"risk-{name}"), *extra]) == 0
    return root


def _before(pid):
    i = (pid - 1000) // 7
    return _taken(i) is not None and _taken(i) < "2016-05-01"


def test_the_review_queue_leaves_out_photos_taken_before_the_landmark(world):
    plain = pq.read_table(world / "plain" / "review_queue.parquet").to_pandas()
    dated = pq.read_table(world / "dated" / "review_queue.parquet").to_pandas()
    lm0_plain, lm0 = plain[plain.landmark == "lm0"], dated[dated.landmark == "lm0"]
    assert any(_before(p) for p in lm0_plain.photo_id)  # without dates, 2012 photos are queued for lm0
    assert not any(_before(p) for p in lm0.photo_id) and len(lm0) == 30  # with them, later ones take their place
    # the others' queues are untouched; so is every candidate's score
    for lm in ("lm1", "lm2"):
        assert plain[plain.landmark == lm].photo_id.tolist() == dated[dated.landmark == lm].photo_id.tolist()
    a = pq.read_table(world / "plain" / "scores.parquet").to_pandas()
    b = pq.read_table(world / "dated" / "scores.parquet").to_pandas()
    assert a.score.tolist() == b.score.tolist()
    st = json.loads((world / "dated" / "stats.json").read_text())["since"]
    assert st["landmarks"]["lm0"] == {"since": "2016-05-01", "candidates_before": sum(map(_before, IDS))}
    assert st["candidates_without_date"] == 24 and st["candidates_exempt_for_some_landmark"] == 120


def test_leak_risk_is_zero_for_a_landmark_that_did_not_exist_yet(world):
    plain = pq.read_table(world / "risk-plain" / "leakrisk.parquet").to_pandas().set_index("photo_id")
    dated = pq.read_table(world / "risk-dated" / "leakrisk.parquet").to_pandas().set_index("photo_id")
    copies = IDS[:10]  # exact copies of an lm0 positive: high risk for lm0 whenever taken
    assert plain.loc[copies, "high"].all() and (plain.loc[copies, "landmark"] == "lm0").all()
    for p in copies:
        if _before(p):  # taken in 2012: compared with lm1 and lm2 only
            assert dated.loc[p, "landmark"] != "lm0" and dated.loc[p, "risk"] < 0.99
        else:
            assert dated.loc[p, "landmark"] == "lm0" and dated.loc[p, "high"]
    later = [p for p in IDS if not _before(p)]
    assert np.allclose(dated.loc[later, "risk"], plain.loc[later, "risk"])
    st = json.loads((world / "risk-dated" / "stats.json").read_text())
    assert st["since"]["landmarks"]["lm0"]["candidates_before"] == sum(map(_before, IDS))


def test_a_malformed_since_is_one_line(tmp_path):
    with pytest.raises(UserError, match="since must be a date YYYY-MM-DD, got '1st May'"):
        since.parse_day("1st May", "gnd_x.pkl: query q1")
    assert since.parse_day("2016-05-01", "x") == np.datetime64("2016-05-01")


def test_the_report_funnel_counts_them(world):
    from mining.stages.report.charts import funnel
    from mining.stages.report.common import Inputs

    doc = funnel(Inputs(scores=world / "dated"))
    assert "candidates taken before a landmark existed (not reviewed for it)</td><td>120</td>" in doc
    assert "taken before lm0 (2016-05-01)</td><td>120</td>" in doc
