"""`benchmarks/cuda_check.py`, the check of onnx-global on a GPU, in what runs without one: its CPU
self-check (CPU against CPU through the same code), and its refusal, in one clear reason, where
onnxruntime has no CUDA provider."""

from __future__ import annotations

import json

import onnxruntime as ort
import pytest

from benchmarks import cuda_check


def test_the_cpu_self_check_passes(tmp_path, capsys):
    out = tmp_path / "check.json"
    assert cuda_check.main(["--device", "cpu", "--images", "3", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report == json.loads(capsys.readouterr().out)
    assert report["ok"] and report["sizes"] == ["320x240", "240x320", "333x241"]
    for name in ("cnn", "vit"):
        assert report[name]["max_abs_diff"] == 0.0
        assert report[name]["providers_used"] == {"device": ["CPUExecutionProvider"], "cpu": ["CPUExecutionProvider"]}
        assert report[name]["images_per_s"]["cpu"] > 0


def test_a_tolerance_below_the_difference_fails():
    report = cuda_check.check("cpu", 1, -1.0)
    assert not report["ok"] and "cnn: max |cpu - cpu| 0 > -1" in report["reason"]


@pytest.mark.skipif("CUDAExecutionProvider" in ort.get_available_providers(), reason="onnxruntime-gpu is here")
def test_without_the_gpu_build_it_says_so_and_exits_2(capsys):
    assert cuda_check.main(["--device", "cuda"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"] and "install onnxruntime-gpu" in report["reason"]
    assert "CUDAExecutionProvider" not in report["providers_available"]
