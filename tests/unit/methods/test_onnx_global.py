"""`onnx-global`: a user's ONNX model described with its settings, checked at load, its
checksum in the store, several models in one run.

The models are made here with onnx.helper (a CNN with a feature map, a ViT-like one with a
CLS token, a pooled-descriptor one); each descriptor is checked against the same network and
pipeline computed in torch, independently of mining.methods.onnx_run."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from download_folder import photo_folder
from fixtures.flickr_sizes import photo
from fixtures.onnx_models import CLS, CONV_B, CONV_W, MIX_W, PATCH_W, cnn_model, image_input, pooled_model, save, vit_model
from mining.settings import manifest, options
from mining.errors import UserError
from mining.methods import efficientnet_lite_onnx, get_method
from mining.methods.efficientnet_lite import short_sha256
from mining.stages.describe import stage as describe

from paths import ROOT as REPO


# ---- the reference: the same networks and steps in torch -----------------------------------
def _torch_input(img: np.ndarray, mean, std, bgr=False):  # noqa: ANN001, ANN202
    import torch

    a = img[:, :, ::-1].copy() if bgr else img.copy()
    x = torch.from_numpy(a).permute(2, 0, 1).unsqueeze(0).float().div_(255.0)
    return (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)


def _torch_net(kind: str, x):  # noqa: ANN001, ANN202
    import torch
    from torch.nn import functional as F

    if kind == "vit":
        p = F.conv2d(x, torch.from_numpy(PATCH_W), stride=4).flatten(2).transpose(1, 2)
        return torch.tanh(torch.cat([torch.from_numpy(CLS), p], 1) @ torch.from_numpy(MIX_W))
    f = F.relu(F.conv2d(x, torch.from_numpy(CONV_W), torch.from_numpy(CONV_B), stride=2, padding=1))
    return f.mean((2, 3)) if kind == "pooled" else f


def reference(img: np.ndarray, kind: str, out: str, sizes, mean=(0.485, 0.456, 0.406),  # noqa: ANN001
              std=(0.229, 0.224, 0.225), p=3.0, bgr=False, factors=None) -> np.ndarray:  # noqa: ANN001
    """The multi-scale vector in torch: each (size, scale factor) resized with interpolate."""
    import torch
    from torch.nn import functional as F

    x = _torch_input(img, mean, std, bgr)
    acc = 0
    for i, size in enumerate(sizes):
        if factors is not None and factors[i] != 1.0:
            xs = F.interpolate(x, scale_factor=factors[i], mode="bilinear", align_corners=False, antialias=True)
        elif tuple(size) != tuple(x.shape[2:]):
            xs = F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=True)
        else:
            xs = x
        with torch.inference_mode():
            y = _torch_net(kind, xs)
        if out == "feature_map":
            v = y.clamp(min=1e-6).pow(p).mean((2, 3)).pow(1 / p)
        elif out == "cls_token":
            v = y[:, 0]
        elif out == "mean_tokens":
            v = y[:, 1:].mean(1)
        else:
            v = y
        acc = acc + F.normalize(v, dim=1)
    return F.normalize(acc, dim=1)[0].numpy()


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# ---- descriptors -----------------------------------------------------------------------------
def test_cnn_feature_map_gem_multiscale_long_side_and_bgr(tmp_path):
    path = cnn_model(tmp_path / "cnn.onnx")
    img = photo(1, 203, 150)
    s = 1 / math.sqrt(2)
    m = get_method("onnx-global", {"model": path, "whiten": False, "scales": [1.0, s], "p": 2.5})
    ref = reference(img, "cnn", "feature_map", [(150, 203), None], p=2.5, factors=[1.0, s])
    assert _cos(m.describe(img), ref) >= 0.99999
    bgr = get_method("onnx-global", {"model": path, "whiten": False, "channels": "BGR", "mean": [0.4, 0.4, 0.4],
                                     "std": [0.25, 0.25, 0.25]})
    ref = reference(img, "cnn", "feature_map", [(150, 203)], mean=(0.4,) * 3, std=(0.25,) * 3, bgr=True)
    assert _cos(bgr.describe(img), ref) >= 0.99999
    assert _cos(bgr.describe(img), m.describe(img)) < 0.9999  # the settings are used


def test_vit_tokens_cls_and_mean_with_patch_multiple_and_square(tmp_path):
    path = vit_model(tmp_path / "vit.onnx")
    img = photo(2, 149, 203)  # portrait: 203 -> 204, 149 -> 148 (the nearest multiples of 4)
    for out in ("cls_token", "mean_tokens"):
        m = get_method("onnx-global", {"model": path, "whiten": False, "input": "patch_multiple", "patch": 4,
                                       "output": out})
        got = m.describe(img)
        assert got.shape == (12,) and _cos(got, reference(img, "vit", out, [(204, 148)])) >= 0.99999
    fixed = vit_model(tmp_path / "vit224.onnx", h=64, w=64)
    m = get_method("onnx-global", {"model": fixed, "whiten": False, "input": "square", "size": 64, "output": "cls_token"})
    assert _cos(m.describe(img), reference(img, "vit", "cls_token", [(64, 64)])) >= 0.99999


def test_a_descriptor_output_is_taken_as_is(tmp_path):
    path = pooled_model(tmp_path / "pooled.onnx")
    img = photo(3, 120, 90)
    m = get_method("onnx-global", {"model": path, "whiten": False, "output": "descriptor"})
    assert m.dim() == 0 and _cos(m.describe(img), reference(img, "pooled", "descriptor", [(90, 120)])) >= 0.99999


def test_the_lite0_backbone_as_a_users_file_gives_cnn_gems_descriptors():
    """The cached export of cnn-gem's backbone, given as a user's model with Lite0's settings."""
    path = str(efficientnet_lite_onnx.ensure_model())
    user = get_method("onnx-global", {"model": path, "mean": [0.5] * 3, "std": [0.5] * 3, "whiten": False,
                                      "scales": [1.0, 1 / math.sqrt(2)]})
    gem = get_method("cnn-gem", {"whiten": False})
    for w, h in [(768, 576), (512, 768), (768, 431)]:
        img = photo(w, w, h)
        assert _cos(user.describe(img), gem.describe(img)) >= 0.99999


# ---- refusals at load --------------------------------------------------------------------------
def _two_inputs(path: Path) -> str:
    nodes = [helper.make_node("Add", ["image", "other"], ["fmap"])]
    out = helper.make_tensor_value_info("fmap", TensorProto.FLOAT, [1, 3, "h", "w"])
    return save(path, nodes, [image_input(), helper.make_tensor_value_info("other", TensorProto.FLOAT, [1, 3, "h", "w"])],
                 [out], [])


def _uint8_input(path: Path) -> str:
    nodes = [helper.make_node("Cast", ["image"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Conv", ["f", "w", "b"], ["fmap"], strides=[2, 2], pads=[1, 1, 1, 1])]
    out = helper.make_tensor_value_info("fmap", TensorProto.FLOAT, [1, 16, "fh", "fw"])
    return save(path, nodes, [image_input(dtype=TensorProto.UINT8)], [out], [("w", CONV_W), ("b", CONV_B)])


@pytest.mark.parametrize("make, settings, message", [
    (lambda p: _two_inputs(p), {}, "has 2 inputs; onnx-global feeds one image tensor"),
    (lambda p: cnn_model(p, c=1), {}, r"input 'image' is tensor\(float\) \[1, 1, 'h', 'w'\]; onnx-global feeds"),
    (lambda p: _uint8_input(p), {}, r"input 'image' is tensor\(uint8\)"),
    (lambda p: cnn_model(p, batch=2), {}, "has a fixed batch of 2"),
    (lambda p: cnn_model(p, h=64, w=64), {}, "fixed size 64x64, which input=long_side size=224 does not give"),
    (lambda p: cnn_model(p, h=64, w=64), {"input": "square", "size": 96}, "fixed size 64x64, which input=square"),
    (lambda p: cnn_model(p, h=64, w=64), {"input": "square", "size": 64, "scales": [1.0, 0.5]},
     "has a fixed size: scales must be"),
    (lambda p: cnn_model(p), {"output": "cls_token"}, "output 'fmap' has rank 4 .*output=cls_token needs rank 3"),
    (lambda p: vit_model(p), {"output": "feature_map"}, "output 'tokens' has rank 3 .*needs rank 4"),
    (lambda p: cnn_model(p), {"output_name": "logits"}, "no output 'logits' \\(it has fmap\\)"),
    (lambda p: p.write_bytes(b"not a model") and str(p), {}, "not a loadable ONNX model"),
])
def test_a_model_that_does_not_fit_its_settings_is_refused_at_load_in_one_line(tmp_path, make, settings, message):
    path = make(tmp_path / "m.onnx")
    with pytest.raises(UserError, match=message) as exc:
        get_method("onnx-global", {"model": path, **settings})
    assert "\n" not in str(exc.value)


def test_settings_refused_before_any_model_is_read(tmp_path):
    with pytest.raises(UserError, match="mean must have 3 values"):
        get_method("onnx-global", {"mean": [0.5, 0.5]})
    with pytest.raises(UserError, match=r"output='logits' is not allowed"):
        get_method("onnx-global", {"output": "logits"})
    with pytest.raises(UserError, match="model .*nope.onnx: file not found"):
        get_method("onnx-global", {"model": str(tmp_path / "nope.onnx")})
    with pytest.raises(UserError, match="no model given"):
        get_method("onnx-global").describe(photo(1, 40, 30))


# ---- stores: checksum, several models, the manifest ---------------------------------------------
def _folder(root: Path, n: int = 5) -> Path:
    return photo_folder(root, n)


def _run(images: Path, methods: list[str], out: Path, params: dict) -> dict:
    opts = replace(options.defaults("describe"), shard_size=2, params=params)
    return describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=methods, out=out,
                        options=opts, progress=False)


def test_two_models_in_one_run_each_in_its_own_store_with_its_checksum(tmp_path):
    images = _folder(tmp_path / "images")
    cnn, vit = cnn_model(tmp_path / "cnn.onnx"), vit_model(tmp_path / "vit.onnx")
    params = {"onnx-global-cnn": {"model": cnn, "whiten": False},
              "onnx-global-vit": {"model": vit, "whiten": False, "input": "patch_multiple", "patch": 4,
                                  "output": "cls_token"}}
    outs = {name: tmp_path / "desc" / name / "candidates" for name in params}
    infos = _run(images, list(params), tmp_path / "desc" / "{method}" / "candidates", params)
    assert [infos[n]["dim"] for n in params] == [16, 12] and all(i["count"] == 5 for i in infos.values())
    for name, path in (("onnx-global-cnn", cnn), ("onnx-global-vit", vit)):
        stored = json.loads((outs[name] / "store.json").read_text())
        assert stored["method"] == name and stored["params"]["model_sha256"] == short_sha256(path)
        _run(images, [name], tmp_path / "alone" / name, {name: params[name]})
        for f in sorted((outs[name] / "shards").glob("*.npy")):
            assert f.read_bytes() == (tmp_path / "alone" / name / "shards" / f.name).read_bytes()


def test_a_store_made_with_another_model_file_is_refused(tmp_path):
    images = _folder(tmp_path / "images")
    model = tmp_path / "m.onnx"
    cnn_model(model)
    out = tmp_path / "store"
    _run(images, ["onnx-global"], out, {"onnx-global": {"model": str(model), "whiten": False}})
    other = onnx.load(str(model))  # the same path, another file: other biases
    other.graph.initializer[1].CopyFrom(numpy_helper.from_array(CONV_B + 1, "b"))
    onnx.save(other, str(model))
    with pytest.raises(UserError, match=r"existing store was made with different params \(model_sha256\)"):
        _run(images, ["onnx-global"], out, {"onnx-global": {"model": str(model), "whiten": False}})
    recorded = json.loads((out / "store.json").read_text())["params"]
    with pytest.raises(UserError, match="has checksum .* but the store was made with"):  # a landmark set's --model
        get_method("onnx-global", {**recorded, "model": str(model)})


def test_a_store_names_its_model_by_file_name_and_checksum_never_by_path(tmp_path, monkeypatch):
    images = _folder(tmp_path / "images")
    (tmp_path / "models").mkdir()
    model = cnn_model(tmp_path / "models" / "my-net.onnx")
    _run(images, ["onnx-global"], tmp_path / "cand", {"onnx-global": {"model": str(model), "whiten": False}})
    text = (tmp_path / "cand" / "store.json").read_text() + (tmp_path / "cand" / "describe.json").read_text()
    assert str(tmp_path / "models") not in text
    params = json.loads((tmp_path / "cand" / "store.json").read_text())["params"]
    assert params["model"] == "my-net.onnx" and params["model_sha256"] == short_sha256(model)
    gnd = _folder(tmp_path / "queries")  # a landmark set described with the candidates' store as --model
    opts = replace(options.defaults("describe"), shard_size=2, params={"onnx-global": {"model": str(model)}})
    info = describe.run(inputs=describe.Inputs(images=gnd, image_set="candidates", models=tmp_path / "cand"),
                        methods=["onnx-global"], out=tmp_path / "again", options=opts, progress=False)
    assert info["onnx-global"]["params"]["model"] == "my-net.onnx"
    monkeypatch.chdir(tmp_path)  # the store's name alone does not find a file: one line that says what to give
    with pytest.raises(UserError, match=r"model my-net.onnx: file not found .*give the file's path"):
        describe.run(inputs=describe.Inputs(images=gnd, image_set="candidates", models=tmp_path / "cand"),
                     methods=["onnx-global"], out=tmp_path / "third", options=replace(opts, params={}),
                     progress=False)


def test_the_cli_finds_a_stores_model_through_the_manifest_path(tmp_path, capsys):
    """The workflow's landmark sets: `mining describe --model STORE --manifest M`: the store names
    its model by file name, the manifest's path finds it (the checksum decides it is the same)."""
    from mining.cli import main

    images = _folder(tmp_path / "images")
    model = cnn_model(tmp_path / "my cnn.onnx")
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    m["methods"], m["evaluate"]["held_out"] = ["onnx-global-cnn"], []
    m["describe"]["params"] = {"onnx-global-cnn": {"model": model, "whiten": False}}
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(m))
    common = ["--method", "onnx-global-cnn", "--images", str(images), "--set", "candidates", "--manifest",
              str(tmp_path / "m.yaml"), "--dask-cluster=local", "--workers", "1", "--no-progress"]
    assert main(["describe", *common, "--out", str(tmp_path / "c")]) == 0
    assert main(["describe", *common, "--model", str(tmp_path / "c"), "--out", str(tmp_path / "again")]) == 0
    assert json.loads((tmp_path / "again" / "store.json").read_text())["params"]["model"] == "my cnn.onnx"


def test_the_manifest_names_several_instances_and_requires_their_model(tmp_path):
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    m["methods"] = ["cnn-gem", "onnx-global-dino", "onnx-global-cnn"]
    m["describe"]["params"] = {"onnx-global-dino": {"model": "dino.onnx", "output": "cls_token"},
                               "onnx-global-cnn": {"model": "cnn.onnx", "p": 4}}
    assert manifest.validate(m, "x.yaml")["methods"] == ["cnn-gem", "onnx-global-dino", "onnx-global-cnn"]
    del m["describe"]["params"]["onnx-global-cnn"]
    with pytest.raises(UserError, match="method 'onnx-global-cnn' needs the setting\\(s\\) model"):
        manifest.validate(m, "x.yaml")
    m["describe"]["params"]["onnx-global-cnn"] = {"model": "cnn.onnx", "output": "tokens"}
    with pytest.raises(UserError, match="output='tokens' is not allowed"):
        manifest.validate(m, "x.yaml")
    with pytest.raises(UserError, match="method onnx-global-x: the setting model must be given"):
        _run(_folder(tmp_path / "images", 1), ["onnx-global-x"], tmp_path / "s", {})
