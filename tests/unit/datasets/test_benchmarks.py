"""Several benchmarks in one run (R1M: ROxford and RParis): one pool of candidates scored
against every benchmark's queries; the score of two benchmarks is exactly the sum of the two
one-benchmark scores on the same descriptors, and the review queue is every landmark's."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pyarrow.parquet as pq
import pytest

from mining.cli import main
from mining.retrieval.descriptors import write_global_shard, write_store_info
from mining.errors import UserError
from paths import ROOT


def write_store(folder, method, part, ids, vectors):
    write_store_info(folder, {"method": method, "kind": "global", "set": part, "dim": vectors.shape[1]})
    half = len(ids) // 2
    write_global_shard(folder, "00000", ids[:half], vectors[:half])
    write_global_shard(folder, "00001", ids[half:], vectors[half:])


def city(root, name, rng, n_db):
    """A gnd file whose query and landmark names are the same in every city (tower, bridge),
    so that only namespacing tells them apart."""
    imlist = [f"db{i}" for i in range(n_db)]
    qimlist = ["tower_001", "tower_002", "bridge_001"]
    pick = lambda k: sorted(rng.choice(n_db, size=k, replace=False).tolist())  # noqa: E731
    a, b = pick(4), pick(5)
    gnd = [{"bbx": [0, 0, 1, 1], "easy": a[:3], "hard": a[3:], "junk": []},
           {"bbx": [0, 0, 1, 1], "easy": a[:2], "hard": [], "junk": []},
           {"bbx": [0, 0, 1, 1], "easy": b[:2], "hard": b[2:], "junk": []}]
    (root / name).mkdir(parents=True)
    path = root / name / f"gnd_{name}.pkl"
    path.write_bytes(pickle.dumps({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}))
    return path, qimlist, imlist


def two_cities(tmp_path, n_cand=70, dim=16):
    """Two benchmarks and two methods, described the two-benchmark way (candidates once,
    DESC/<method>/benchmarks/<name>/{queries,database}); one-benchmark views of the very
    same stores (links) for each city alone. Float vectors, not dyadic: the products round."""
    rng = np.random.default_rng(5)
    gnds = {"oxf": city(tmp_path / "gnd", "oxf", rng, 14), "par": city(tmp_path / "gnd", "par", rng, 11)}
    cand_ids = [str(i) for i in rng.choice(10**8, n_cand, replace=False)]
    desc = tmp_path / "desc"
    for method in ("cnn", "gem"):
        ids = cand_ids if method == "cnn" else cand_ids[:-4]  # gem lacks 4 candidates
        write_store(desc / method / "candidates", method, "candidates", ids,
                    rng.standard_normal((len(ids), dim)).astype(np.float16))
        for name, (_, qimlist, imlist) in gnds.items():
            base = desc / method / "benchmarks" / name
            write_store(base / "queries", method, "queries", qimlist,
                        rng.standard_normal((len(qimlist), dim)).astype(np.float16))
            write_store(base / "database", method, "database", imlist,
                        rng.standard_normal((len(imlist), dim)).astype(np.float16))
            alone = tmp_path / f"desc_{name}" / method
            alone.mkdir(parents=True)
            for part in ("queries", "database"):
                (alone / part).symlink_to(base / part, target_is_directory=True)
            (alone / "candidates").symlink_to(desc / method / "candidates", target_is_directory=True)
    return gnds, desc


def score(tmp_path, out, landmarks, descs, top=4):
    assert main(["score", "--landmarks", *map(str, landmarks), "--descriptors", *map(str, descs),
                 "--out", str(out), "--review-top", str(top), "--chunk", "8", "--no-progress"]) == 0
    return (pq.read_table(out / "scores.parquet").to_pandas(), pq.read_table(out / "review_queue.parquet").to_pandas(),
            json.loads((out / "stats.json").read_text()))


def test_two_benchmark_score_is_exactly_the_sum_of_the_one_benchmark_scores(tmp_path):
    gnds, desc = two_cities(tmp_path)
    methods = ["cnn", "gem"]
    alone = {name: score(tmp_path, tmp_path / f"s_{name}", [gnds[name][0]],
                         [tmp_path / f"desc_{name}" / m for m in methods]) for name in gnds}
    both, queue, stats = score(tmp_path, tmp_path / "s_both", [gnds["oxf"][0], f"par={gnds['par'][0]}"],
                               [desc / m for m in methods])
    ox, pa_ = alone["oxf"][0], alone["par"][0]
    assert both.photo_id.tolist() == ox.photo_id.tolist() == pa_.photo_id.tolist()
    assert (ox.score > 0).any() and (pa_.score > 0).any()
    # exactly: bit for bit, not approximately
    assert both.score.tolist() == (ox.score + pa_.score).tolist()
    assert both.benchmark_score_oxf.tolist() == ox.score.tolist()
    assert both.benchmark_score_par.tolist() == pa_.score.tolist()
    for m in methods:
        np.testing.assert_array_equal(both[f"score_{m}"].to_numpy(), (ox[f"score_{m}"] + pa_[f"score_{m}"]).to_numpy())
    assert both.methods_missing.tolist() == ox.methods_missing.tolist()  # a method lacking one counts once
    assert both.columns.tolist() == ["photo_id", "score", "score_cnn", "score_gem", "benchmark_score_oxf",
                                     "benchmark_score_par", "closest_landmark", "methods_missing"]
    # the review queue: every landmark of both, namespaced; each one's rows those of its city alone
    assert stats["landmarks"] == ["oxf/tower", "oxf/bridge", "par/tower", "par/bridge"]
    assert set(both.closest_landmark.dropna()) <= set(stats["landmarks"])
    for name, (_, q_alone, _) in alone.items():
        mine = queue[queue.landmark.str.startswith(f"{name}/")].reset_index(drop=True)
        assert not mine.empty
        want = q_alone.copy()
        want["landmark"] = name + "/" + want.landmark
        want["best_query"] = name + "/" + want.best_query
        cols = [c for c in want.columns if c != "total_score"]  # the queue shows the run's total
        assert mine[cols].to_dict("records") == want[cols].to_dict("records")
        assert mine.total_score.tolist() == both.set_index("photo_id").score[mine.photo_id].tolist()
    assert [b["name"] for b in stats["benchmarks"]] == ["oxf", "par"]
    assert stats["landmark_queries"]["par/tower"] == ["par/tower_001", "par/tower_002"]
    assert set(stats["methods"]) == {"oxf/cnn", "oxf/gem", "par/cnn", "par/gem"}
    assert stats["landmarks_fingerprint"] not in (alone["oxf"][2]["landmarks_fingerprint"],
                                                  alone["par"][2]["landmarks_fingerprint"])


def test_benchmarks_named_alike_or_the_same_ground_truth_twice_are_refused(tmp_path, capsys):
    gnds, desc = two_cities(tmp_path, n_cand=10)
    out = tmp_path / "o"
    args = ["--descriptors", str(desc / "cnn"), "--out", str(out), "--no-progress"]
    assert main(["score", "--landmarks", f"x={gnds['oxf'][0]}", f"x={gnds['par'][0]}", *args]) == 2
    assert "two benchmarks are named 'x'" in capsys.readouterr().err
    assert main(["score", "--landmarks", str(gnds["oxf"][0]), f"again={gnds['oxf'][0]}", *args]) == 2
    assert "have the same ground truth" in capsys.readouterr().err
    # a benchmark without its own stores: one line naming the folder
    assert main(["score", "--landmarks", str(gnds["oxf"][0]), f"rome={gnds['par'][0]}", *args]) == 2
    assert "benchmarks/rome" in capsys.readouterr().err
    assert not out.exists()


def test_parse_and_namespace():
    from mining.datasets import benchmarks as B

    assert B.parse_arg("data/roxford5k/gnd_roxford5k.pkl") == B.Benchmark("roxford5k", "data/roxford5k/gnd_roxford5k.pkl")
    assert B.parse_arg("ox=data/gnd_roxford5k.pkl") == B.Benchmark("ox", "data/gnd_roxford5k.pkl")
    assert B.qualify("roxford5k", "all_souls", True) == "roxford5k/all_souls"
    assert B.qualify("roxford5k", "all_souls", False) == "all_souls"
    with pytest.raises(UserError, match="benchmark name 'bad name'"):
        B.as_list(["a/gnd_a.pkl", "b/gnd_bad name.pkl"])  # several: each name becomes a folder and a prefix
    assert B.as_list(["data/gnd_my city.pkl"])[0].name == "my city"  # one benchmark: its name is never used
    assert B.from_manifest("data/a/gnd_a.pkl") == [B.Benchmark("a", "data/a/gnd_a.pkl")]
    assert B.from_manifest([{"gnd": "a/gnd_roxford5k.pkl"}, {"gnd": "b/gnd_x.pkl", "name": "rparis6k"}]) == [
        B.Benchmark("roxford5k", "a/gnd_roxford5k.pkl"), B.Benchmark("rparis6k", "b/gnd_x.pkl")]
    with pytest.raises(UserError, match="two benchmarks are named 'a'"):
        B.from_manifest([{"gnd": "x/gnd_a.pkl"}, {"gnd": "y/gnd_a.pkl"}])


def test_landmarks_check_takes_several_benchmarks(tmp_path, capsys):
    gnds, _ = two_cities(tmp_path, n_cand=4)
    a, b = (str(gnds[n][0]) for n in ("oxf", "par"))
    assert main(["landmarks", "check", "--no-images", "--json", a, b]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [x["name"] for x in doc["benchmarks"]] == ["oxf", "par"]
    assert [x["name"] for x in doc["landmarks"]] == ["oxf/tower", "oxf/bridge", "par/tower", "par/bridge"]
    assert doc["queries"] == 6 and doc["database"] == 25
    assert main(["landmarks", "check", "--no-images", a, f"oxf={b}"]) == 2
    assert "two benchmarks are named 'oxf'" in capsys.readouterr().err
    assert main(["landmarks", "check", "--no-images", a, f"copy={a}"]) == 2
    assert "same ground truth" in capsys.readouterr().err
    # one file: the report names no benchmark
    assert main(["landmarks", "check", "--no-images", "--json", a]) == 0
    assert [x["name"] for x in json.loads(capsys.readouterr().out)["landmarks"]] == ["tower", "bridge"]


def test_manifest_takes_a_list_of_benchmarks(tmp_path):
    from mining.settings.manifest import load

    text = (ROOT / "manifests" / "r1m.yaml").read_text()
    m = load(_write(tmp_path / "r1m.yaml", text))
    assert [(b.name, b.gnd) for b in m.benchmarks()] == [
        ("roxford5k", "data/roxford5k/gnd_roxford5k.pkl"), ("rparis6k", "data/rparis6k/gnd_rparis6k.pkl")]
    head, _, tail = text.partition("\nlandmarks:")
    rest = tail.split("\n\n", 1)[1]
    for bad, words in (("[{gnd: a/gnd_x.pkl}, {gnd: b/gnd_x.pkl}]", "two benchmarks are named 'x'"),
                       ("[{gnd: a/gnd_x.pkl, name: 'no way'}]", "a benchmark name is"),
                       ("[{gnd: a/gnd_x.pkl, nme: y}]", "unknown key 'nme'"),
                       ("[]", "landmarks")):
        with pytest.raises(UserError, match=words):
            load(_write(tmp_path / "bad.yaml", f"{head}\nlandmarks: {bad}\n\n{rest}"))


def _write(path, text):
    path.write_text(text)
    return path


def test_evaluation_per_benchmark_is_each_ones_alone_plus_the_score_share(tmp_path):
    """One selected set evaluated on each benchmark: each part equals the one-benchmark
    evaluation of that set; the shares of the score sum to one."""
    import shutil

    import pyarrow as pa

    gnds, desc = two_cities(tmp_path, n_cand=40)
    both, _, _ = score(tmp_path, tmp_path / "s_both", [gnds["oxf"][0], gnds["par"][0]], [desc / "cnn", desc / "gem"])
    top = both.sort_values(["score", "photo_id"], ascending=[False, True]).photo_id.head(10).to_numpy()
    (tmp_path / "sel").mkdir()
    pq.write_table(pa.table({"photo_id": pa.array(top, pa.int64())}), tmp_path / "sel" / "distractors.parquet")
    args = ["--scores", str(tmp_path / "s_both"), "--selected", str(tmp_path / "sel"), "--random-seeds", "0", "1",
            "--bootstrap-samples", "50", "--no-progress"]
    assert main(["evaluate", "--landmarks", str(gnds["oxf"][0]), str(gnds["par"][0]), "--descriptors",
                 str(desc / "cnn"), str(desc / "gem"), "--out", str(tmp_path / "ev"), *args]) == 0
    report = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert list(report["per_benchmark"]) == ["oxf", "par"] and report["n"] == 10
    share = report["score_share"]["selected"]
    assert share["oxf"] + share["par"] == pytest.approx(1.0) and 0 < share["oxf"] < 1
    want = both.set_index("photo_id").loc[top]
    assert share["par"] == pytest.approx(want.benchmark_score_par.sum() / want.score.sum())
    # each benchmark's part: the one-benchmark evaluation of the same set on the same stores
    alone_scores = tmp_path / "s_alone"
    alone_scores.mkdir()
    shutil.copy(tmp_path / "s_both" / "scores.parquet", alone_scores)  # no stats.json: no fingerprint to match
    args[1] = str(alone_scores)
    for name in ("oxf", "par"):
        assert main(["evaluate", "--landmarks", str(gnds[name][0]), "--descriptors",
                     *(str(tmp_path / f"desc_{name}" / m) for m in ("cnn", "gem")),
                     "--out", str(tmp_path / f"ev_{name}"), *args]) == 0
        alone = json.loads((tmp_path / f"ev_{name}" / "evaluation.json").read_text())
        for key in ("methods", "results", "ablation", "ci", "landmarks"):
            assert report["per_benchmark"][name][key] == alone[key], (name, key)
    text = (tmp_path / "ev" / "evaluation.md").read_text()
    assert "| oxf |" in text and "## Evaluation: oxf" in text and "## Evaluation: par" in text


def test_review_app_shows_every_benchmarks_query_crops(tmp_path):
    """The review app given several benchmarks: a namespaced landmark lists its own
    benchmark's queries, and a query index of the second benchmark serves that one's image."""
    from fastapi.testclient import TestClient
    from review_world import make_world

    from mining.stages.review.app import create_app

    a, b = make_world(tmp_path / "a"), make_world(tmp_path / "b")
    gnd_b = b["landmarks"] / "gnd_test.pkl"
    data = pickle.loads(gnd_b.read_bytes())
    for g in data["gnd"]:
        g["bbx"] = [0, 0, 60, 45]  # another ground truth (and another crop) than a's
    gnd_b.write_bytes(pickle.dumps(data))
    queue = pq.read_table(a["queue"]).to_pandas()
    half = len(queue) // 2
    queue.loc[:half, "landmark"] = "oxf/" + queue.landmark[:half + 1]
    queue.loc[half + 1:, "landmark"] = "par/" + queue.landmark[half + 1:]
    queue["best_query"] = queue.landmark + "_001"
    queue.to_parquet(tmp_path / "queue.parquet")
    assert main(["review", "import", str(tmp_path / "queue.parquet"), "--db", str(a["db"])]) == 0
    app = create_app(db_path=a["db"], images=a["images"], landmarks=[f"oxf={a['landmarks']}", f"par={b['landmarks']}"])
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    listed = {lm["landmark"]: lm["queries"] for lm in client.get("/api/landmarks").json()["landmarks"]}
    assert listed["par/bridge"] == [{"index": 6, "name": "par/bridge_001"}, {"index": 7, "name": "par/bridge_002"}]
    assert [q["name"] for q in listed["oxf/tower"]] == ["oxf/tower_001", "oxf/tower_002"]
    from io import BytesIO

    from PIL import Image

    sizes = [Image.open(BytesIO(client.get(f"/query/{i}").content)).size for i in (0, 4)]
    assert sizes == [(90, 70), (60, 45)]  # each benchmark's own image and bbox
    assert client.get("/query/8").status_code == 404


def test_review_gate_names_every_benchmark(tmp_path):
    from mining.stages.review.gate import next_steps

    (tmp_path / "queue.parquet").touch()
    (tmp_path / "review.sqlite").touch()
    text = next_steps(tmp_path / "queue.parquet", tmp_path / "review.sqlite", tmp_path / "images",
                      ["roxford5k=data/roxford5k/gnd_roxford5k.pkl", "rparis6k=data/rparis6k/gnd_rparis6k.pkl"],
                      tmp_path / "decisions.parquet")
    assert "--landmarks roxford5k=data/roxford5k/gnd_roxford5k.pkl rparis6k=data/rparis6k/gnd_rparis6k.pkl" in text


def test_leak_risk_of_two_benchmarks_is_the_riskier_of_each_alone(tmp_path):
    gnds, desc = two_cities(tmp_path, n_cand=30)
    score(tmp_path, tmp_path / "s_both", [gnds["oxf"][0], gnds["par"][0]], [desc / "cnn"])
    assert main(["leakrisk", "--landmarks", str(gnds["oxf"][0]), str(gnds["par"][0]), "--descriptors", str(desc / "cnn"),
                 "--scores", str(tmp_path / "s_both"), "--out", str(tmp_path / "r_both")]) == 0
    both = pq.read_table(tmp_path / "r_both" / "leakrisk.parquet").to_pandas().set_index("photo_id")
    alone = {}
    for name in ("oxf", "par"):
        score(tmp_path, tmp_path / f"s_{name}", [gnds[name][0]], [tmp_path / f"desc_{name}" / "cnn"])
        assert main(["leakrisk", "--landmarks", str(gnds[name][0]), "--descriptors", str(tmp_path / f"desc_{name}" / "cnn"),
                     "--scores", str(tmp_path / f"s_{name}"), "--out", str(tmp_path / f"r_{name}")]) == 0
        alone[name] = pq.read_table(tmp_path / f"r_{name}" / "leakrisk.parquet").to_pandas().set_index("photo_id")
    ox, pa_ = alone["oxf"], alone["par"]
    np.testing.assert_allclose(both.risk, np.maximum(ox.risk, pa_.risk), atol=1e-6)
    want = np.where(ox.risk >= pa_.risk, "oxf/" + ox.landmark, "par/" + pa_.landmark)
    clear = (ox.risk - pa_.risk).abs() > 1e-5  # not a near tie
    assert (both.landmark[clear] == want[clear.to_numpy()]).all()
    stats = json.loads((tmp_path / "r_both" / "stats.json").read_text())
    assert set(stats["thresholds"]) == {"oxf/tower", "oxf/bridge", "par/tower", "par/bridge"}
    assert stats["thresholds"]["par/tower"] == json.loads((tmp_path / "r_par" / "stats.json").read_text())["thresholds"]["tower"]


def test_manifest_refuses_what_several_benchmarks_cannot_do(tmp_path):
    import yaml

    from mining.settings.manifest import load

    base = yaml.safe_load((ROOT / "manifests" / "demo-two.yaml").read_text())
    for edit, words in ((lambda m: m["select"].update(n="auto"), "n: auto measures one benchmark's curve"),
                        (lambda m: m.update(landmarks="data/gnd_x.pkl"), "landmarks: demo")):
        m = json.loads(json.dumps(base))
        edit(m)
        with pytest.raises(UserError, match=words):
            load(_write(tmp_path / "m.yaml", yaml.safe_dump(m)))
    assert [b.name for b in load(_write(tmp_path / "ok.yaml", yaml.safe_dump(base))).benchmarks(
        [("city1", "w/city1/gnd_city1.pkl"), ("city2", "w/city2/gnd_city2.pkl")])] == ["city1", "city2"]
