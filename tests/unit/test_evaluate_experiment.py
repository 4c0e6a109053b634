"""The distractor experiment is exact: equal to ranking everything and running revisitop's loop."""

import json
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracle import compute_map_loop

from mining.files.answers import Label, queue_digest
from mining.cli import main
from mining.retrieval.descriptors import iter_similarities, open_store, write_global_shard, write_store_info
from mining.stages.evaluate.experiment import evaluate_setups, setup_base, top_n
from mining.stages.evaluate.histograms import Ranking, columns_of, load_method
from mining.stages.evaluate.protocols.setups import setup_gnd
from mining.datasets.landmarks import load_landmarks

DIM = 16


def _unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _store(path, method, set_, ids, vecs, shard_size=50):
    write_store_info(path, {"method": method, "kind": "global", "set": set_, "dim": DIM})
    for s in range(0, len(ids), shard_size):
        write_global_shard(path, f"{s // shard_size:05d}", ids[s : s + shard_size], vecs[s : s + shard_size])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("eval"))


def build_world(root):
    """Landmarks (6 queries, one without positives), 2 methods, 240 candidates incl. exact ties."""
    rng = np.random.default_rng(7)
    ndb, nq, ncand = 60, 6, 240
    imlist = [f"db_{i:03d}" for i in range(ndb)]
    qimlist = [f"lm{q % 3}_{q:03d}" for q in range(nq)]
    gnd = []
    for q in range(nq):
        items = rng.permutation(ndb)
        if q == 5:
            gnd.append({"bbx": [0, 0, 5, 5], "easy": [], "hard": [], "junk": items[:3].tolist(), "landmark": f"lm{q % 3}"})
            continue
        # random positives per query: the landmark comes from the file's `landmark` key
        gnd.append({"bbx": [0, 0, 5, 5], "easy": items[:5].tolist(), "hard": items[5:11].tolist(), "junk": items[11:15].tolist(),
                    "landmark": f"lm{q % 3}"})
    (root / "lm").mkdir(parents=True)
    (root / "lm" / "gnd_city.pkl").write_bytes(pickle.dumps({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}))
    cand_ids = [str(1000 + 7 * i) for i in range(ncand)]
    for method, seed in (("gem", 1), ("sift", 2)):
        r = np.random.default_rng(seed)
        centres = _unit(r.normal(size=(3, DIM)))
        qv = _unit(centres[[q % 3 for q in range(nq)]] + 0.3 * r.normal(size=(nq, DIM)))
        dbv = _unit(centres[r.integers(0, 3, ndb)] + 0.8 * r.normal(size=(ndb, DIM)))
        for q in range(5):  # positives close to their query
            for p in gnd[q]["easy"] + gnd[q]["hard"]:
                dbv[p] = _unit(qv[q][None] + 0.9 * r.normal(size=(1, DIM)))[0]
        cv = _unit(centres[r.integers(0, 3, ncand)] + 0.9 * r.normal(size=(ncand, DIM)))
        cv[:10] = dbv[gnd[0]["easy"][0]]  # exact ties with a positive: the landmark image must rank first
        keep_db = [i for i in r.permutation(ndb) if i != gnd[1]["hard"][0]]  # one positive never described
        d = root / "desc" / method
        _store(d / "queries", method, "queries", qimlist, qv)
        _store(d / "database", method, "database", [imlist[i] for i in keep_db], dbv[keep_db], shard_size=25)
        _store(d / "candidates", method, "candidates", cand_ids, cv)
    return root


def brute_force(method_dir, ds, photo_ids, setup):
    """Rank database + distractors for every query with a stable sort; revisitop's loop."""
    q_store, db_store, c_store = (open_store(method_dir / p) for p in ("queries", "database", "candidates"))
    ndb = len(ds.imlist)
    sims = np.full((len(ds.qimlist), ndb), -np.inf, np.float32)
    present = np.zeros(ndb, bool)
    for ids, s in iter_similarities(q_store, db_store):
        idx = [ds.imlist.index(i) for i in ids]
        sims[:, idx] = s
        present[idx] = True
    cand = {}
    for ids, s in iter_similarities(q_store, c_store):
        for j, i in enumerate(ids):
            cand[int(i)] = s[:, j]
    dsims = np.stack([cand[int(p)] for p in photo_ids], axis=1) if len(photo_ids) else np.zeros((len(ds.qimlist), 0), np.float32)
    keys = np.concatenate([np.flatnonzero(present), ndb + np.arange(len(photo_ids))])
    allsims = np.concatenate([sims[:, present], dsims], axis=1)
    ranks = keys[np.argsort(-allsims, axis=1, kind="stable")].T
    return compute_map_loop(ranks, setup_gnd(ds.gnd, setup), [1, 5, 10])


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


def run_inputs(world, tmp_path):
    """Scores that really measure distraction (positives beaten), a selection and decisions."""
    ds = load_landmarks(world / "lm")
    per_method = {}
    for method in ("gem", "sift"):
        md = load_method(world / "desc" / method, ds, [])
        stores = [open_store(world / "desc" / method / p) for p in ("queries", "candidates")]
        rows = [ds.qimlist.index(i) for i in stores[0].ids()]
        for ids, sims in iter_similarities(*stores):
            score = np.zeros(len(ids))
            for r, q in enumerate(rows):
                t = md.thresholds[q]
                if t.size:
                    score += np.searchsorted(t, sims[r], side="left").astype(float) / t.size
            per_method[method] = {**per_method.get(method, {}), **dict(zip(map(int, ids), score))}
    ids = np.array(sorted(per_method["gem"]), np.int64)
    cols = {f"score_{m}": np.array([per_method[m][i] for i in ids]) for m in per_method}
    total = sum(cols.values())
    scores = tmp_path / "scores"
    scores.mkdir()
    pq.write_table(pa.table({"photo_id": ids, "score": total, **cols}), scores / "scores.parquet")
    (scores / "stats.json").write_text(json.dumps({"landmarks_fingerprint": ds.fingerprint()}))
    landmark_ids = ids[np.argsort(-total)][:3]  # the three best-scoring ones "show a landmark"
    answered = np.append(landmark_ids, ids[-1])  # the review's answers, labelled as its export is (mining.files.answers)
    pq.write_table(pa.table({"landmark": ["lm0"] * 4, "photo_id": answered,
                             "decision": ["landmark"] * 3 + ["not_landmark"]}).replace_schema_metadata(
        Label("review", queue_digest(answered)).metadata()), tmp_path / "decisions.parquet")
    pq.write_table(pa.table({"landmark": ["lm0"] * 4, "photo_id": answered}), scores / "review_queue.parquet")
    keep = ~np.isin(ids, landmark_ids)
    order = np.lexsort((ids[keep], -total[keep]))[:40]
    sel = tmp_path / "selected"
    sel.mkdir()
    pq.write_table(pa.table({"photo_id": ids[keep][order], "score": total[keep][order]}), sel / "distractors.parquet")
    return ds, ids, landmark_ids, ids[keep][order]


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
