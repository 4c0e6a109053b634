"""The distractor experiment is exact: equal to ranking everything and running revisitop's loop."""

import json

import numpy as np
import pytest

from mining.cli import main
from mining.stages.evaluate.experiment import evaluate_setups, setup_base, top_n
from mining.stages.evaluate.histograms import Ranking, columns_of, load_method
from mining.datasets.landmarks import load_landmarks
from evaluate_world import brute_force, build_world, run_inputs


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("eval"))


@pytest.mark.parametrize("setup", ["easy", "medium", "hard"])
def test_exact_against_brute_force_ranking(world, setup):
    ds = load_landmarks(world / "lm")
    all_ids = np.array([1000 + 7 * i for i in range(240)], np.int64)
    rng = np.random.default_rng(3)
    perm = rng.permutation(all_ids)
    sets = [np.zeros(0, np.int64), all_ids[:10], rng.choice(all_ids, 90, replace=False), all_ids]
    # one ranking per set, and one ranking whose prefixes are nested sets
    rankings = [Ranking.of_set(ids) for ids in sets] + [Ranking(perm, [0, 5, 60, 240])]
    cases = [(i, ids.size, ids) for i, ids in enumerate(sets)] + [(len(sets), k, perm[:k]) for k in (0, 5, 60, 240)]
    for method in ("gem", "sift"):
        md = load_method(world / "desc" / method, ds, rankings)
        base = setup_base(md, ds.gnd, setup)
        for ranking, size, photo_ids in cases:
            got = evaluate_setups(md, {"_": base}, md.above(ranking, size))["_"]
            ref = brute_force(world / "desc" / method, ds, photo_ids, setup)
            assert got["mAP"] == ref[0]  # bit for bit, ties included
            assert [got["mP@1"], got["mP@5"], got["mP@10"]] == list(ref[2])


def test_distractors_only_lower_map_and_absent_ids_are_ignored(world):
    ds = load_landmarks(world / "lm")
    all_ids = np.array([1000 + 7 * i for i in range(240)], np.int64)
    unknown = np.array([5, 999999], np.int64)
    rankings = [Ranking(all_ids, [0, 50, 240]), Ranking(np.concatenate([unknown, all_ids[:50]]), [52])]
    md = load_method(world / "desc" / "gem", ds, rankings)
    base = setup_base(md, ds.gnd, "medium")
    ev = lambda r, k: evaluate_setups(md, {"_": base}, md.above(r, k))["_"]["mAP"]  # noqa: E731
    none, some, alls = ev(0, 0), ev(0, 50), ev(0, 240)
    assert none == evaluate_setups(md, {"_": base}, None)["_"]["mAP"]
    assert alls <= some <= none and alls < none
    assert ev(1, 52) == some  # ids that are no candidate of the store are ignored
    assert md.found(1, 52) == 50
    with_unknown = columns_of(md, np.array([5, 1000, 999999], np.int64))
    assert md.cand_ids[with_unknown].tolist() == [1000]
    with pytest.raises(ValueError, match="not tallied"):
        md.above(0, 7)


def test_top_n_tie_break_is_score_desc_then_photo_id():
    ids = np.array([9, 3, 5, 7])
    assert top_n(ids, np.array([1.0, 2.0, 2.0, 0.5]), 3).tolist() == [3, 5, 9]
    assert top_n(ids, np.ones(4), 10).tolist() == [3, 5, 7, 9]


def test_cli_writes_json_and_table_and_mined_is_harder(world, tmp_path):
    ds, ids, landmark_ids, selected = run_inputs(world, tmp_path)
    out = tmp_path / "eval"
    rc = main(["evaluate", "--landmarks", str(world / "lm" / "gnd_city.pkl"),
               "--descriptors", str(world / "desc" / "gem"), str(world / "desc" / "sift"),
               "--scores", str(tmp_path / "scores"), "--selected", str(tmp_path / "selected"),
               "--decisions", str(tmp_path / "decisions.parquet"), "--out", str(out),
               "--random-seeds", "0", "1", "2"])
    assert rc == 0
    rep = json.loads((out / "evaluation.json").read_text())
    assert rep["setups"] == ["easy", "medium", "hard"]  # the default: E, M and H, as revisitop reports
    assert rep["n"] == 40 and rep["pool"] == len(ids) - 3 and rep["methods"] == ["gem", "sift"]
    assert rep["missing"]["gem"] == {"mined": 0, "all": 0, "queries": 0, "database": 1}  # one positive never described
    for m in ("gem", "sift"):
        for s in ("easy", "medium", "hard"):
            r = rep["results"][m][s]
            assert r["mined"]["mAP"] < r["random"]["mAP"] < r["none"]["mAP"]
            assert r["all"]["mAP"] <= r["mined"]["mAP"]
            assert r["random"]["mAP_std"] > 0
            assert set(rep["ablation"][m][s]) == {"gem", "sift"}
            curve = rep["curve"][m][s]
            assert curve["sizes"][0] == 0 and curve["sizes"][-1] == 40
            assert curve["mined"][0] == pytest.approx(r["none"]["mAP"]) and curve["mined"][-1] == pytest.approx(r["mined"]["mAP"])
    # the mined set of the JSON is exactly brute force with the selected ids
    ref = brute_force(world / "desc" / "gem", ds, selected, "hard")
    assert rep["results"]["gem"]["hard"]["mined"]["mAP"] == pytest.approx(ref[0])
    # random and all never include a confirmed landmark image: all == brute force without them
    pool = np.setdiff1d(ids, landmark_ids)
    ref_all = brute_force(world / "desc" / "sift", ds, pool, "medium")
    assert rep["results"]["sift"]["medium"]["all"]["mAP"] == pytest.approx(ref_all[0])
    table = (out / "evaluation.md").read_text()
    assert "| gem | mined 40 |" in table and "without sift" in table


def test_cli_n_larger_than_candidates_means_all(world, tmp_path):
    _, ids, _, _ = run_inputs(world, tmp_path)
    out = tmp_path / "eval"
    rc = main(["evaluate", "--landmarks", str(world / "lm"), "--descriptors", str(world / "desc" / "gem"),
               "--scores", str(tmp_path / "scores"), "--selected", str(tmp_path / "selected"),
               "--decisions", str(tmp_path / "decisions.parquet"), "--out", str(out), "--n", "100000",
               "--random-seeds", "4", "--setups", "easy"])
    assert rc == 0
    rep = json.loads((out / "evaluation.json").read_text())
    r = rep["results"]["gem"]["easy"]
    assert rep["n"] == len(ids) - 3 and rep["mined_source"].startswith("reselected")
    assert r["mined"]["mAP"] == pytest.approx(r["all"]["mAP"]) == pytest.approx(r["random"]["mAP"])


def test_cli_bad_inputs_are_one_line_errors(world, tmp_path, capsys):
    run_inputs(world, tmp_path)
    base = ["evaluate", "--landmarks", str(world / "lm"), "--descriptors", str(world / "desc" / "gem"),
            "--scores", str(tmp_path / "scores"), "--selected", str(tmp_path / "selected"), "--out", str(tmp_path / "o")]
    assert main(base + ["--setups", "medium", "extreme"]) == 2
    assert main(base[:5] + ["--scores", str(tmp_path / "nowhere")] + base[7:]) == 2
    (tmp_path / "scores" / "stats.json").write_text(json.dumps({"landmarks_fingerprint": "0" * 16}))
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "extreme" in err and "not found" in err and "other landmarks" in err


def test_prefix_classes_match_the_definition_with_repeats_and_unknown_ids():
    """Each id's class per ranking = index of the smallest prefix size above its first rank
    (-1: in no prefix), checked against a dictionary built rank by rank."""
    from mining.stages.evaluate.histograms import _Classes

    rng = np.random.default_rng(4)
    for _ in range(30):
        pool = np.sort(rng.choice(500, int(rng.integers(1, 80)), replace=False)).astype(np.int64)
        rankings = [Ranking(pool, [pool.size]), Ranking(rng.permutation(pool), sorted({0, 5, int(rng.integers(1, 90))}))]
        rankings += [Ranking(rng.choice(600, int(rng.integers(0, 70))).astype(np.int64), sorted(set(rng.integers(0, 80, 3).tolist())))
                     for _ in range(2)]  # repeated ids and ids outside the pool
        probe = rng.permutation(np.arange(-5, 650, dtype=np.int64))  # unsorted lookups
        got = _Classes(rankings).of(probe)
        got_by_id = {int(pid): got[:, k].tolist() for k, pid in enumerate(probe)}
        for o, r in enumerate(rankings):
            sizes = sorted(set(int(s) for s in r.sizes))
            want: dict[int, int] = {}
            for rank, pid in enumerate(r.ids.tolist()):
                above = [c for c, size in enumerate(sizes) if size > rank]
                if above and pid not in want:
                    want[pid] = above[0]
            for pid in probe.tolist():
                assert got_by_id[pid][o] == want.get(pid, -1)
