"""The demo's held-out network (manifest `evaluate: held_out: [cnn-gem-lite2]`, EfficientNet-Lite2)
on the session's demo run: described for every set, never scored, so it cannot have chosen the
set; its rows are in evaluation.json, summary.md and the report, marked held out. And the small
pool's whitening, decided before any learning pass and said once."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from paths import ROOT

HELD = "cnn-gem-lite2"


def _root(demo_run: Path) -> Path:
    return demo_run / "results/demo"


def test_the_held_out_method_is_described_evaluated_and_never_scored(demo_run):
    root = _root(demo_run)
    mining = yaml.safe_load((ROOT / "manifests/demo.yaml").read_text())["methods"]
    for image_set in ("candidates", "queries", "database"):
        info = json.loads((root / "descriptors" / HELD / image_set / "store.json").read_text())
        assert info["method"] == HELD and info["params"]["backbone"] == "lite2" and info["count"] > 0
    # score saw the mining methods only: no column, no stats, so it cannot have moved the set
    assert sorted(json.loads((root / "scores/stats.json").read_text())["methods"]) == sorted(mining)
    assert not [c for c in pq.read_schema(root / "scores/scores.parquet").names if HELD in c]
    ev = json.loads((root / "evaluation/evaluation.json").read_text())
    assert ev["held_out"] == [HELD] and HELD not in ev["ablation"]["cnn-gem"]["medium"]
    medium = ev["ci"][HELD]["medium"]["mined_minus_random"]
    # the set is hard for a network that did not choose it: mined below random, the interval below 0
    assert medium["diff"] < 0 and max(medium["ci"]) < 0
    summary = (root / "evaluation/summary.md").read_text()
    assert f"| {HELD} (held out) | Medium |" in summary and "which took no part in mining (held out)" in summary
    assert f"{HELD} (held out)" in (root / "evaluation/evaluation.md").read_text()
    assert f"{HELD} (held out)" in (root / "report.html").read_text()


def test_a_pool_too_small_to_whiten_skips_the_learning_pass_and_says_so_once(demo_run):
    root = _root(demo_run)
    info = json.loads((root / "descriptors/cnn-gem/candidates/store.json").read_text())
    assert info["small_pool"].startswith(f"{info['count']} candidates to learn from < 2 x whiten_dim 512: not "
                                         "whitening, no learning pass")
    vlad = json.loads((root / "descriptors/rsift-vlad/candidates/store.json").read_text())
    assert vlad["small_pool"].startswith(f"{vlad['count']} candidates to learn from < 2 x dim 512: not whitening, the "
                                         "codebook is learned")
    shared = (root / "logs/describe/rsift-asmk+rsift-vlad_candidates.log").read_text()
    assert shared.count("not whitening") == 1  # said before the pass, not again by the fit
    log = (root / "logs/describe/cnn-gem_candidates.log").read_text()
    assert log.count("not whitening") == 1 and "learning on candidates" not in log
    report = (root / "report.html").read_text()
    assert report.count("2 x whiten_dim 512: not whitening") == 2  # cnn-gem and the held-out cnn-gem-lite2
    assert report.count("2 x dim 512: not whitening") == 1  # rsift-vlad (its codebook still learned)
