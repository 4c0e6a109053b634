"""The demo world: files, ground truth, metadata layout and determinism (on the micro preset)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from mining.settings import options
from mining.stages.demo.stage import run_build
from mining.stages.demo.world import PRESETS
from mining.datasets.landmarks import load_landmarks

DEMO = options.defaults("demo")  # the schema's settings; the tests build the micro preset


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("micro")
    run_build(out=root, options=replace(DEMO, preset="micro", seed=3))
    return root


def test_same_preset_and_seed_give_identical_bytes(world, tmp_path):
    run_build(out=tmp_path / "again", options=replace(DEMO, preset="micro", seed=3), workers=2)
    assert _digests(world) == _digests(tmp_path / "again")


def test_ground_truth_is_revisitop_shaped_and_sane(world):
    ds = load_landmarks(world / "landmarks")
    cfg = PRESETS["micro"]
    assert len(ds.landmarks) == cfg["landmarks"]
    assert len(ds.qimlist) == cfg["landmarks"] * cfg["queries"]
    assert not set(ds.qimlist) & set(ds.imlist)
    for i, q in enumerate(ds.qimlist):
        g = ds.gnd[i]
        assert g["easy"] and g["hard"], q
        assert not (set(g["easy"]) & set(g["hard"])) and not (set(g["easy"]) & set(g["junk"]))
        w, h = Image.open(ds.image_path(q)).size
        x1, y1, x2, y2 = ds.bbox(i)
        assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h
        assert all(ds.imlist[j].startswith(ds.query_landmark(i)) for j in ds.positives(i))
    for name in ds.imlist + ds.qimlist:
        assert ds.image_path(name).is_file()


def test_metadata_rows_have_25_fields_except_the_malformed(world):
    import json

    meta = json.loads((world / "world.json").read_text())
    lines = (world / "metadata" / "yfcc100m_dataset").read_text(encoding="utf-8").splitlines()
    assert len(lines) == meta["counts"]["metadata_rows"]
    bad = 0
    for line in lines:
        f = line.split("\t")
        ok = len(f) == 25 and f[1].isdigit() and f[6].isdigit()
        if ok and f[12]:
            try:
                lon, lat = float(f[12]), float(f[13])
                ok = -180 <= lon <= 180 and -90 <= lat <= 90
            except ValueError:
                ok = False
        bad += not ok
    assert bad == meta["counts"]["malformed_rows"]
    truth = pq.read_table(world / "truth.parquet")
    assert truth.schema.field("photo_id").type == "int64"
    for pid in truth.column("photo_id").to_pylist():
        assert (world / "images" / f"{pid}.jpg").is_file()
    assert set(truth.column("kind").to_pylist()) <= {"unrelated", "hard_negative", "landmark"}
    assert (world / "preview.png").stat().st_size > 10_000


def test_easy_views_are_found_more_often_than_hard_ones(world):
    from mining.stages.demo.realism import evaluate_setups, histogram_descriptor

    ds = load_landmarks(world / "landmarks")
    got = evaluate_setups(ds, histogram_descriptor)
    rnd = evaluate_setups(ds, None, rng=np.random.default_rng(0))
    assert got["map_easy"] > got["map_hard"] + 0.15
    assert got["map_medium"] > rnd["map_medium"] + 0.15


def test_demo_world_with_renamed_queries_keeps_its_landmarks(world, tmp_path, capsys):
    """No name rule can work: queries renamed `city_query_NNN`, shuffled, `landmark` keys dropped."""
    import json
    import pickle
    import shutil

    from mining.cli import main

    ds = load_landmarks(world / "landmarks")
    shutil.copytree(world / "landmarks", tmp_path / "lm")
    order = np.random.default_rng(0).permutation(len(ds.qimlist))
    renamed = {ds.qimlist[i]: f"city_query_{k:03d}" for k, i in enumerate(order)}
    for old, new in renamed.items():
        (tmp_path / "lm" / "jpg" / f"{old}.jpg").rename(tmp_path / "lm" / "jpg" / f"{new}.jpg")
    gnd = [{k: v for k, v in ds.gnd[i].items() if k != "landmark"} for i in order]
    (tmp_path / "lm" / "gnd_demo.pkl").write_bytes(pickle.dumps(
        {"imlist": ds.imlist, "qimlist": [renamed[ds.qimlist[i]] for i in order], "gnd": gnd}))
    assert main(["landmarks", "check", str(tmp_path / "lm"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["problems"] == [] and out["queries"] == len(ds.qimlist)
    want = sorted(sorted(renamed[q] for q in qs) for qs in ds.landmark_queries().values())
    assert sorted(sorted(lm["queries"]) for lm in out["landmarks"]) == want
    assert [lm["name"] for lm in out["landmarks"]] == [f"landmark_{k:02d}" for k in range(1, len(want) + 1)]


def test_two_cities_are_two_benchmarks_with_one_pool(world, tmp_path):
    """demo: {benchmarks: 2}: the first city is the one-city world's (the same ground truth,
    byte for byte), the second has other landmarks, and the pool shows both (truth names
    <city>/<landmark>)."""
    import json

    two = tmp_path / "two"
    run_build(out=two, options=replace(DEMO, preset="micro", seed=3, benchmarks=2), workers=2)
    assert (two / "landmarks/city1/gnd_city1.pkl").read_bytes() == (world / "landmarks/gnd_demo.pkl").read_bytes()
    one, other = (load_landmarks(two / f"landmarks/{c}/gnd_{c}.pkl") for c in ("city1", "city2"))
    assert other.fingerprint() != one.fingerprint()
    for q in other.qimlist:
        assert (two / "landmarks/city2/jpg" / f"{q}.jpg").is_file()
    meta = json.loads((two / "world.json").read_text())
    assert [b["name"] for b in meta["benchmarks"]] == ["city1", "city2"]
    truth = pq.read_table(two / "truth.parquet").to_pandas()
    shown = set(truth.loc[truth.kind == "landmark", "landmark"])
    assert {s.split("/")[0] for s in shown} == {"city1", "city2"}
    assert shown <= {f"city1/{lm}" for lm in one.landmarks} | {f"city2/{lm}" for lm in other.landmarks}
