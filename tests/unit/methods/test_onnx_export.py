"""`python -m mining.methods.export`: torch models of each family a researcher brings (random
weights, a few layers: `fixtures/export_models.py`) exported to what onnx-global reads, checked
against torch, their settings beside them; then real photographs (scikit-image's) described by
the describe stage with only `model:` given, each descriptor checked against the same model in
torch. And the settings that are likely wrong say so (docs/onnx-models.md)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest

from mining.compute.cluster import Cluster
from mining.errors import UserError
from mining.methods import base, get_method, onnx_settings
from mining.methods.onnx_export import Request, export
from mining.methods.onnx_run import to_input
from mining.photos import imageindex
from mining.photos.imagedecode import load_image
from mining.retrieval import descriptors
from mining.settings import layout, options
from mining.stages.describe import stage as describe

from paths import ROOT as REPO

HALF = [0.5, 0.5, 0.5]


def _request(factory: str, out: Path, **settings: object) -> Request:
    base = {"input": "long_side", "size": 224, "patch": 14, "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225],
            "channels": "RGB", "output_name": None, "prefix_tokens": 1, "p": 3.0}
    fields = tuple(settings.pop("fields", ()))
    extra = {k: settings.pop(k) for k in ("stride", "trace") if k in settings}
    return Request(factory=f"fixtures.export_models:{factory}", out=out, settings={**base, **settings}, fields=fields,
                   **extra)


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three real photographs (scikit-image's astronaut, coffee, chelsea) as a describe input folder."""
    from skimage import data

    root = tmp_path_factory.mktemp("photos")
    for pid, img in enumerate((data.astronaut(), data.coffee(), data.chelsea()), 1):
        p = root / layout.image_relpath(pid)
        p.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(p), cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 95])
    imageindex.write(root, [{"photo_id": i, "status": "ok", "path": layout.image_relpath(i)} for i in (1, 2, 3)])
    return root


def _torch_vector(net, img: np.ndarray, settings: dict, field: str) -> np.ndarray:  # noqa: ANN001
    """The descriptor in torch: the same normalised input, torch's resize, the model, the pooling."""
    import torch
    from torch.nn import functional as F

    x = torch.from_numpy(to_input(img, settings["mean"], settings["std"]))
    if settings["input"] == "square":
        x = F.interpolate(x, size=(settings["size"],) * 2, mode="bilinear", align_corners=False, antialias=True)
    with torch.inference_mode():
        out = net(x)
        y = out if isinstance(out, torch.Tensor) else out[field]
    kind = settings["output"]
    if kind == "feature_map":
        v = y.clamp(min=1e-6).pow(3).mean((2, 3)).pow(1 / 3)
    elif kind == "mean_tokens":
        v = y[:, settings["prefix_tokens"]:].mean(1)
    else:
        v = y[:, 0] if kind == "cls_token" else y
    return F.normalize(v, dim=1)[0].numpy()


def _described(photos: Path, model: Path, out: Path, factory: str) -> dict:
    """Describe the photos with onnx-global given only the model (its settings from the file),
    check every stored and in-memory descriptor against torch; returns the figures."""
    from fixtures import export_models

    opts = replace(options.defaults("describe"), shard_size=2, params={"onnx-global": {"model": str(model), "whiten": False}})
    describe.run(inputs=describe.Inputs(images=photos, image_set="candidates"), methods=["onnx-global"], out=out,
                 options=opts, progress=False)
    ids, stored = descriptors.open_store(out).load_all()
    method = get_method("onnx-global", {"model": str(model), "whiten": False})
    settings = method.params
    net = getattr(export_models, factory)()
    worst = {"stored": 0.0, "in_memory": 0.0}
    for pid, vec in zip(ids, stored):
        img = load_image(photos / layout.image_relpath(int(pid)), method.max_side)
        ref = _torch_vector(net, img, settings, settings["output_name"])
        got = method.describe(img)
        assert np.isfinite(vec).all() and abs(float(np.linalg.norm(vec)) - 1) < 2e-3
        worst["stored"] = max(worst["stored"], float(np.abs(vec - ref).max()))
        worst["in_memory"] = max(worst["in_memory"], float(np.abs(got - ref).max()))
    assert len(ids) == 3 and worst["stored"] < 2e-3 and worst["in_memory"] < 1e-4, worst  # float16 in the store
    return worst


def _same_upper_convs(path: Path) -> int:
    model = onnx.load(str(path))
    return sum(1 for n in model.graph.node if n.op_type == "Conv"
               and any(a.name == "auto_pad" and a.s == b"SAME_UPPER" for a in n.attribute))


# ---- the four families -------------------------------------------------------------------
def test_a_same_padding_cnn_exports_with_dynamic_size_at_same_upper_and_describes(tmp_path, photos):
    """timm-style Conv2dSame (padding computed from the input's size): exported as plain
    convolutions set to SAME_UPPER, checked at every parity of each side mod the stride."""
    path = tmp_path / "cnn.onnx"
    report = export(_request("same_cnn", path, output="feature_map", mean=HALF, std=HALF, stride=8))
    assert report["same_padding_convs"] == ["stem", "dw", "mid", "head"] and _same_upper_convs(path) == 4
    assert len(report["sizes"]) == 11 and report["max_abs_diff"] < 1e-4
    doc = json.loads(onnx_settings.settings_path(path).read_text())
    assert doc["onnx_global"] == {"input": "long_side", "mean": HALF, "std": HALF, "channels": "RGB",
                                  "output": "feature_map", "output_name": "output", "p": 3.0}
    dims = onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims[2:]] == ["height", "width"]
    _described(photos, path, tmp_path / "store", "same_cnn")


def test_a_dinov2_with_registers_exports_square_and_its_dynamic_export_is_refused(tmp_path, photos):
    """transformers' DINOv2 bakes its position-embedding interpolation at the traced size: a
    dynamic export fails the check at the next size (refused, no file); square works."""
    path = tmp_path / "dino.onnx"
    with pytest.raises(UserError, match="ONNX Runtime fails at .*not dynamic in the input's size") as exc:
        export(_request("dinov2_registers", path, input="patch_multiple", output="mean_tokens", prefix_tokens=5,
                        fields=["last_hidden_state"], trace=(56, 70)))
    assert "\n" not in str(exc.value) and not path.exists() and not onnx_settings.settings_path(path).exists()
    report = export(_request("dinov2_registers", path, input="square", size=56, output="mean_tokens", prefix_tokens=5,
                             fields=["last_hidden_state"]))
    assert report["sizes"] == ["56x56"] and report["max_abs_diff"] < 1e-4
    doc = json.loads(onnx_settings.settings_path(path).read_text())["onnx_global"]
    assert (doc["input"], doc["size"], doc["output"], doc["output_name"], doc["prefix_tokens"]) == \
        ("square", 56, "mean_tokens", "last_hidden_state", 5)
    _described(photos, path, tmp_path / "store", "dinov2_registers")


def test_a_siglip_pooled_output_without_cls_token(tmp_path, photos):
    path = tmp_path / "siglip.onnx"
    report = export(_request("siglip", path, input="square", size=64, output="descriptor", mean=HALF, std=HALF))
    assert report["outputs"] == ["last_hidden_state", "pooler_output"] and report["max_abs_diff"] < 1e-4
    doc = json.loads(onnx_settings.settings_path(path).read_text())["onnx_global"]
    assert (doc["output_name"], doc["mean"], doc["std"], doc["size"]) == ("pooler_output", HALF, HALF, 64)
    _described(photos, path, tmp_path / "store", "siglip")


def test_a_clip_fixed_square_model_by_the_command_line(tmp_path, photos):
    path = tmp_path / "clip.onnx"
    mean, std = ["0.48145466", "0.4578275", "0.40821073"], ["0.26862954", "0.26130258", "0.27577711"]
    done = subprocess.run([sys.executable, "-m", "mining.methods.export", "fixtures.export_models:clip", str(path),
                           "--input", "square", "--size", "64", "--output", "descriptor", "--mean", *mean, "--std", *std],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{path}: 1 size(s) checked (64x64), max |onnx - torch| ") and done.stderr == ""
    doc = json.loads(onnx_settings.settings_path(path).read_text())
    assert doc["onnx_global"]["output_name"] == "image_embeds" and doc["export"]["max_abs_diff"] < 1e-4
    _described(photos, path, tmp_path / "store", "clip")
    bad = subprocess.run([sys.executable, "-m", "mining.methods.export", "fixtures.export_models:nothing", str(path),
                          "--output", "descriptor"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "AttributeError" in bad.stderr


# ---- settings that are likely wrong say so ----------------------------------------------------
@pytest.fixture(scope="module")
def siglip_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("siglip") / "siglip.onnx"
    export(_request("siglip", path, input="square", size=64, output="descriptor", mean=HALF, std=HALF))
    return path


def _warnings(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, params: dict) -> list[str]:
    monkeypatch.setattr(base, "_SAID", set())
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mining.methods"):
        for _ in range(3):  # made several times in a run: said once
            get_method("onnx-global", {"whiten": False, **params})
    return [r.getMessage() for r in caplog.records if r.name.startswith("mining.methods")]


def test_cls_token_on_a_graph_with_a_pooled_output_warns_once(siglip_file, caplog, monkeypatch):
    said = _warnings(caplog, monkeypatch, {"model": str(siglip_file), "output": "cls_token"})
    assert len(said) == 2 and "the given ones are used" in said[0] and "output='cls_token' (the file: 'descriptor')" \
        in said[0]
    assert "output=cls_token takes token 0, but the model also outputs a pooled vector ('pooler_output')" in said[1]
    assert all("\n" not in s for s in said)
    assert _warnings(caplog, monkeypatch, {"model": str(siglip_file)}) == []  # the file's own settings: nothing


def test_mean_std_other_than_the_models_own_warn(siglip_file, caplog, monkeypatch, tmp_path):
    said = _warnings(caplog, monkeypatch, {"model": str(siglip_file), "mean": [0.485, 0.456, 0.406]})
    assert len(said) == 1 and "mean=[0.485, 0.456, 0.406] (the file: [0.5, 0.5, 0.5])" in said[0]
    alone = tmp_path / "alone.onnx"  # no settings file: the ONNX file's metadata_props still say 0.5
    alone.write_bytes(siglip_file.read_bytes())
    said = _warnings(caplog, monkeypatch, {"model": str(alone), "input": "square", "size": 64, "output": "descriptor",
                                           "output_name": "pooler_output"})
    assert len(said) == 1 and "mean=[0.485, 0.456, 0.406] (the model's: [0.5, 0.5, 0.5]), std=" in said[0]
    assert "the model's own metadata says otherwise" in said[0]


def test_a_fixed_size_model_described_at_another_size_is_refused(siglip_file, caplog, monkeypatch):
    """Refused, not warned: a fixed-size graph cannot run at another size (the file says which)."""
    monkeypatch.setattr(base, "_SAID", set())
    with pytest.raises(UserError, match="fixed size 64x64, which input=square size=96 does not give") as exc:
        get_method("onnx-global", {"model": str(siglip_file), "size": 96})
    assert "\n" not in str(exc.value) and "size=96 (the file: 64)" in caplog.text
    with pytest.raises(UserError, match="fixed size 64x64, which input=long_side"):
        get_method("onnx-global", {"model": str(siglip_file), "input": "long_side"})


def test_a_bad_settings_file_is_refused_in_one_line(siglip_file, tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(siglip_file.read_bytes())
    onnx_settings.settings_path(path).write_text(json.dumps({"onnx_global": {"output": "logits"}}))
    with pytest.raises(UserError, match=r"m.onnx.json: method onnx-global: output='logits' is not allowed"):
        get_method("onnx-global", {"model": str(path)})
    onnx_settings.settings_path(path).write_text(json.dumps({"onnx_global": {"whiten": False}}))
    with pytest.raises(UserError, match=r"unknown setting\(s\) \['whiten'\]"):
        get_method("onnx-global", {"model": str(path)})


def test_a_describe_run_says_a_conflict_once_workers_included(siglip_file, photos, tmp_path, capfd, caplog,
                                                               monkeypatch):
    """The stage makes the method, then each worker process rebuilds it: the warning is the stage's, once."""
    monkeypatch.setattr(base, "_SAID", set())
    params = {"onnx-global": {"model": str(siglip_file), "whiten": False, "mean": [0.485, 0.456, 0.406]}}
    opts = replace(options.defaults("describe"), shard_size=1, params=params)
    describe.run(inputs=describe.Inputs(images=photos, image_set="candidates"), methods=["onnx-global"],
                 out=tmp_path / "s", options=opts, progress=False, cluster=Cluster(workers=2))
    said = capfd.readouterr().err + caplog.text
    assert said.count("the settings given differ from siglip.onnx.json") == 1, said
