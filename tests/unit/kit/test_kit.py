"""The evaluation kit on a small generated world (tests/unit/stages/evaluate/test_experiment.py's: 2 global methods,
exact ties, a positive never described): written from a run's stores and evaluation, it
reproduces that evaluation's none / mined / curve values exactly, and holds only the selection.
The demo run's kit (three real methods, ASMK included) is tests/workflow/test_kit.py."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from evaluate_world import build_world, run_inputs

from mining.cli import main
from mining.errors import UserError
from mining.stages.evaluate.stage import run_kit
from mining.kit import open_kit
from mining.kit.write import write_kit
from mining.methods import get_method


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("kitworld"))


def test_kit_reproduces_the_evaluation_exactly(world, tmp_path):
    ds, _, _, selected = run_inputs(world, tmp_path)
    out = tmp_path / "eval"
    assert main(["evaluate", "--landmarks", str(world / "lm/gnd_city.pkl"), "--descriptors", str(world / "desc/gem"),
                 str(world / "desc/sift"), "--scores", str(tmp_path / "scores"), "--selected", str(tmp_path / "selected"),
                 "--decisions", str(tmp_path / "decisions.parquet"), "--out", str(out), "--bootstrap-samples", "0"]) == 0
    run = json.loads((out / "evaluation.json").read_text())
    sel = pd.DataFrame({"rank": np.arange(1, selected.size + 1), "photo_id": selected,
                        "path": [f"jpg/000/{i}.jpg" for i in selected], "released": selected % 2 == 0})
    stats = write_kit(tmp_path / "kit", [world / "desc/gem", world / "desc/sift"], sel, run, shard_rows=16)
    kit = open_kit(tmp_path / "kit")
    assert kit.methods == ["gem", "sift"] and stats["methods"]["gem"]["distractors"] == selected.size
    ids, x = kit.vectors("gem", "distractors")
    assert sorted(map(int, ids)) == sorted(selected.tolist()) and x.shape == (selected.size, 16)
    assert len(kit.store("gem", "distractors").shard_names()) == 3  # 40 rows: 16 + 16 + 8
    rep = run_kit(kit=tmp_path / "kit", landmarks=[str(world / "lm/gnd_city.pkl")])
    assert rep["reproduced"]["ok"] and rep["reproduced"]["values"] == 2 * 3 * (8 + len(run["curve"]["gem"]["easy"]["sizes"]))
    for m in ("gem", "sift"):
        for s in ("easy", "medium", "hard"):
            for kind in ("none", "mined"):
                assert rep["results"][m][s][kind] == run["results"][m][s][kind]  # equal, not merely close
            assert rep["curve"][m][s]["mined"] == run["curve"][m][s]["mined"]
    assert kit.distractors()["released"].sum() == int((selected % 2 == 0).sum())


def test_kit_refuses_other_landmarks_and_a_missing_evaluation(world, tmp_path):
    import pickle

    gnd = pickle.loads((world / "lm/gnd_city.pkl").read_bytes())
    gnd["gnd"][0]["easy"] = gnd["gnd"][0]["easy"][1:]
    other = tmp_path / "gnd_city.pkl"
    other.write_bytes(pickle.dumps(gnd))
    sel = pd.DataFrame({"rank": [1], "photo_id": [1000], "path": ["x"], "released": [True]})
    with pytest.raises(UserError, match="--evaluation"):
        write_kit(tmp_path / "k0", [world / "desc/gem"], sel, None)
    run = {"landmarks": {"name": "city", "fingerprint": "not-this-one"}, "n": 1, "methods": ["gem"],
           "setups": ["hard"], "curve": {"gem": {"hard": {"sizes": [0, 1]}}}}
    write_kit(tmp_path / "k1", [world / "desc/gem"], sel, run)
    with pytest.raises(UserError, match="not the landmark dataset this kit was made for"):
        run_kit(kit=tmp_path / "k1", landmarks=[str(other)])


def test_kit_of_a_run_with_two_benchmarks(world, tmp_path):
    """Two benchmarks (the world's gnd, and a copy with other positives for one query): the kit
    keeps each one's landmark stores under benchmarks/<name>/ and reproduces each one's table."""
    import pickle
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    _, _, _, selected = run_inputs(world, tmp_path)
    gnd = pickle.loads((world / "lm/gnd_city.pkl").read_bytes())
    gnd["gnd"][0]["easy"], gnd["gnd"][0]["hard"] = gnd["gnd"][0]["hard"], gnd["gnd"][0]["easy"]
    (tmp_path / "b").mkdir()
    (tmp_path / "b/gnd_b.pkl").write_bytes(pickle.dumps(gnd))
    desc = tmp_path / "desc2/gem"
    shutil.copytree(world / "desc/gem/candidates", desc / "candidates")
    for name in ("a", "b"):
        for part in ("queries", "database"):
            shutil.copytree(world / "desc/gem" / part, desc / "benchmarks" / name / part)
    scores = pq.read_table(tmp_path / "scores/scores.parquet")
    half = pa.compute.divide(scores.column("score"), 2.0)
    pq.write_table(scores.append_column("benchmark_score_a", half).append_column("benchmark_score_b", half),
                   tmp_path / "scores/scores.parquet")
    (tmp_path / "scores/stats.json").unlink()
    landmarks = [f"a={world / 'lm/gnd_city.pkl'}", f"b={tmp_path / 'b/gnd_b.pkl'}"]
    assert main(["evaluate", "--landmarks", *landmarks, "--descriptors", str(desc), "--scores", str(tmp_path / "scores"),
                 "--selected", str(tmp_path / "selected"), "--out", str(tmp_path / "eval"),
                 "--bootstrap-samples", "0"]) == 0
    run = json.loads((tmp_path / "eval/evaluation.json").read_text())
    sel = pd.DataFrame({"rank": np.arange(1, selected.size + 1), "photo_id": selected, "path": "p", "released": True})
    write_kit(tmp_path / "kit", [desc], sel, run)
    kit = open_kit(tmp_path / "kit")
    assert kit.benchmarks == ["a", "b"] and (tmp_path / "kit/methods/gem/benchmarks/b/queries/store.json").is_file()
    rep = run_kit(kit=tmp_path / "kit", landmarks=landmarks)
    for name in ("a", "b"):
        got, want = rep["per_benchmark"][name], run["per_benchmark"][name]
        assert got["reproduced"]["ok"] and got["results"]["gem"] == {
            s: {k: want["results"]["gem"][s][k] for k in ("none", "mined")} for s in want["setups"]}
    assert rep["per_benchmark"]["a"]["results"] != rep["per_benchmark"]["b"]["results"]
    with pytest.raises(UserError, match="the kit's benchmarks are a, b"):
        run_kit(kit=tmp_path / "kit", landmarks=[f"c={tmp_path / 'b/gnd_b.pkl'}"])


def test_kit_similarities_are_the_runs_bits_from_the_selected_rows_alone(tmp_path):
    """The kit computes ASMK similarities on the kept rows only and a global method's on the
    shards that hold one: both equal, bit for bit, what evaluate computes over the whole pool."""
    from mining.retrieval.descriptors import iter_similarities, open_store, write_global_shard, write_ids, write_store_info
    from mining.methods.rsift_asmk import RSiftAsmk
    from mining.retrieval.methodstores import parse_ids

    rng = np.random.default_rng(5)
    pool = [str(5000 + i) for i in range(300)]
    asmk = RSiftAsmk()
    for part, names in (("queries", [f"q{i}" for i in range(7)]), ("database", [f"d{i}" for i in range(40)]),
                        ("candidates", pool)):
        for s in range(0, len(names), 50):
            shard = f"{s // 50:05d}"
            payloads = [(np.sort(rng.choice(64, int(rng.integers(0, 40)), replace=False)).astype(np.int32),
                         rng.integers(0, 256, (0, 16), dtype=np.uint8)) for _ in names[s:s + 50]]
            payloads = [(w, rng.integers(0, 256, (w.size, 16), dtype=np.uint8)) for w, _ in payloads]
            (tmp_path / "asmk" / part / "shards").mkdir(parents=True, exist_ok=True)
            asmk.write_payloads(tmp_path / "asmk" / part / "shards", shard, payloads)
            write_ids(tmp_path / "asmk" / part, shard, names[s:s + 50])
            x = rng.normal(size=(len(names[s:s + 50]), 24)).astype(np.float32)
            write_global_shard(tmp_path / "gem" / part, shard, names[s:s + 50], x / np.linalg.norm(x, axis=1)[:, None])
        write_store_info(tmp_path / "asmk" / part, {"method": "rsift-asmk", "kind": "asmk", "set": part, "dim": 0,
                                                    "params": dict(asmk.defaults)})
        write_store_info(tmp_path / "gem" / part, {"method": "gem", "kind": "global", "set": part, "dim": 24})
    chosen = np.sort(rng.choice(np.arange(5000, 5200), 45, replace=False))  # shards 4 and 5 hold none
    sel = pd.DataFrame({"rank": np.arange(1, 46), "photo_id": chosen, "path": "x.jpg", "released": True})
    write_kit(tmp_path / "kit", [tmp_path / "asmk", tmp_path / "gem"], sel,
              {"landmarks": {"name": "b", "fingerprint": "0"}, "n": 45, "methods": []}, shard_rows=20,
              method_of=get_method)
    for name, d in (("rsift-asmk", tmp_path / "asmk"), ("gem", tmp_path / "gem")):
        cols = {}
        for ids, sims in iter_similarities(open_store(d / "queries", get_method), open_store(d / "candidates", get_method)):
            cols.update({int(i): sims[:, j] for j, i in enumerate(ids)})
        kit_ids = parse_ids(open_store(tmp_path / "kit/methods" / name / "distractors").ids(), name)
        assert kit_ids.tolist() == chosen.tolist()
        want = np.stack([cols[int(i)] for i in kit_ids], axis=1)
        got = np.load(tmp_path / "kit/methods" / name / "similarities/distractors.npy")
        assert got.dtype == np.float32 and got.tobytes() == want.tobytes()
        assert np.count_nonzero(got) > got.size // 2  # words shared: real similarities, not zeros
