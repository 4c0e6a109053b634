"""benchmarks/bill_run.py and bill.py's projection at a run's sizes (no timings asserted)."""

import numpy as np
import pytest

from benchmarks.bill import interpolate
from benchmarks.bill_run import bill_stage, pool_shapes, read_benchmarks, recut


def test_interpolate_between_below_and_past_the_measured_points():
    pts = [(1e4, 2.0), (1e5, 11.0), (1e6, 110.0)]
    assert interpolate(pts, 1e5) == pytest.approx(11.0)
    # log-log between the two points around the size
    assert interpolate(pts, 10 ** 5.5) == pytest.approx(11.0 * 10 ** 0.5, rel=1e-6)
    # below the smallest: the straight line through the two smallest (fixed 1.0 s + 0.1 ms a unit)
    assert interpolate(pts, 5e3) == pytest.approx(1.0 + 0.5)
    # past the largest: never below linear (benchmarks.scale.project)
    assert interpolate(pts, 4e6) == pytest.approx(440.0, rel=1e-6)
    assert interpolate([(1e4, 3.0)], 5e3) == pytest.approx(3.0)
    assert interpolate([], 5e3) is None


def test_recut_gives_every_shape_of_the_mix():
    from fixtures.flickr_sizes import MIX

    img = np.random.default_rng(0).integers(0, 255, (768, 1024, 3), dtype=np.uint8)
    for w, h, _ in MIX:
        assert recut(img, w, h).shape == (h, w, 3)
    # a shape of the image's own aspect is the image itself
    assert np.array_equal(recut(img, 1024, 768), img)


def test_pool_shapes_follow_the_mix_and_bursts_their_source():
    ids = list(range(100, 300))
    shapes = pool_shapes(ids, {150: 101})
    assert shapes[150] == shapes[101]
    landscape43 = sum(1 for pid in ids if pid != 150 and shapes[pid] == (1024, 768))
    assert landscape43 in (59, 60, 61)  # 30 % of 200, give or take the burst


def test_benchmark_files_map_to_the_bills_stages(tmp_path):
    d = tmp_path / "benchmarks"
    (d / "describe").mkdir(parents=True)
    head = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (d / "score.tsv").write_text(head + "12.5\t0:00:12\t300.5\t1\t1\t1\t0\t0\t80\t9.75\n")
    (d / "describe" / "cnn-gem_candidates.tsv").write_text(head + "100\t0:01:40\t800\t1\t1\t1\t0\t0\t190\t190.25\n")
    (d / "leakrisk.tsv").write_text(head + "3\t0:00:03\t200\t1\t1\t1\t0\t0\t50\tNA\n")
    got = read_benchmarks(d)
    assert got["score"] == {"cpu_s": 9.75, "wall_s": 12.5, "max_rss_mb": 300.5}
    assert got["describe/cnn-gem_candidates"]["cpu_s"] == 190.25
    assert got["leakrisk"]["cpu_s"] == 0.0
    assert bill_stage("describe/cnn-gem_candidates") == "extract cnn-gem"
    assert bill_stage("describe/rsift-asmk+rsift-vlad_database") == "extract rsift (shared pass), landmark images"
    assert bill_stage("ingest") == bill_stage("geofilter") == "ingest+geofilter"
    assert bill_stage("leakrisk") is None and bill_stage("demo_world") is None


def _parts():
    rows = lambda key: [{key: s, "cpu_s": c, "wall_s": c, "peak_rss_mb": 100.0} for s, c in ((10_000, 2.0), (100_000, 11.0))]
    scale = {"ingest_geofilter": rows("rows"), "score": rows("candidates"), "select": rows("n"), "evaluate": rows("n"),
             "review_import": rows("items"), "report": rows("n"),
             "extract": {"cnn-gem": {"cpu_s_per_image": 0.4, "peak_rss_mb": 1.0}, "rsift-asmk": {"cpu_s_per_image": 0.1, "peak_rss_mb": 1.0},
                         "rsift-vlad": {"cpu_s_per_image": 0.1, "peak_rss_mb": 1.0}},
             "same_run_ratios": {"cnn_gem_onnx_over_torch_images_per_cpu_s": [2.0], "rsift_shared_pass_over_separate": 1.0},
             "release_faces_cpu_s_per_image": {"mean": 0.2}}
    nd = {"hash_cpu_s_per_image": 0.004, "landmark_cpu_s_per_candidate": 0.001,
          "projection": {k: {"core_hours": 1.0, "pairs_core_hours": 0.5, "hash_core_hours": 0.4, "landmark_core_hours": 0.1,
                             "all_pairs_core_hours": 9.0} for k in ("r1m", "ilias_100m")}}
    mix = {"process": {"images": 10, "ms_per_image": {"onnx": 250.0, "torch": 600.0}, "torch_over_onnx": 2.4}}
    return scale, nd, mix


def test_projection_at_a_runs_sizes():
    from benchmarks.bill import ASMK_S_PER_PAIR, at_sizes

    scale, nd, mix = _parts()
    sizes = {"rows": 10_000, "candidates": 1_000, "fit_images": 500, "landmark_images": 100, "queries": 70,
             "selected": 10_000, "review_items": 10_000}
    p = at_sizes(scale, nd, sizes, mix=mix)
    assert p["extract cnn-gem"] == pytest.approx(0.25 * 1_500)  # ONNX Runtime's own figure on the mix, learning sample counted
    assert at_sizes(scale, nd, sizes)["extract cnn-gem"] == pytest.approx(0.2 * 1_500)  # torch over the ratio
    assert p["extract rsift (shared pass)"] == pytest.approx(0.2 * 1_500)
    # score: the measured curve below its smallest point (fixed 1.0 s + 0.1 ms a candidate) and rsift-asmk's pairs
    assert p["score (70 queries × 3 methods)"] == pytest.approx(1.0 + 0.1 + ASMK_S_PER_PAIR * 70 * 1_000)
    assert p["near-duplicates"] == pytest.approx(0.005 * 1_000)
    assert p["release face check"] == pytest.approx(0.2 * 10_000)


def test_bill_takes_per_image_figures_from_a_run():
    from benchmarks.bill import bill
    from benchmarks.scale import R1M

    scale, nd, mix = _parts()
    run = {"sizes": {"candidates": 3_000, "fit_images": 2_000, "landmark_images": 500, "selected": 1_000},
           "stages": [{"stage": "extract cnn-gem", "measured_cpu_s": 1_000.0},
                      {"stage": "extract rsift (shared pass)", "measured_cpu_s": 1_500.0},
                      {"stage": "extract cnn-gem, landmark images", "measured_cpu_s": 50.0},
                      {"stage": "extract rsift (shared pass), landmark images", "measured_cpu_s": 50.0},
                      {"stage": "near-duplicates", "measured_cpu_s": 30.0}]}
    parts = bill(scale, nd, mix=mix)
    b = bill(scale, nd, mix=mix, run=run)
    assert b["extract cnn-gem"]["r1m"] == pytest.approx((0.2 * R1M["candidates"] / 3600, parts["extract cnn-gem"]["r1m"][0]))
    assert b["extract rsift (shared pass)"]["r1m"][0] == pytest.approx(0.3 * R1M["candidates"] / 3600)
    assert b["near-duplicates"]["r1m"][0] == pytest.approx(0.01 * R1M["candidates"] / 3600 + 0.6)
    assert b["release face check"] == parts["release face check"]  # a synthetic pool has no faces: the parts' figure
