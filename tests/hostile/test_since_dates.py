"""Dates mean dates (a landmark's `since:` in the ground truth, mining/evidence/since.py):

- `since` is exactly a calendar day YYYY-MM-DD: "2010-01-01garbage", a timestamp with a time
  or a zone, 2016-02-30 are refused in one line naming the landmark (they used to be read as
  their first ten characters);
- a day later than today is refused (`since: 2999-01-01` used to exempt 183 of 184 candidates
  and empty the landmark's review queue, exit 0);
- a day later than every candidate's date_taken is refused unless `score.late_since: allow`
  (`--late-since allow`: landmarks that appeared after the photos, as in ILIAS); then stats.json
  marks the landmark `late` with its exempt count, the report shows them, and leakrisk accepts
  what score allowed (and refuses it after a score run that did not).
"""

from __future__ import annotations

import datetime
import json
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mining.evidence import since
from mining.cli import main
from mining.retrieval.descriptors import write_global_shard, write_store_info
from mining.errors import UserError

DIM, NQ, NDB, NCAND = 8, 4, 30, 60
IDS = [5000 + i for i in range(NCAND)]


def _unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _store(path, set_, ids, vecs):
    write_store_info(path, {"method": "gem", "kind": "global", "set": set_, "dim": DIM})
    write_global_shard(path, "00000", ids, vecs)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two landmarks (lmA, lmB) of two queries each, one global method; candidates taken in 2011
    (even) or 2013 (odd), every fifth without a date."""
    root = tmp_path_factory.mktemp("dates")
    rng = np.random.default_rng(3)
    gnd = [{"bbx": [0, 0, 5, 5], "easy": [q * 5 + k for k in range(4)], "hard": [], "junk": [],
            "landmark": f"lm{'AB'[q % 2]}"} for q in range(NQ)]
    (root / "lm").mkdir()
    (root / "lm" / "gnd_city.pkl").write_bytes(pickle.dumps(
        {"imlist": [f"db_{i:03d}" for i in range(NDB)], "qimlist": [f"q{q}" for q in range(NQ)], "gnd": gnd}))
    desc = root / "desc" / "gem"
    _store(desc / "queries", "queries", [f"q{q}" for q in range(NQ)], _unit(rng.normal(size=(NQ, DIM))))
    _store(desc / "database", "database", [f"db_{i:03d}" for i in range(NDB)], _unit(rng.normal(size=(NDB, DIM))))
    _store(desc / "candidates", "candidates", [str(i) for i in IDS], _unit(rng.normal(size=(NCAND, DIM))))
    taken = [None if i % 5 == 4 else ("2011-06-01 10:00:00.0" if i % 2 == 0 else "2013-03-02 08:00:00.0")
             for i in range(NCAND)]
    pq.write_table(pa.table({"photo_id": pa.array(IDS, pa.int64()), "date_taken": pa.array(taken, pa.string())}),
                   root / "candidates.parquet")
    return root


def _with_since(world, tmp_path, value):
    data = pickle.loads((world / "lm" / "gnd_city.pkl").read_bytes())
    for g in data["gnd"]:
        if g["landmark"] == "lmA":
            g["since"] = value
    (tmp_path / "lm").mkdir(exist_ok=True)
    (tmp_path / "lm" / "gnd_city.pkl").write_bytes(pickle.dumps(data))
    return tmp_path / "lm"


def _score(world, lm, out, *extra):
    return main(["score", "--landmarks", str(lm), "--descriptors", str(world / "desc" / "gem"), "--out", str(out),
                 "--candidates", str(world / "candidates.parquet"), "--review-top", "20", "--no-progress", *extra])


@pytest.mark.parametrize("value", ["2010-01-01garbage", "2010-01-01T00:00:00+02:00", "2010-01-01 00:00:00",
                                   "2010-01-01Z", " 2010-01-01", "2016-02-30", "20100101", 20100101])
def test_since_is_exactly_a_day_or_one_line_naming_the_landmark(world, tmp_path, capsys, value):
    rc = _score(world, _with_since(world, tmp_path, value), tmp_path / "out")
    err = capsys.readouterr().err
    assert rc == 2 and f"landmark lmA (query q0): since must be a date YYYY-MM-DD, got {value!r}" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_a_day_and_a_date_object_are_days_a_datetime_is_not():
    assert since.parse_day("2012-02-29", "x") == np.datetime64("2012-02-29")
    assert since.parse_day(datetime.date(2012, 2, 29), "x") == np.datetime64("2012-02-29")
    with pytest.raises(UserError, match="since must be a date YYYY-MM-DD"):
        since.parse_day(datetime.datetime(2010, 1, 1, tzinfo=datetime.timezone.utc), "x")


def test_a_day_later_than_today_is_refused(world, tmp_path, capsys):
    rc = _score(world, _with_since(world, tmp_path, "2999-01-01"), tmp_path / "out", "--late-since", "allow")
    err = capsys.readouterr().err
    assert rc == 2 and "landmark lmA: since 2999-01-01 is later than today" in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(UserError, match="later than today"):  # without candidates' dates too
        since.check_late({"x": np.datetime64("2999-01-01")}, None)


def test_a_day_later_than_every_candidate_needs_late_since_allow(world, tmp_path, capsys):
    lm = _with_since(world, tmp_path, "2014-01-01")  # every dated candidate is from 2011 or 2013
    assert _score(world, lm, tmp_path / "refused") == 2
    err = capsys.readouterr().err
    assert ("landmark lmA: since 2014-01-01 is later than every candidate's date_taken (the latest: 2013-03-02)"
            in err and "score.late_since: allow (--late-since allow)" in err)
    assert not (tmp_path / "refused").exists()

    assert _score(world, lm, tmp_path / "allowed", "--late-since", "allow") == 0
    whole = json.loads((tmp_path / "allowed" / "stats.json").read_text())
    st = whole["since"]
    from mining.files.checksums import file_sha256  # score's files are one run's: stats.json names them
    assert whole["files_sha256"] == {n: file_sha256(tmp_path / "allowed" / n)
                                     for n in ("scores.parquet", "review_queue.parquet")}
    dated = sum(1 for i in range(NCAND) if i % 5 != 4)
    assert st["landmarks"]["lmA"] == {"since": "2014-01-01", "candidates_before": dated, "late": True}
    queue = pq.read_table(tmp_path / "allowed" / "review_queue.parquet").to_pandas()
    undated = {IDS[i] for i in range(NCAND) if i % 5 == 4}
    assert set(queue[queue.landmark == "lmA"].photo_id) <= undated  # only photos without a date are left

    from mining.stages.report.charts import funnel
    from mining.stages.report.common import Inputs
    doc = funnel(Inputs(scores=tmp_path / "allowed"))
    assert f"taken before lmA (2014-01-01; later than every candidate, allowed)</td><td>{dated}</td>" in doc

    # leakrisk goes by what score allowed
    args = ["leakrisk", "--landmarks", str(lm), "--descriptors", str(world / "desc" / "gem"),
            "--candidates", str(world / "candidates.parquet")]
    assert main(args + ["--scores", str(tmp_path / "allowed"), "--out", str(tmp_path / "risk")]) == 0
    assert json.loads((tmp_path / "risk" / "stats.json").read_text())["since"]["landmarks"]["lmA"]["late"] is True
    assert _score(world, world / "lm", tmp_path / "plain") == 0  # a score run without the date
    assert main(args + ["--scores", str(tmp_path / "plain"), "--out", str(tmp_path / "risk2")]) == 2
    assert "did not allow it (score.late_since: allow)" in capsys.readouterr().err
    assert not (tmp_path / "risk2").exists()


def test_a_day_within_the_candidates_dates_needs_nothing(world, tmp_path):
    assert _score(world, _with_since(world, tmp_path, "2012-01-01"), tmp_path / "out") == 0
    st = json.loads((tmp_path / "out" / "stats.json").read_text())["since"]
    assert st["landmarks"]["lmA"] == {"since": "2012-01-01",
                                      "candidates_before": sum(1 for i in range(NCAND) if i % 5 != 4 and i % 2 == 0)}


def test_an_impossible_date_taken_does_not_defeat_the_late_guard(world, tmp_path, capsys):
    """One candidate dated 4501-01-01 (as in YFCC100M's own metadata), one at a camera's unset clock:
    they are no dates. `since` later than every plausible date is refused as before, and the
    photos dated impossibly are never exempt."""
    table = pq.read_table(world / "candidates.parquet").to_pydict()
    table["date_taken"][0] = "4501-01-01 00:00:00.0"
    table["date_taken"][2] = "1970-01-01 00:00:00.0"
    odd = tmp_path / "candidates.parquet"
    pq.write_table(pa.table({"photo_id": pa.array(table["photo_id"], pa.int64()),
                             "date_taken": pa.array(table["date_taken"], pa.string())}), odd)
    lm = _with_since(world, tmp_path, "2014-01-01")
    args = ["score", "--landmarks", str(lm), "--descriptors", str(world / "desc" / "gem"), "--candidates", str(odd),
            "--review-top", "20", "--no-progress"]
    assert main(args + ["--out", str(tmp_path / "refused")]) == 2
    assert "later than every candidate's date_taken (the latest: 2013-03-02)" in capsys.readouterr().err
    days = since.days_taken(odd, np.asarray(IDS[:3], np.int64))
    assert np.isnat(days[0]) and np.isnat(days[2]) and days[1] == np.datetime64("2013-03-02")
    assert main(args + ["--out", str(tmp_path / "allowed"), "--late-since", "allow"]) == 0
    st = json.loads((tmp_path / "allowed" / "stats.json").read_text())["since"]
    assert st["candidates_without_date"] == sum(1 for i in range(NCAND) if i % 5 == 4) + 2
    queue = pq.read_table(tmp_path / "allowed" / "review_queue.parquet").to_pandas()
    assert {IDS[0], IDS[2]} & set(queue[queue.landmark == "lmA"].photo_id)  # not exempt: reviewable
