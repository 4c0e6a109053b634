"""`select: {n: auto}`: N from the mined mAP-vs-N curve (the evaluate tests' synthetic world)."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mining.stages.evaluate import choose_n
from mining.cli import main
from evaluate_world import brute_force, build_world, run_inputs


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("auto"))


def test_choose_takes_the_smallest_size_that_holds_from_there_on():
    sizes = [1, 2, 4, 8, 16]
    curves = {"a": {"hard": {"all": 0.20, "mined": [0.5, 0.205, 0.30, 0.209, 0.2]}},  # holds at 2, breaks at 4
              "b": {"hard": {"all": 0.40, "mined": [0.5, 0.45, 0.415, 0.41, 0.4]}}}
    got = choose_n.choose(curves, sizes, 0.05)
    assert got["first_ok"] == {"a": {"hard": 8}, "b": {"hard": 4}}
    assert got["n"] == 8 and got["binding"] == ["a/hard"]
    assert choose_n.choose(curves, sizes, 0.0)["n"] == 16  # the last point always holds
    assert choose_n.grid(1000)[:3] == [1, 2, 3] and choose_n.grid(1000)[-1] == 1000


def test_select_n_auto_picks_n_from_the_curve_and_says_why(world, tmp_path):
    ds, ids, landmark_ids, _ = run_inputs(world, tmp_path)
    (tmp_path / "scores" / "stats.json").write_text(json.dumps({"landmarks_fingerprint": ds.fingerprint(),
                                                                "landmarks": ds.landmarks}))
    pq.write_table(pa.table({"photo_id": ids, "server_id": [1] * len(ids), "secret": ["ab12"] * len(ids),
                             "license_name": ["CC BY"] * len(ids), "license_url": ["https://x"] * len(ids),
                             "user_nsid": ["u@N00"] * len(ids)}), tmp_path / "cands.parquet")
    out = tmp_path / "sel"
    rc = main(["select", "--scores", str(tmp_path / "scores"), "--decisions", str(tmp_path / "decisions.parquet"),
               "--candidates", str(tmp_path / "cands.parquet"), "--landmarks", str(world / "lm"),
               "--n", "auto", "--descriptors", str(world / "desc" / "gem"), str(world / "desc" / "sift"),
               "--auto-tolerance", "0.1", "--evaluate-setups", "medium", "hard", "--out", str(out)])
    assert rc == 0
    auto = json.loads((out / "auto_n.json").read_text())
    n = auto["n"]
    assert auto["available"] == len(ids) - 3 and 1 <= n < auto["available"]
    assert len((out / "distractors.txt").read_text().split()) == n
    selected = pq.read_table(out / "distractors.parquet").column("photo_id").to_numpy()
    pool = np.setdiff1d(ids, landmark_ids)
    k = auto["sizes"].index(n)
    for m in ("gem", "sift"):
        for s in ("medium", "hard"):
            c = auto["curves"][m][s]
            # the curve is exact: brute force with the selected N and with every candidate
            assert c["mined"][k] == pytest.approx(brute_force(world / "desc" / m, ds, selected, s)[0])
            assert c["all"] == pytest.approx(brute_force(world / "desc" / m, ds, pool, s)[0])
            assert all(v <= 1.1 * c["all"] + 1e-12 for v in c["mined"][k:])
    # the same selection as asking for N directly (auto hands its ranking to select)
    rc = main(["select", "--scores", str(tmp_path / "scores"), "--decisions", str(tmp_path / "decisions.parquet"),
               "--candidates", str(tmp_path / "cands.parquet"), "--landmarks", str(world / "lm"),
               "--n", str(n), "--out", str(tmp_path / "fixed")])
    assert rc == 0
    assert (tmp_path / "fixed" / "distractors.txt").read_bytes() == (out / "distractors.txt").read_bytes()
    assert (tmp_path / "fixed" / "distractors.parquet").read_bytes() == (out / "distractors.parquet").read_bytes()
    # the grid point below N breaks the rule for the binding method/setup
    m, s = auto["binding"][0].split("/")
    assert auto["curves"][m][s]["mined"][k - 1] > 1.1 * auto["curves"][m][s]["all"]
    # a tighter tolerance needs more distractors
    rc = main(["select", "--scores", str(tmp_path / "scores"), "--decisions", str(tmp_path / "decisions.parquet"),
               "--candidates", str(tmp_path / "cands.parquet"), "--landmarks", str(world / "lm"),
               "--n", "auto", "--descriptors", str(world / "desc" / "gem"), "--auto-tolerance", "0.01",
               "--out", str(tmp_path / "sel2")])
    assert rc == 0 and json.loads((tmp_path / "sel2" / "auto_n.json").read_text())["n"] >= n


def test_bad_n_is_one_line(world, tmp_path, capsys):
    run_inputs(world, tmp_path)
    rc = main(["select", "--scores", str(tmp_path / "scores"), "--decisions", str(tmp_path / "decisions.parquet"),
               "--candidates", str(tmp_path / "x.parquet"), "--n", "lots", "--out", str(tmp_path / "o")])
    assert rc == 2 and "--n must be a positive integer or auto" in capsys.readouterr().err
