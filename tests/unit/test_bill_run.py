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
