"""The evaluation kit (`mining release --kit`, `mining evaluate --kit`) on the session's demo run
(tests/conftest.py's `demo_run`; the workflow's release writes RELEASE/kit/ by default): the
run's table reproduced from the kit alone with every image, store and world file of the run out
of reach, checksums that refuse a changed kit, and a user's own queries evaluated against it
(checked against revisitop's loop over an explicit ranking of database + distractors)."""

from __future__ import annotations

import json
import os
import pickle
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from oracle import compute_map_loop

from mining.cli import main
from mining.stages.evaluate.protocols.setups import setup_gnd
from mining.kit import open_kit
from mining.methods import get_method
from mining.retrieval.methodstores import open_method

METRICS = ("mAP", "mP@1", "mP@5", "mP@10")
MINING = str(Path(sys.executable).parent / "mining")


def _root(demo_run: Path) -> Path:
    return demo_run / "results/demo"


def _out_of_reach(root: Path, empty: Path, argv: list[str]) -> subprocess.CompletedProcess:
    """`mining ARGV` where the run's images, descriptor stores and demo world (its landmark images)
    are empty folders: an empty folder mounted over each in a mount namespace of that process
    alone (unshare), so the shared demo run that other tests read at the same time is untouched."""
    empty.mkdir(exist_ok=True)
    mounts = " && ".join(f'mount --bind "$1" {shlex.quote(str(root / name))}' for name in ("images", "descriptors", "world"))
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    return subprocess.run(["unshare", "--mount", "--propagation", "private", *user, "sh", "-c",
                           f'{mounts} && shift && exec "$@"', "sh", str(empty), MINING, *argv],
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def kit_copy(demo_run, tmp_path_factory):
    """The demo release's kit and the gnd, copied out of the run."""
    root = _root(demo_run)
    where = tmp_path_factory.mktemp("kit")
    shutil.copytree(root / "release/kit", where / "kit")
    shutil.copy(root / "world/landmarks/gnd_demo.pkl", where / "gnd_demo.pkl")
    return where


def test_the_release_kit_verifies_and_is_on_the_card(demo_run):
    rel = _root(demo_run) / "release"
    for folder in (rel / "kit", rel):  # its own sums, and the release's cover it too
        r = subprocess.run(["sha256sum", "-c", "--strict", "--quiet", "SHA256SUMS"], cwd=folder, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    kit = open_kit(rel / "kit")
    run = json.loads((_root(demo_run) / "evaluation/evaluation.json").read_text())
    # the kit has the methods themselves (the held-out one included); the "+SP" rows come from the run's
    # verified similarities it keeps beside them (no keypoints)
    assert "rsift-asmk+SP" in run["methods"] and kit.spatial_of("rsift-asmk") and not kit.spatial_of("cnn-gem")
    assert kit.methods == sorted(m for m in run["methods"] if not m.endswith("+SP")) == [
        "cnn-gem", "cnn-gem-lite2", "rsift-asmk", "rsift-vlad"]
    table = kit.distractors()
    selected = json.loads((_root(demo_run) / "selected/stats.json").read_text())
    assert len(table) == selected["n_selected"] and list(table["rank"]) == list(range(1, len(table) + 1))
    assert not any(p.suffix.lower() in (".jpg", ".jpeg") for p in (rel / "kit").rglob("*"))
    card = (rel / "README.md").read_text()
    for m, v in kit.info["methods"].items():
        assert v["distractors"] == len(table) - v["missing"]
        assert f"| {m} | {v['distractors']} | {v['bytes_per_distractor']} | {v['gb_per_million']} GB |" in card
    assert kit.info["methods"]["cnn-gem"]["params"]["whiten"] is True and kit.model("rsift-vlad") is not None


def test_kit_similarities_are_the_runs_bit_for_bit(demo_run):
    """The kit keeps the similarities the run's evaluation ranked by (same code, same shards: the
    same float32 bits) and the stores' own descriptor bytes, which give them again to rounding."""
    root = _root(demo_run)
    kit = open_kit(root / "release/kit", method_of=get_method)
    for m in kit.methods:
        ks = kit.stores(m)
        run = open_method(root / "descriptors" / m, method_of=get_method)
        run_sims = {}
        for ids, block in run.candidate_similarities():
            for j, i in enumerate(ids):
                run_sims[i] = block[:, j]
        lm, dis = kit.similarities(m)
        kit_ids = ks.candidates.ids()
        assert len(kit_ids) == dis.shape[1] == 30
        assert all(np.array_equal(dis[:, c], run_sims[i]) for c, i in enumerate(kit_ids)), m
        from_descriptors = np.concatenate([b for _, b in ks.candidate_similarities()], axis=1)
        assert np.abs(from_descriptors - dis).max() <= 1e-5, m  # float32 GEMM of another shape: last bits
        assert ks.queries.ids() == run.queries.ids()
        if ks.candidates.kind == "asmk":  # no GEMM: the same bits from the descriptors too
            assert np.array_equal(from_descriptors, dis)


def test_evaluate_kit_reproduces_the_demo_table_without_any_image(demo_run, kit_copy, tmp_path):
    root = _root(demo_run)
    run = json.loads((root / "evaluation/evaluation.json").read_text())
    out = kit_copy / "out"
    r = _out_of_reach(root, tmp_path / "empty", ["evaluate", "--kit", str(kit_copy / "kit"), "--landmarks",
                                                 str(kit_copy / "gnd_demo.pkl"), "--out", str(out)])
    printed = r.stdout
    assert r.returncode == 0, printed + r.stderr
    got = json.loads((out / "evaluation.json").read_text())
    assert got["reproduced"]["ok"] and got["reproduced"]["max_abs_diff"] <= 1e-6
    n_values = 0
    for m in (m for m in run["methods"] if not m.endswith("+SP")):  # the kit's methods (no keypoints in it)
        for s in run["setups"]:
            for kind in ("none", "mined"):
                for key in METRICS:
                    assert abs(got["results"][m][s][kind][key] - run["results"][m][s][kind][key]) <= 1e-6, (m, s, kind)
                    n_values += 1
            assert got["curve"][m][s]["sizes"] == run["curve"][m][s]["sizes"]
            assert np.allclose(got["curve"][m][s]["mined"], run["curve"][m][s]["mined"], rtol=0, atol=1e-6)
    assert n_values == 4 * 3 * 2 * 4  # cnn-gem, rsift-asmk, rsift-vlad and the held-out cnn-gem-lite2
    assert got["held_out"] == ["cnn-gem-lite2"] and "cnn-gem-lite2 (held out)" in printed
    # every row of the run's table: +SP from the verified similarities the kit keeps, αQE/DBA again
    assert got["reproduced"]["not_reproduced"] == [] and "rsift-asmk+SP" in got["methods"]
    assert sorted(got["variants"]) == sorted(run["variants"]) and "cnn-gem-lite2+DBA+αQE (held out)" in printed
    for row in ["rsift-asmk+SP"]:
        for s in run["setups"]:
            for kind in ("none", "mined"):
                assert got["results"][row][s][kind]["mAP"] == pytest.approx(run["results"][row][s][kind]["mAP"], abs=1e-9)
    for row, v in run["variants"].items():
        for s in run["setups"]:
            for kind in ("none", "mined"):
                assert got["variants"][row]["results"][s][kind]["mAP"] == pytest.approx(
                    v["results"][s][kind]["mAP"], abs=1e-9), (row, s, kind)
    assert "Reproduces the run's evaluation.json" in printed and f"mined {run['n']}" in printed
    # the mined set is harder than none for some method and setup: the table is not trivially equal
    assert any(run["results"][m][s]["mined"]["mAP"] < run["results"][m][s]["none"]["mAP"] - 1e-3
               for m in run["methods"] for s in run["setups"])


@pytest.mark.parametrize("damage", ["flip", "add", "remove"])
def test_a_changed_kit_is_refused_in_one_line(kit_copy, tmp_path, capsys, damage):
    kit = tmp_path / "kit"
    shutil.copytree(kit_copy / "kit", kit)
    shard = next((kit / "methods/cnn-gem/distractors/shards").glob("*.npy"))
    if damage == "flip":
        data = bytearray(shard.read_bytes())
        data[-1] ^= 1  # one bit of the last float16 of the last distractor
        shard.write_bytes(bytes(data))
    elif damage == "add":
        shutil.copy(shard, shard.with_name("99999.npy"))
    else:
        shard.unlink()
    rc = main(["evaluate", "--kit", str(kit), "--landmarks", str(kit_copy / "gnd_demo.pkl")])
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and "the kit" in lines[0] and "SHA256SUMS" in lines[0]
    assert shard.name in lines[0] or "99999.npy" in lines[0]


@pytest.mark.parametrize("change", ["nudged", "unlifted", "spatial-field"])
def test_changed_sp_similarities_with_their_sums_remade_are_refused_in_one_line(kit_copy, tmp_path, capsys, change):
    """The +SP rows come from similarities the kit keeps (no keypoints): a forger who edits them and
    remakes SHA256SUMS is caught by their agreement with the plain similarities."""
    from mining.files import checksums

    kit = tmp_path / "kit"
    shutil.copytree(kit_copy / "kit", kit)
    sp_file = kit / "methods/rsift-asmk/similarities+SP/distractors.npy"
    plain, sp = np.load(kit / "methods/rsift-asmk/similarities/distractors.npy"), np.load(sp_file)
    lifted = np.argwhere(sp != plain)
    if change == "nudged":  # a distractor made to look a little more similar, as no verification would
        sp[0, 0] = plain[0, 0] + 0.25
        np.save(sp_file, sp)
    elif change == "unlifted":  # a verified distractor's lift shrunk below what a verified match gives
        assert lifted.size, "the demo's mined set has verified distractors"
        r, c = lifted[0]
        sp[r, c] = plain[r, c] + 1.0
        np.save(sp_file, sp)
    else:
        info = json.loads((kit / "kit.json").read_text())
        info["methods"]["rsift-asmk"]["spatial"] = {"top_k": 0, "min_inliers": 15}
        (kit / "kit.json").write_text(json.dumps(info))
    (kit / checksums.SUMS).write_text(checksums.sha256sums(kit))
    rc = main(["evaluate", "--kit", str(kit), "--landmarks", str(kit_copy / "gnd_demo.pkl")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "Traceback" not in err, err
    assert ("+SP similarities" in err and "inconsistent" in err) if change != "spatial-field" else "spatial" in err


def test_the_kits_own_queries_as_a_user_npy_give_the_same_table(kit_copy, tmp_path):
    kit = open_kit(kit_copy / "kit")
    gnd = pickle.loads((kit_copy / "gnd_demo.pkl").read_bytes())
    ids, q = kit.vectors("cnn-gem", "queries")
    row = {name: i for i, name in enumerate(ids)}
    np.save(tmp_path / "q.npy", q[[row[name] for name in gnd["qimlist"]]])
    rc = main(["evaluate", "--kit", str(kit_copy / "kit"), "--landmarks", str(kit_copy / "gnd_demo.pkl"),
               "--queries", str(tmp_path / "q.npy"), "--method", "cnn-gem", "--out", str(tmp_path / "out")])
    assert rc == 0
    got = json.loads((tmp_path / "out/evaluation.json").read_text())
    run = kit.evaluation()
    assert got["methods"] == ["cnn-gem"] and "reproduced" not in got
    for s in run["setups"]:
        for kind in ("none", "mined"):
            assert got["results"]["cnn-gem"][s][kind] == pytest.approx(run["results"]["cnn-gem"][s][kind], abs=1e-6)


def test_new_user_queries_are_evaluated_as_revisitop_would(kit_copy, tmp_path):
    """New queries (the mean of two positives of each demo query, a vector the run never saw), under
    new names in a new gnd: the kit's none / mined numbers equal revisitop's loop over an explicit
    ranking of database + the selected distractors."""
    kit = open_kit(kit_copy / "kit")
    gnd = pickle.loads((kit_copy / "gnd_demo.pkl").read_bytes())
    db_ids, db = kit.vectors("rsift-vlad", "database")
    col = {name: i for i, name in enumerate(db_ids)}
    order = [col[name] for name in gnd["imlist"]]
    db = db[order]
    keep = [i for i, g in enumerate(gnd["gnd"]) if len(list(g["easy"]) + list(g["hard"])) >= 2]
    assert len(keep) >= 5
    queries = []
    for i in keep:
        a, b = (list(gnd["gnd"][i]["easy"]) + list(gnd["gnd"][i]["hard"]))[:2]
        v = db[a] + db[b]
        queries.append((v / np.linalg.norm(v)).astype(np.float16).astype(np.float32))  # as a store keeps it
    q = np.stack(queries)
    new = {"imlist": gnd["imlist"], "qimlist": [f"my_query_{k:03d}" for k in range(len(keep))],
           "gnd": [gnd["gnd"][i] for i in keep]}
    (tmp_path / "gnd_mine.pkl").write_bytes(pickle.dumps(new))
    np.save(tmp_path / "mine.npy", q)
    rc = main(["evaluate", "--kit", str(kit_copy / "kit"), "--landmarks", str(tmp_path / "gnd_mine.pkl"),
               "--queries", str(tmp_path / "mine.npy"), "--method", "rsift-vlad", "--out", str(tmp_path / "out")])
    assert rc == 0
    got = json.loads((tmp_path / "out/evaluation.json").read_text())["results"]["rsift-vlad"]
    _, dis = kit.vectors("rsift-vlad", "distractors")
    for kind, x in (("none", db), ("mined", np.concatenate([db, dis]))):
        ranks = np.argsort(-(x @ q.T), axis=0, kind="stable")  # ties: the landmark image first
        for s in ("easy", "medium", "hard"):
            m, _, pr, _ = compute_map_loop(ranks, setup_gnd(new["gnd"], s), (1, 5, 10))
            assert got[s][kind]["mAP"] == pytest.approx(m, abs=1e-6), (kind, s)
            assert [got[s][kind][f"mP@{k}"] for k in (1, 5, 10)] == pytest.approx(list(pr), abs=1e-6)
    assert got["hard"]["mined"]["mAP"] <= got["hard"]["none"]["mAP"]


def test_user_queries_from_another_model_are_refused(kit_copy, tmp_path, capsys):
    store = tmp_path / "q"
    shutil.copytree(kit_copy / "kit/methods/rsift-asmk/queries", store)
    info = json.loads((store / "store.json").read_text())
    rc = main(["evaluate", "--kit", str(kit_copy / "kit"), "--landmarks", str(kit_copy / "gnd_demo.pkl"),
               "--queries", str(store)])
    assert rc == 0, capsys.readouterr().err  # the kit's own ASMK queries, as a user's store: accepted
    capsys.readouterr()
    info["model"] = {"sha256": "0" * 64}
    (store / "store.json").write_text(json.dumps(info))
    rc = main(["evaluate", "--kit", str(kit_copy / "kit"), "--landmarks", str(kit_copy / "gnd_demo.pkl"),
               "--queries", str(store)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "another model" in err[0] and "--model" in err[0]
    info["model"] = json.loads((kit_copy / "kit/methods/rsift-asmk/queries/store.json").read_text())["model"]
    info["params"]["alpha"] = 2.0
    (store / "store.json").write_text(json.dumps(info))
    rc = main(["evaluate", "--kit", str(kit_copy / "kit"), "--landmarks", str(kit_copy / "gnd_demo.pkl"),
               "--queries", str(store)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "alpha=2.0 (the kit's: 3.0)" in err[0]


@pytest.mark.parametrize("extra", [["--setups", "easy"], ["--random-seeds", "7"]])
def test_settings_the_kit_cannot_honour_are_refused(kit_copy, capsys, extra):
    # the kit reproduces the run's own setups and rows; a different request is an error, never ignored
    rc = main(["evaluate", "--kit", str(kit_copy / "kit"), "--landmarks", str(kit_copy / "gnd_demo.pkl"), *extra])
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == ""
    assert extra[0] in cap.err and "does not go with --kit" in cap.err


def test_the_kits_evaluation_holds_no_timing(kit_copy):
    # a rerun writes the same kit bytes: the run's evaluation.json is copied without its seconds
    text = (kit_copy / "kit/evaluation.json").read_text()
    assert '"seconds"' not in text and '"results"' in text
