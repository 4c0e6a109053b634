"""The describe stage: image sets -> stores; failures, resume, settings checks, round trip."""

from __future__ import annotations

import json
import pickle
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mining.photos import imageindex
from mining.settings import layout
from mining.cli import main
from mining.compute.cluster import Cluster
from mining.settings.options import defaults
from mining.stages.describe import stage as describe
from mining.stages.describe.stage import list_items, load_image, read_failures
from mining.retrieval.descriptors import iter_similarities, open_store
from mining.errors import UserError
from mining.methods import get_method
from forged import npy_header
from scenes import scene, transformed

DESCRIBE = defaults("describe")  # the schema's settings (shard size, no method params)
VLAD = {"vocabulary": 16, "dim": 24, "max_features": 300}


def _save(img: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(img).save(path, quality=92)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A download folder (ok, failed and corrupt entries) and a 3-query landmark dataset."""
    root = tmp_path_factory.mktemp("world")
    images = root / "images"
    ids = list(range(1000, 1014))
    for pid in ids:
        _save(scene(pid), images / layout.image_relpath(pid))
    (images / layout.image_relpath(1005)).write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")  # corrupt, status ok
    imageindex.write(images, [{"photo_id": pid, "status": "placeholder" if pid == 1007 else "ok",
                               "path": layout.image_relpath(pid)} for pid in ids])

    lm = root / "landmarks"
    imlist = [f"db_{i}" for i in range(5)]
    for i, name in enumerate(imlist):
        _save(scene(50 + i), lm / "jpg" / f"{name}.jpg")
    qimlist, gnd = [], []
    for i in (0, 2, 4):
        big = np.full((300, 400, 3), 90, np.uint8)
        big[30:30 + 240, 40:40 + 320] = transformed(scene(50 + i))[:240, :320]
        name = f"lm{i}_000"
        _save(big, lm / "jpg" / f"{name}.jpg")
        qimlist.append(name)
        gnd.append({"bbx": [40, 30, 360, 270], "easy": [i], "hard": [], "junk": []})
    (lm / "gnd_city.pkl").write_bytes(pickle.dumps({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}))
    return images, lm


def test_candidates_are_the_indexs_ok_downloads(world):
    images, _ = world
    items = list_items(images, "candidates")
    got = [i.id for i in items]
    assert "1007" not in got and "1003" in got and "1005" in got
    assert got == sorted(got, key=int) and len(got) == 13
    assert items[0].path.endswith(layout.image_relpath(1000))


def test_query_crop_is_taken_at_database_scale(tmp_path):
    img = np.zeros((400, 800, 3), np.uint8)
    img[100:200, 200:400] = 255
    _save(img, tmp_path / "q.jpg")
    crop = load_image(tmp_path / "q.jpg", 400, "RGB", (200, 100, 400, 200))
    assert crop.shape == (50, 100, 3) and crop.mean() > 200  # half scale, white box only
    full = load_image(tmp_path / "q.jpg", 400, "L")
    assert full.shape == (200, 400)
    with pytest.raises(ValueError):
        load_image(tmp_path / "q.jpg", 400, "RGB", (900, 500, 950, 600))


@pytest.mark.parametrize("method,params", [("rsift-vlad", VLAD),
                                           ("rsift-asmk", {"codebook_size": 32, "max_features": 300}),
                                           ("cnn-gem", {"max_side": 256, "scales": [1.0], "whiten_dim": 8})])
def test_store_round_trip_finds_each_querys_landmark(world, tmp_path, method, params):
    images, lm = world
    cand = describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=[method],
                        out=tmp_path / "c", options=replace(DESCRIBE, shard_size=5, params={method: params}),
                        progress=False)[method]
    assert cand["count"] == 12 and cand["failed"] == 1 and cand["shards"] == 3 and cand["complete"]
    fails = read_failures(tmp_path / "c")
    assert [f["id"] for f in fails] == ["1005"] and fails[0]["error"]
    assert (tmp_path / "c" / "model.npz").is_file()
    q = describe.run(inputs=describe.Inputs(images=lm, image_set="queries", models=tmp_path / "c"), methods=[method],
                     out=tmp_path / "q", options=DESCRIBE, progress=False)[method]
    d = describe.run(inputs=describe.Inputs(images=lm, image_set="database", models=tmp_path / "c"), methods=[method],
                     out=tmp_path / "d", options=replace(DESCRIBE, shard_size=2), progress=False)[method]
    assert q["count"] == 3 and d["count"] == 5 and q["model"]["sha256"] == cand["model"]["sha256"]
    qs, ds = open_store(tmp_path / "q", get_method), open_store(tmp_path / "d", get_method)
    ids, sims = [], []
    for block_ids, s in iter_similarities(qs, ds):
        assert s.dtype == np.float32 and s.shape == (3, len(block_ids))
        ids += block_ids
        sims.append(s)
    sim = np.concatenate(sims, axis=1)
    assert ids == [f"db_{i}" for i in range(5)]
    assert [ids[j] for j in sim.argmax(1)] == ["db_0", "db_2", "db_4"], sim
    if qs.kind == "global":
        _, mat = ds.load_all()
        assert np.load(tmp_path / "d" / "shards" / "00000.npy").dtype == np.float16
        np.testing.assert_allclose(np.linalg.norm(mat, axis=1), 1.0, atol=2e-3)


def test_resume_redoes_only_missing_shards(world, tmp_path):
    images, _ = world
    out = tmp_path / "c"
    describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=["rsift-vlad"], out=out,
                 options=replace(DESCRIBE, shard_size=4, params={"rsift-vlad": VLAD}), progress=False)
    before = {p.name: p.stat().st_mtime_ns for p in (out / "shards").iterdir()}
    ref = open_store(out, get_method).load_all()
    (out / "shards" / "00001.ids.parquet").unlink()  # as if killed before shard 1 finished
    (out / "shards" / "00001.npy").unlink()
    info = describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=["rsift-vlad"],
                        out=out, options=replace(DESCRIBE, shard_size=4, params={"rsift-vlad": VLAD}),
                        progress=False)["rsift-vlad"]
    after = {p.name: p.stat().st_mtime_ns for p in (out / "shards").iterdir()}
    changed = sorted(n for n in after if before.get(n) != after[n])
    assert changed == ["00001.failures.parquet", "00001.ids.parquet", "00001.npy"]
    ids, mat = open_store(out, get_method).load_all()
    assert ids == ref[0] and np.array_equal(mat, ref[1]) and info["count"] == 12
    with pytest.raises(UserError, match="different"):
        describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=["rsift-vlad"], out=out,
                     options=replace(DESCRIBE, shard_size=4, params={"rsift-vlad": {**VLAD, "vocabulary": 8}}),
                     progress=False)



def test_a_resumed_store_whose_first_shard_header_lies_is_one_line(world, tmp_path):
    """A resume takes a finished shard as it is; its header is checked against its size before the
    store's width is read from it (a forged header claiming 93 TiB would otherwise be mapped)."""
    images, _ = world
    out = tmp_path / "c"
    run = dict(inputs=describe.Inputs(images=images, image_set="candidates"), methods=["rsift-vlad"], out=out,
               options=replace(DESCRIBE, shard_size=4, params={"rsift-vlad": VLAD}), progress=False)
    describe.run(**run)
    (out / "store.json").unlink()  # as if killed after the last shard, before store.json
    first = out / "shards" / "00000.npy"
    first.write_bytes(npy_header((2 ** 35, 1488)) + b"\0" * 64)
    with pytest.raises(UserError, match=r"00000\.npy: its header declares .* but 64 bytes follow it; the store was "
                                        r"changed or damaged"):
        describe.run(**run)

LEARNED = [("rsift-vlad", VLAD), ("rsift-asmk", {"codebook_size": 32, "max_features": 300}),
           ("cnn-gem", {"max_side": 256, "scales": [1.0, 0.75], "whiten_dim": 4})]


def _content(out: Path) -> tuple:
    """What a store holds, whatever its sharding: ids, payload bytes, model and failure files."""
    ids, payload = open_store(out, get_method).load_all()
    arrays = [payload] if isinstance(payload, np.ndarray) else list(payload)
    return ids, [a.tobytes() for a in arrays], (out / "model.npz").read_bytes(), (out / "failures.parquet").read_bytes()


def _files(out: Path) -> dict[str, bytes]:
    """Every file's bytes; store.json without the store's own path (it names its folder)."""
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    info = json.loads(files.pop("store.json"))
    info["model"].pop("store")
    return {**files, "store.json": json.dumps(info, sort_keys=True).encode()}


@pytest.fixture(scope="module")
def one_worker_scheduler():
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


@pytest.mark.parametrize("method,params", LEARNED, ids=[m for m, _ in LEARNED])
def test_same_bytes_for_any_workers_shards_cluster_and_resume(world, tmp_path, one_worker_scheduler, method, params):
    """The learned model and every descriptor are the same bytes in-process, on 2 LocalCluster
    workers, on a 1-worker scheduler, with shards of 5 or 3 (learning tasks of 5 or 3 images:
    two workers finish them out of order), and after a kill in the middle and a resume."""
    images, _ = world
    runs = {"in-process/5": (5, Cluster(workers=0)),
            "2 workers/3": (3, Cluster(workers=2)),
            "scheduler, 1 worker/5": (5, Cluster(scheduler=one_worker_scheduler))}
    for i, (shard_size, where) in enumerate(runs.values()):
        describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=[method],
                     out=tmp_path / str(i), options=replace(DESCRIBE, shard_size=shard_size, params={method: params}),
                     cluster=where, progress=False)
    ref = _content(tmp_path / "0")
    assert len(ref[0]) == 12
    for i, name in enumerate(runs):
        assert _content(tmp_path / str(i)) == ref, name
    assert _files(tmp_path / "0") == _files(tmp_path / "2")  # same shard size: every file
    # killed before shard 1 was done (Snakemake then deletes the job's output, store.json),
    # resumed in-process
    before = _files(tmp_path / "2")
    for p in [*(tmp_path / "2" / "shards").glob("00001.*"), tmp_path / "2" / "failures.parquet",
              tmp_path / "2" / "store.json"]:
        p.unlink()
    describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=[method], out=tmp_path / "2",
                 options=replace(DESCRIBE, shard_size=5, params={method: params}), cluster=Cluster(workers=0),
                 progress=False)
    assert _files(tmp_path / "2") == before


def test_same_bytes_whatever_the_machines_thread_settings(world, tmp_path):
    """PyTorch's convolutions and OpenBLAS's PCA give other bits with 1 and 2 threads; the
    stage pins its numeric kernels, so the process's thread settings change nothing."""
    import torch
    from threadpoolctl import threadpool_limits

    images, _ = world
    method, params = LEARNED[2]
    before = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            with threadpool_limits(limits=n):
                describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=[method],
                             out=tmp_path / str(n), options=replace(DESCRIBE, params={method: params}),
                             cluster=Cluster(workers=0), progress=False)
    finally:
        torch.set_num_threads(before)
    assert _files(tmp_path / "1") == _files(tmp_path / "2")


def test_workers_started_in_another_folder_read_and_write_the_stages_paths(world, tmp_path, monkeypatch):
    """A real `dask scheduler` and `dask worker` whose working folder is not the stage's (a
    worker submitted as a SLURM job from elsewhere): relative --images/--out still mean the
    stage's folder, nothing lands in the worker's folder, and the store has the same bytes
    as an in-process run."""
    import shutil
    import subprocess
    import time

    images, _ = world
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    shutil.copytree(images, run / "data" / "images")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    dask_bin = str(Path(sys.executable).parent / "dask")
    sched_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([dask_bin, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sched_file)], cwd=elsewhere,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        procs.append(subprocess.Popen([dask_bin, "worker", address, "--nthreads", "1", "--no-nanny",
                                       "--no-dashboard"], cwd=elsewhere,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        from distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(1, timeout=60)
        monkeypatch.chdir(run)
        method, params = LEARNED[0]
        describe.run(inputs=describe.Inputs(images="data/images", image_set="candidates"), methods=[method],
                     out="out/scheduler", options=replace(DESCRIBE, shard_size=5, params={method: params}),
                     cluster=Cluster(scheduler=address), progress=False)
        describe.run(inputs=describe.Inputs(images="data/images", image_set="candidates"), methods=[method],
                     out="out/local", options=replace(DESCRIBE, shard_size=5, params={method: params}),
                     cluster=Cluster(workers=0), progress=False)
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)
    assert not any(p.suffix != ".json" for p in elsewhere.rglob("*") if p.is_file()), "a worker wrote in its own folder"
    assert _files(run / "out" / "scheduler") == _files(run / "out" / "local")


def test_landmark_sets_need_the_candidates_model(world, tmp_path):
    images, lm = world
    with pytest.raises(UserError, match="--model"):
        describe.run(inputs=describe.Inputs(images=lm, image_set="database"), methods=["rsift-asmk"],
                     out=tmp_path / "d", options=DESCRIBE, progress=False)
    with pytest.raises(UserError, match="no index.parquet"):
        describe.run(inputs=describe.Inputs(images=lm, image_set="candidates"), methods=["rsift-vlad"],
                     out=tmp_path / "x", options=DESCRIBE, progress=False)


def test_cli_on_a_dask_local_cluster(world, tmp_path, capsys):
    images, lm = world
    rc = main(["describe", "--method", "rsift-vlad", "--images", str(images), "--set", "candidates",
               "--out", str(tmp_path / "c"), "--workers", "2", "--shard-size", "5", "--param", "vocabulary=16",
               "--param", "dim=24", "--param", "max_features=300", "--no-progress"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["count"] == 12 and summary["failed"] == 1 and summary["shards"] == 3
    rc = main(["describe", "--method", "rsift-vlad", "--images", str(lm), "--set", "queries", "--out",
               str(tmp_path / "q"), "--model", str(tmp_path / "c"), "--workers", "0", "--param", "vocabulary=8",
               "--no-progress"])
    assert rc == 2 and "differ" in capsys.readouterr().err


LOCAL = [("rsift-asmk", {"codebook_size": 32, "max_features": 300}), ("rsift-vlad", VLAD)]


def test_shared_pass_writes_each_store_as_a_separate_run_would(world, tmp_path, monkeypatch):
    """rsift-asmk and rsift-vlad in one pass: one RootSIFT extraction per image (learning
    sample and shards), and every store file the same bytes as that method described alone,
    for candidates (learning) and for landmark sets (--model); on 2 workers with other
    shards the same content; after a kill that left one store a shard short, only that
    store's shard is redone."""
    import mining.methods.rootsift as rs

    images, lm = world
    names = [m for m, _ in LOCAL]
    for m, p in LOCAL:
        describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=[m],
                     out=tmp_path / "alone" / m / "c", options=replace(DESCRIBE, shard_size=5, params={m: p}),
                     progress=False)
        for s in ("queries", "database"):
            describe.run(inputs=describe.Inputs(images=lm, image_set=s, models=tmp_path / "alone" / m / "c"),
                         methods=[m], out=tmp_path / "alone" / m / s, options=replace(DESCRIBE, shard_size=2),
                         progress=False)
    calls = []
    real = rs.rootsift_features
    monkeypatch.setattr(rs, "rootsift_features", lambda *a, **k: calls.append(1) or real(*a, **k))
    settings = replace(DESCRIBE, shard_size=5, params=dict(LOCAL))
    infos = describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=names,
                         out=tmp_path / "joint" / "{method}" / "c", options=settings, progress=False)
    # 12 decodable candidates, learned on (all 12 of them) and described: 24 extractions, not 48
    assert [i["count"] for i in infos.values()] == [12, 12] and len(calls) == 24
    for s in ("queries", "database"):
        describe.run(inputs=describe.Inputs(images=lm, image_set=s, models=tmp_path / "joint" / "{method}" / "c"),
                     methods=names, out=tmp_path / "joint" / "{method}" / s, options=replace(DESCRIBE, shard_size=2),
                     progress=False)
    assert len(calls) == 24 + 3 + 5
    monkeypatch.undo()
    for m in names:
        for s in ("c", "queries", "database"):
            assert _files(tmp_path / "joint" / m / s) == _files(tmp_path / "alone" / m / s), (m, s)
    describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=names,
                 out=tmp_path / "w2" / "{method}", options=replace(settings, shard_size=3),
                 cluster=Cluster(workers=2), progress=False)
    for m in names:
        assert _content(tmp_path / "w2" / m) == _content(tmp_path / "alone" / m / "c"), m
    # killed after rsift-vlad finished shard 1 but before rsift-asmk did; store.json deleted
    joint = {m: tmp_path / "joint" / m / "c" for m in names}
    before = {m: {p.name: p.stat().st_mtime_ns for p in (joint[m] / "shards").iterdir()} for m in names}
    for p in [*(joint["rsift-asmk"] / "shards").glob("00001.*"), *(joint[m] / "store.json" for m in names)]:
        p.unlink()
    describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=names,
                 out=tmp_path / "joint" / "{method}" / "c", options=settings, progress=False)
    changed = {m: sorted(p.name for p in (joint[m] / "shards").iterdir()
                         if before[m].get(p.name) != p.stat().st_mtime_ns) for m in names}
    assert changed == {"rsift-asmk": ["00001.asmk.npz", "00001.failures.parquet", "00001.ids.parquet"],
                       "rsift-vlad": []}
    for m in names:
        assert _files(joint[m]) == _files(tmp_path / "alone" / m / "c"), m


def test_cli_describes_several_methods_in_one_pass(world, tmp_path, capsys):
    images, _ = world
    base = ["describe", "--method", "rsift-asmk,rsift-vlad", "--images", str(images), "--set", "candidates",
            "--workers", "0", "--shard-size", "5", "--param", "max_features=300", "--no-progress"]
    assert main([*base, "--out", str(tmp_path / "c"), "--param", "vocabulary=16"]) == 2
    assert "{method}" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "{method}"), "--param", "vocabulary=16", "--param", "whiten_dim=8"]) == 2
    assert "whiten_dim" in capsys.readouterr().err
    rc = main([*base, "--out", str(tmp_path / "{method}"), "--param", "vocabulary=16", "--param", "dim=24",
               "--param", "codebook_size=32"])
    assert rc == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert [(x["method"], x["count"], x["failed"]) for x in lines] == [("rsift-asmk", 12, 1), ("rsift-vlad", 12, 1)]
    assert open_store(tmp_path / "rsift-asmk").info["params"]["codebook_size"] == 32
    assert open_store(tmp_path / "rsift-vlad").info["params"] == {**open_store(tmp_path / "rsift-vlad").info["params"],
                                                                 **VLAD}


def test_shared_groups_put_the_rootsift_methods_together_only_with_the_same_settings():
    from mining.methods import shared_groups

    assert shared_groups(["cnn-gem", "rsift-asmk", "rsift-vlad"]) == [["cnn-gem"], ["rsift-asmk", "rsift-vlad"]]
    assert shared_groups(["rsift-vlad", "cnn-gem", "rsift-asmk"]) == [["rsift-vlad", "rsift-asmk"], ["cnn-gem"]]
    # another keypoint cap or working size: another extraction, so separate passes
    assert shared_groups(["rsift-asmk", "rsift-vlad"], {"rsift-vlad": {"max_features": 300}}) == [["rsift-asmk"],
                                                                                                  ["rsift-vlad"]]
    assert shared_groups(["rsift-asmk", "rsift-vlad"], {"rsift-asmk": {"max_side": 800}}) == [["rsift-asmk"],
                                                                                              ["rsift-vlad"]]
