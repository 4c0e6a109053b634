"""Two benchmarks in one run, end to end (R1M as it was made for ROxford and RParis): the demo
world with two cities (manifests/demo-two.yaml on the `micro` preset), one pool, one score,
one review, one set, evaluated on each city."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from snakerun import REPO, failure_text, snakemake

from mining.stages.evaluate.stage import run_kit

CITIES = ["city1", "city2"]


@pytest.fixture(scope="module")
def two_run(tmp_path_factory) -> Path:
    """manifests/demo-two.yaml on the micro world (a few images a city): every stage, two benchmarks."""
    m = yaml.safe_load((REPO / "manifests" / "demo-two.yaml").read_text())
    m["demo"]["preset"] = "micro"
    m["select"]["n"] = 5
    m["score"]["review_top"] = 10
    # today's sources at their leanest: only the Multimedia Commons mirror's ~500 px copies
    # (Flickr gone), so the set is made of low_res images by choice
    m["download"]["sources"] = [{"kind": "multimedia-commons"}]
    m["select"]["require_full_res"] = False
    work = tmp_path_factory.mktemp("two-run")
    manifest = work / "two.yaml"
    manifest.write_text(yaml.safe_dump(m))
    r = snakemake(work, "--cores", "2", manifest=manifest)
    assert r.returncode == 0, failure_text(r, work / "results/demo-two")
    return work / "results/demo-two"


@pytest.mark.slow
def test_two_benchmarks_one_pool_one_review_one_set(two_run):
    root = two_run
    index = pd.read_parquet(root / "images/index.parquet")  # every image from the mirror, marked low_res
    ok = index[index.status == "ok"]
    assert len(ok) > 0 and set(ok.source) == {"multimedia-commons"} and ok.low_res.all()
    for city in CITIES:  # each city's queries and database described with the pool's models
        for method in ("cnn-gem", "rsift-asmk", "rsift-vlad"):
            for part in ("queries", "database"):
                assert (root / "descriptors" / method / "benchmarks" / city / part / "store.json").is_file()
    scores = pd.read_parquet(root / "scores/scores.parquet")
    # one score: the sum over both cities' queries, each city's part alongside, exactly
    assert (scores.score == scores.benchmark_score_city1 + scores.benchmark_score_city2).all()
    assert (scores.benchmark_score_city1 > 0).any() and (scores.benchmark_score_city2 > 0).any()
    stats = json.loads((root / "scores/stats.json").read_text())
    assert {lm.split("/")[0] for lm in stats["landmarks"]} == set(CITIES)
    # one review: every landmark of both cities, namespaced, in one queue and one decisions file
    queue = pd.read_parquet(root / "scores/review_queue.parquet")
    assert {lm.split("/")[0] for lm in queue.landmark} == set(CITIES)
    assert set(queue.landmark) <= set(stats["landmarks"])
    decisions = pd.read_parquet(root / "review/decisions.parquet")
    assert set(decisions.landmark) <= set(stats["landmarks"])
    # one set: a photo confirmed as either city's landmark is never a distractor
    table = pd.read_parquet(root / "selected/distractors.parquet")
    confirmed = set(decisions.loc[decisions.decision == "landmark", "photo_id"])
    assert 0 < len(table) <= 5 and not confirmed & set(table.photo_id)
    truth = pd.read_parquet(root / "world/truth.parquet")
    shown = truth.loc[truth.kind == "landmark", "landmark"].dropna()
    assert {lm.split("/")[0] for lm in shown} == set(CITIES)  # both cities' landmarks are in the pool
    # evaluation per benchmark, and each one's share of the set's score
    ev = json.loads((root / "evaluation/evaluation.json").read_text())
    assert list(ev["per_benchmark"]) == CITIES
    for city in CITIES:
        assert set(ev["per_benchmark"][city]["results"]) == {"cnn-gem", "rsift-asmk", "rsift-vlad"}
    assert sum(ev["score_share"]["selected"].values()) == pytest.approx(1.0)
    md = (root / "evaluation/evaluation.md").read_text()
    assert all(f"## Evaluation: {city}" in md for city in CITIES)
    html = (root / "report.html").read_text()
    assert all(city in html for city in CITIES)
    card = (root / "release/README.md").read_text()
    assert "share of its score" in card and all(f"mAP (%) on {city}" in card for city in CITIES)
    # the evaluation kit holds each city's landmark stores and reproduces each city's table
    landmarks = [f"{b['name']}={root.parent.parent / b['gnd']}" for b in ev["benchmarks"]]
    kit = run_kit(kit=root / "release/kit", landmarks=landmarks)
    assert all(kit["per_benchmark"][city]["reproduced"]["ok"] for city in CITIES)
    for log in (root / "logs").rglob("*.log"):
        assert "Traceback" not in log.read_text(), log
