"""Error bars: bootstrap intervals over queries, paired mined − random, deterministic bytes."""

import json

import numpy as np
import pytest

from mining.cli import main
from mining.errors import UserError
from mining.stages.evaluate import bootstrap
from mining.stages.evaluate.experiment import evaluate_setups, setup_base
from mining.stages.evaluate.histograms import Ranking, load_method
from mining.datasets.landmarks import load_landmarks
from evaluate_world import build_world, run_inputs


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("boot"))


def _loop_bootstrap(aps, samples, seed, level):
    """The textbook loop: draw n queries with replacement, mean, repeat; percentile interval."""
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(samples):
        means.append(np.mean(aps[rng.integers(0, aps.size, size=aps.size)]))
    return list(np.quantile(means, [(1 - level) / 2, (1 + level) / 2]))


def test_interval_is_the_textbook_percentile_bootstrap_and_covers_the_mean():
    rng = np.random.default_rng(1)
    aps = rng.uniform(0, 1, 57)
    spec = bootstrap.Spec(samples=500, seed=3, level=0.9)
    idx = bootstrap.resample_indices(aps.size, spec)
    lo, hi = bootstrap.interval(aps, idx, spec.level)
    ref = _loop_bootstrap(aps, 500, 3, 0.9)
    # the vectorised draw is the loop's draw (same PCG64 stream, row by row)
    assert [lo, hi] == pytest.approx(ref, abs=1e-12)
    assert lo < aps.mean() < hi
    # width shrinks like 1/sqrt(n): 4x the queries, about half the width
    aps4 = np.tile(aps, 4)
    lo4, hi4 = bootstrap.interval(aps4, bootstrap.resample_indices(aps4.size, spec), spec.level)
    assert 0.35 < (hi4 - lo4) / (hi - lo) < 0.65
    # a higher level is a wider interval; a constant AP has no spread
    lo99, hi99 = bootstrap.interval(aps, idx, 0.99)
    assert lo99 < lo and hi99 > hi
    assert bootstrap.interval(np.full(10, 0.25), bootstrap.resample_indices(10, spec), 0.95) == [0.25, 0.25]


def test_paired_difference_is_narrower_than_unpaired_when_queries_vary():
    rng = np.random.default_rng(2)
    difficulty = rng.uniform(0.1, 0.9, 60)  # query difficulty dominates both sets' APs
    mined = np.clip(difficulty - 0.05 + 0.01 * rng.normal(size=60), 0, 1)
    random = np.clip(difficulty + 0.01 * rng.normal(size=60), 0, 1)
    spec = bootstrap.Spec(samples=1000, seed=0)
    idx = bootstrap.resample_indices(60, spec)
    d = bootstrap.paired(mined, random, idx, spec.level)
    assert d["diff"] == pytest.approx(mined.mean() - random.mean())
    assert d["ci"][0] < d["diff"] < d["ci"][1] < 0  # clearly lower
    assert d["p_not_lower"] == 0.0
    lo_m, hi_m = bootstrap.interval(mined, idx, spec.level)
    lo_r, hi_r = bootstrap.interval(random, idx, spec.level)
    assert hi_m > lo_r  # side by side the two intervals overlap ...
    assert d["ci"][1] - d["ci"][0] < 0.2 * (hi_m - lo_m)  # ... the paired one is far narrower
    same = bootstrap.paired(random, random, idx, spec.level)
    assert same["diff"] == 0 and same["ci"] == [0.0, 0.0] and same["p_not_lower"] == 1.0


def test_queries_without_positives_are_left_out_and_bad_specs_refused():
    aps = np.array([0.5, np.nan, 0.7, np.nan])
    r = bootstrap.method_intervals(aps, aps, [aps, aps], aps, {}, [], [], bootstrap.Spec(samples=50))
    assert r["queries"] == 2 and r["mined"][0] >= 0.5 and r["mined"][1] <= 0.7
    with pytest.raises(UserError, match="samples"):
        bootstrap.Spec(samples=0)
    with pytest.raises(UserError, match="level"):
        bootstrap.Spec(level=1.0)


def test_per_query_aps_average_to_the_map(world):
    ds = load_landmarks(world / "lm")
    ids = np.array([1000 + 7 * i for i in range(240)], np.int64)
    md = load_method(world / "desc" / "gem", ds, [Ranking(ids, [0, 100])])
    bases = {s: setup_base(md, ds.gnd, s) for s in ("easy", "hard")}
    aps: dict = {}
    res = evaluate_setups(md, bases, md.above(0, 100), aps=aps)
    for s in bases:
        assert np.isnan(aps[s][5])  # the query without positives
        assert np.nanmean(aps[s]) == pytest.approx(res[s]["mAP"], abs=1e-15)


def _evaluate(world, tmp_path, out, *extra):
    return main(["evaluate", "--landmarks", str(world / "lm" / "gnd_city.pkl"),
                 "--descriptors", str(world / "desc" / "gem"), str(world / "desc" / "sift"),
                 "--scores", str(tmp_path / "scores"), "--selected", str(tmp_path / "selected"),
                 "--decisions", str(tmp_path / "decisions.parquet"), "--out", str(out),
                 "--random-seeds", "0", "1", "2", "--setups", "easy", "medium", "hard", "--no-progress", *extra])


def test_evaluate_writes_intervals_for_every_map_deterministically(world, tmp_path):
    run_inputs(world, tmp_path)
    assert _evaluate(world, tmp_path, tmp_path / "a") == 0
    assert _evaluate(world, tmp_path, tmp_path / "b") == 0
    ja, jb = (json.loads((tmp_path / d / "evaluation.json").read_text()) for d in "ab")
    assert ja["bootstrap"] == {"samples": 2000, "seed": 0, "level": 0.95, "unit": "query", "interval": "percentile"}
    # same bytes every run (all but the timing)
    dump = lambda j: json.dumps({k: v for k, v in j.items() if k != "seconds"}, sort_keys=True)  # noqa: E731
    assert dump(ja) == dump(jb)
    assert (tmp_path / "a" / "evaluation.md").read_bytes() == (tmp_path / "b" / "evaluation.md").read_bytes()
    for m in ("gem", "sift"):
        for s in ("easy", "medium", "hard"):
            c, r = ja["ci"][m][s], ja["results"][m][s]
            assert c["queries"] == 5  # six queries, one without positives
            for kind in ("none", "random", "mined", "all"):
                lo, hi = c[kind]
                assert lo <= r[kind]["mAP"] + 1e-12 and r[kind]["mAP"] <= hi + 1e-12, (m, s, kind)
                assert hi - lo > 0
            d = c["mined_minus_random"]
            assert d["diff"] == pytest.approx(r["mined"]["mAP"] - r["random"]["mAP"], abs=1e-12)
            assert d["ci"][0] <= d["diff"] <= d["ci"][1] and 0 <= d["p_not_lower"] <= 1
            assert c["mined_minus_all"]["diff"] == pytest.approx(r["mined"]["mAP"] - r["all"]["mAP"], abs=1e-12)
            assert set(c["ablation"]) == set(ja["ablation"][m][s])
            for k, (lo, hi) in c["ablation"].items():
                assert lo <= ja["ablation"][m][s][k]["mAP"] <= hi
            curve = ja["curve"][m][s]
            assert len(c["curve_mined"]) == len(curve["sizes"]) == len(c["curve_random"])
            for (lo, hi), v in zip(c["curve_mined"], curve["mined"]):
                assert lo - 1e-12 <= v <= hi + 1e-12
    md = (tmp_path / "a" / "evaluation.md").read_text()
    assert "## 95 % confidence intervals over queries (bootstrap)" in md
    assert "| gem | hard | 5 |" in md
    # another seed draws other resamples; 0 samples turns the intervals off
    assert _evaluate(world, tmp_path, tmp_path / "c", "--bootstrap-seed", "1", "--confidence", "0.9") == 0
    jc = json.loads((tmp_path / "c" / "evaluation.json").read_text())
    assert jc["ci"]["gem"]["hard"]["mined"] != ja["ci"]["gem"]["hard"]["mined"]
    assert jc["bootstrap"]["level"] == 0.9 and "## 90 % confidence" in (tmp_path / "c" / "evaluation.md").read_text()
    assert _evaluate(world, tmp_path, tmp_path / "d", "--bootstrap-samples", "0") == 0
    jd = json.loads((tmp_path / "d" / "evaluation.json").read_text())
    assert "ci" not in jd and "confidence" not in (tmp_path / "d" / "evaluation.md").read_text()
    assert jd["results"] == ja["results"]


def test_bad_bootstrap_arguments_are_one_line_errors(world, tmp_path, capsys):
    run_inputs(world, tmp_path)
    assert _evaluate(world, tmp_path, tmp_path / "e", "--confidence", "1.5") == 2
    assert "confidence level must be between 0 and 1" in capsys.readouterr().err
