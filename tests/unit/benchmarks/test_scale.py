"""benchmarks/scale.py: its growth fit and projection, and a quick run's JSON (no timings asserted)."""

import importlib.util
import json
import subprocess
import sys

import pytest

from paths import ROOT


@pytest.fixture(scope="module")
def scale():
    spec = importlib.util.spec_from_file_location("scale_bench", ROOT / "benchmarks" / "scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_exponent_and_projection(scale):
    linear = [(1e4, 2.0), (1e5, 20.0), (1e6, 200.0)]
    assert scale.exponent(linear) == pytest.approx(1.0)
    assert scale.exponent([(1e4, 1.0), (1e6, 1e4)]) == pytest.approx(2.0)
    assert scale.exponent([(1e4, 5.0)]) is None
    assert scale.project(linear, 4e6) == pytest.approx(800.0)
    # a flat (start-up dominated) curve is never projected below linear from its largest point
    assert scale.project([(1e3, 3.0), (1e4, 3.0)], 1e6) == pytest.approx(300.0)


def test_summary_projects_r1m_per_stage(scale):
    rows = [{"n": n, "wall_s": n / 1e4, "cpu_s": n / 1e4, "peak_rss_mb": 100.0, "disk_bytes": 50 * n} for n in (10_000, 100_000)]
    out = scale.summary({"select": rows, "extract": {"cnn-gem": {"cpu_s_per_image": 0.5, "images": 4, "peak_rss_mb": 900.0}}})
    sel = out["select + ATTRIBUTION"]
    assert sel["exponent_cpu"] == pytest.approx(1.0)
    assert sel["r1m_core_hours"] == pytest.approx(100 / 3600, rel=1e-3)  # 100 s at 1M
    assert sel["r1m_disk_gb"] == pytest.approx(0.05)
    assert sel["r1m_peak_rss_gb"] == pytest.approx(100 / 1024, abs=0.01)  # flat memory stays flat
    assert sel["p100m_size"] == 24_400_000 and sel["p100m_core_hours"] == pytest.approx(100 * 24.4 / 3600, rel=1e-2)
    ex = out["extract cnn-gem"]
    assert ex["p100m_core_hours"] == pytest.approx(0.5 * 100_000_000 / 3600, rel=1e-3)
    assert ex["r1m_core_hours"] == pytest.approx(0.5 * 4_100_000 / 3600, rel=1e-3)
    assert ex["r1m_hours_32_cores"] == pytest.approx(ex["r1m_core_hours"] / 32, rel=1e-2)


def test_quick_run_writes_every_measured_stage(tmp_path):
    """The quick mode's cheapest stages end to end (subprocess children, wait4 usage)."""
    out = tmp_path / "scale.json"
    r = subprocess.run([sys.executable, "-m", "benchmarks.scale", "--quick", "--only", "select,review",
                        "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert json.loads(r.stdout) == res
    assert [row["n"] for row in res["select"]] == [200, 800]
    assert all(row["n_selected"] == row["n"] and row["peak_rss_mb"] > 0 and row["cpu_s"] >= 0 for row in res["select"])
    assert [row["items"] for row in res["review_import"]] == [110, 440]
    for key in ("select + ATTRIBUTION", "review import"):
        s = res["summary"][key]
        assert {"sizes", "wall_s", "cpu_s", "peak_rss_mb", "exponent_cpu", "r1m_core_hours", "r1m_peak_rss_gb",
                "r1m_hours_32_cores"} <= set(s)
        assert len(s["sizes"]) == len(s["wall_s"]) == 2


def test_bill_takes_today_from_same_run_ratios():
    """benchmarks/bill.py: extraction's before figures divided by the same-run ratios, the
    near-duplicates' from their own benchmark; every stage's R1M and 100M core-hours."""
    from benchmarks.bill import bill, markdown

    rows = [{"n": n, "wall_s": n / 1e4, "cpu_s": n / 1e4, "peak_rss_mb": 100.0} for n in (10_000, 100_000)]
    ex = {m: {"cpu_s_per_image": c, "peak_rss_mb": 500.0} for m, c in (("cnn-gem", 0.4), ("rsift-asmk", 0.1), ("rsift-vlad", 0.1))}
    scale = {"select": rows, "extract": ex, "release_faces_cpu_s_per_image": {"mean": 0.2},
             "same_run_ratios": {"cnn_gem_onnx_over_torch_images_per_cpu_s": [2.7, 2.5], "rsift_shared_pass_over_separate": 2.0}}
    nd = {"projection": {k: {"core_hours": 1.0, "all_pairs_core_hours": 40.0, "hash_core_hours": 0.5, "landmark_core_hours": 0.1}
                         for k in ("r1m", "ilias_100m")}}
    b = bill(scale, nd)
    after, before = b["extract cnn-gem"]["r1m"]
    assert before == pytest.approx(0.4 * 4_100_000 / 3600, rel=1e-3) and after == pytest.approx(before / 2.5)
    assert b["extract rsift (shared pass)"]["p100m"][0] == pytest.approx(0.2 * 1e8 / 3600 / 2.0, rel=1e-3)
    assert b["near-duplicates"]["r1m"] == (1.0, 40.6)
    assert b["release face check"]["r1m"][0] == pytest.approx(0.2 * 1_000_000 / 3600)
    mix = {"process": {"images": 200, "torch_over_onnx": 2.5, "ms_per_image": {"onnx": 250.0, "torch": 625.0}}}
    # the mix's own CPU per image (ONNX Runtime; torch's in the same run the reference), not a quotient
    assert bill(scale, nd, mix=mix)["extract cnn-gem"]["r1m"] == pytest.approx((0.25 * 4_100_000 / 3600, 0.625 * 4_100_000 / 3600))
    text = markdown(b)
    assert text.count("#### ") == 6 and "| R1M |" in text and "What would cut it" in text
