"""αQE and DBA rows of `mining evaluate`: the two steps against a direct numpy implementation,
and the rows' metrics against ranking everything by hand."""

import json

import numpy as np
import pytest
from oracle import compute_map_loop
from evaluate_world import build_world, run_inputs

from mining.cli import main
from mining.retrieval.descriptors import open_store
from mining.datasets.landmarks import load_landmarks
from mining.stages.evaluate import expansion
from mining.stages.evaluate.protocols.setups import setup_gnd


def _unit(x):
    x = np.asarray(x, np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def direct(base, y, n, alpha, exclude_self=False):
    """x' = normalise(x + Σ_{top n of y} max(s, 0)^α y), one row at a time, ties to the lower index."""
    out = []
    for i, x in enumerate(base):
        s = y @ x
        order = sorted((j for j in range(len(y)) if not (exclude_self and j == i)), key=lambda j: (-s[j], j))[:n]
        out.append(x + sum(max(float(s[j]), 0.0) ** alpha * y[j] for j in order))
    return _unit(out)


def test_alpha_qe_by_hand():
    y = _unit([[1, 0], [0.8, 0.6], [0, 1], [-1, 0]])
    q = _unit([[1, 0]])
    got = expansion.expand(q, y, 2, 3.0)
    want = _unit([[1 + 1 + 0.8 ** 4, 0.6 * 0.8 ** 3]])  # q + 1³·y0 + 0.8³·y1
    np.testing.assert_allclose(got, want, atol=1e-6)
    # α = 0 is average query expansion; a negative similarity weighs nothing
    np.testing.assert_allclose(expansion.expand(q, y, 2, 0.0), _unit([[2.8, 0.6]]), atol=1e-6)
    np.testing.assert_allclose(expansion.expand(_unit([[0, -1]]), y[[0, 3]], 2, 3.0), _unit([[0, -1]]), atol=1e-6)


def test_neighbours_are_exact_with_ties_to_the_lower_index():
    y = _unit([[1, 0], [0, 1], [1, 0], [0.6, 0.8], [1, 0]])  # rows 0, 2, 4 equal
    idx, sims = expansion.top_neighbours(y, y, 2, self_offset=0)
    assert idx.tolist() == [[2, 4], [3, 0], [0, 4], [1, 0], [0, 2]]
    assert sims[0].tolist() == [1.0, 1.0]
    # n beyond the other rows: all of them
    assert expansion.top_neighbours(y[:2], y[:2], 5, self_offset=0)[0].tolist() == [[1], [0]]


@pytest.mark.parametrize("n,alpha", [(1, 3.0), (2, 3.0), (5, 1.5)])
def test_dba_and_qe_match_the_direct_implementation(n, alpha, monkeypatch):
    rng = np.random.default_rng(n)
    y = _unit(rng.normal(size=(97, 8)))
    y[40] = y[3]  # a duplicate: ties
    q = _unit(rng.normal(size=(5, 8)))
    want = direct(y, y, n, alpha, exclude_self=True)
    got = expansion.augment(y, n, alpha)
    np.testing.assert_allclose(got, want, atol=2e-6)
    np.testing.assert_allclose(expansion.expand(q, got, n, alpha), direct(q, want, n, alpha), atol=2e-6)
    assert expansion.augment(y, n, alpha).tobytes() == got.tobytes()  # same input, same bytes
    monkeypatch.setattr(expansion, "TILE_BYTES", 4 * 97 * 3)  # three rows a block: the same neighbours
    np.testing.assert_allclose(expansion.augment(y, n, alpha), got, atol=1e-6)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("expansion"))


def _evaluate(world, tmp_path, out, *flags):
    return main(["evaluate", "--landmarks", str(world / "lm" / "gnd_city.pkl"),
                 "--descriptors", str(world / "desc" / "gem"), str(world / "desc" / "sift"),
                 "--scores", str(tmp_path / "scores"), "--selected", str(tmp_path / "selected"),
                 "--decisions", str(tmp_path / "decisions.parquet"), "--out", str(out), "--bootstrap-samples", "0",
                 *flags])


def by_hand(method_dir, ds, photo_ids, setup, steps, n=2, alpha=3.0):
    """Rank the landmark database and the distractors with the expanded vectors, revisitop's loop."""
    _, q = open_store(method_dir / "queries").load_all()
    db_ids, db = open_store(method_dir / "database").load_all()
    cand_ids, cand = open_store(method_dir / "candidates").load_all()
    ids = np.sort(np.asarray(photo_ids, np.int64))
    rows = [cand_ids.index(str(i)) for i in ids]
    y = _unit(np.concatenate([db, cand[rows]]))
    q = _unit(q)
    if "DBA" in steps:
        y = direct(y, y, n, alpha, exclude_self=True)
    if "αQE" in steps:
        q = direct(q, y, n, alpha)
    keys = np.concatenate([[ds.imlist.index(i) for i in db_ids], len(ds.imlist) + np.arange(ids.size)])
    ranks = keys[np.argsort(-(q @ y.T), axis=1, kind="stable")].T
    return compute_map_loop(ranks, setup_gnd(ds.gnd, setup), [1, 5, 10])


def test_rows_in_the_evaluation_match_ranking_by_hand(world, tmp_path):
    ds, _, _, selected = run_inputs(world, tmp_path)
    out = tmp_path / "eval"
    assert _evaluate(world, tmp_path, out, "--aqe-n", "2", "--dba-n", "2") == 0
    rep = json.loads((out / "evaluation.json").read_text())
    assert rep["methods"] == ["gem", "sift"]  # the plain rows stay the methods
    assert rep["expansion"]["aqe"] == {"n": 2, "alpha": 3.0} and rep["expansion"]["dba"] == {"n": 2, "alpha": 3.0}
    assert sorted(rep["variants"]) == sorted(["gem+αQE", "gem+DBA", "gem+DBA+αQE", "sift+αQE", "sift+DBA", "sift+DBA+αQE"])
    for row, steps in (("gem+αQE", ["αQE"]), ("gem+DBA", ["DBA"]), ("gem+DBA+αQE", ["DBA", "αQE"])):
        v = rep["variants"][row]
        assert v["method"] == "gem" and v["steps"] == steps
        for setup in ("easy", "hard"):
            r = v["results"][setup]
            assert r["all"] is None and r["random"]["mAP_std"] >= 0
            for kind, ids in (("none", []), ("mined", selected)):
                want = by_hand(world / "desc" / "gem", ds, ids, setup, steps)
                assert r[kind]["mAP"] == pytest.approx(want[0], abs=1e-12)
                assert [r[kind][f"mP@{k}"] for k in (1, 5, 10)] == pytest.approx(list(want[2]), abs=1e-12)
    # expansion changes the ranking: a row differs from the plain one somewhere
    assert any(rep["variants"]["gem+DBA+αQE"]["results"][s]["mined"]["mAP"] != rep["results"]["gem"][s]["mined"]["mAP"]
               for s in rep["setups"])
    table = (out / "evaluation.md").read_text()
    lines = table.splitlines()
    plain = lines.index(next(x for x in lines if x.startswith("| gem | all ")))
    assert lines[plain + 1].startswith("| gem+αQE | none |")  # beside the method's plain rows
    assert "| sift+DBA+αQE | mined 40 |" in table and "| gem+αQE | all " in table and "+αQE: each query plus its top 2" in table


def test_same_bytes_twice_and_off_by_default(world, tmp_path):
    run_inputs(world, tmp_path)
    texts = []
    for name in ("a", "b"):
        assert _evaluate(world, tmp_path, tmp_path / name, "--aqe-n", "2", "--dba-n", "3", "--aqe-alpha", "2.5") == 0
        rep = json.loads((tmp_path / name / "evaluation.json").read_text())
        del rep["seconds"]
        texts.append((json.dumps(rep, sort_keys=True), (tmp_path / name / "evaluation.md").read_bytes()))
    assert texts[0] == texts[1]
    assert json.loads(texts[0][0])["expansion"]["dba"]["n"] == 3
    assert _evaluate(world, tmp_path, tmp_path / "plain") == 0
    rep = json.loads((tmp_path / "plain" / "evaluation.json").read_text())
    assert "variants" not in rep and "expansion" not in rep
    assert "αQE" not in (tmp_path / "plain" / "evaluation.md").read_text()


def test_only_global_methods_get_rows(world, tmp_path):
    import shutil

    from mining.stages.evaluate.experiment import build_sets

    ds = load_landmarks(world / "lm")
    run_inputs(world, tmp_path)
    local = tmp_path / "local"
    shutil.copytree(world / "desc" / "gem", local)
    for part in ("queries", "database", "candidates"):
        info = json.loads((local / part / "store.json").read_text())
        (local / part / "store.json").write_text(json.dumps({**info, "kind": "asmk"}))
    sets = build_sets(tmp_path / "scores", tmp_path / "selected", None, None, [0])
    ex = expansion.Expansion(aqe_n=2)
    assert expansion.method_rows(local, ds, sets, ["hard"], ex) == {}
    assert list(expansion.method_rows(world / "desc" / "gem", ds, sets, ["hard"], ex)) == ["gem+αQE"]
