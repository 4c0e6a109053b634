"""A method setting out of its domain is one line naming the method, the key and what is
allowed, from `mining describe` and from the manifest, before any image is read."""

from __future__ import annotations

import re

import pytest
import yaml

from mining.settings import manifest
from mining.cli import main
from mining.errors import UserError
from mining.methods import get_method, method_class, method_names

from paths import ROOT as REPO

BAD = [  # (method, KEY=VALUE, words the message must hold)
    ("cnn-gem", "whiten_dim=-5", [">= 1"]),
    ("cnn-gem", "whiten_dim=abc", ["an integer"]),
    ("cnn-gem", "whiten_dim=2.5", ["an integer"]),
    ("cnn-gem", "whiten_dim=true", ["an integer"]),
    ("cnn-gem", "scales=[]", ["non-empty list"]),
    ("cnn-gem", "scales=[1, 0]", ["> 0"]),
    ("cnn-gem", "scales=1", ["list"]),
    ("cnn-gem", "max_side=0", [">= 32"]),
    ("cnn-gem", "p=0", ["> 0"]),
    ("cnn-gem", "whiten=maybe", ["true or false"]),
    ("cnn-gem", "whiten_shrink=-1", [">= 0"]),
    ("cnn-gem", "device=gpu", ["auto, cpu, cuda"]),
    ("rsift-vlad", "vocabulary=0", [">= 1"]),
    ("rsift-vlad", "vocabulary=-3", [">= 1"]),
    ("rsift-vlad", "dim=-1", [">= 1"]),
    ("rsift-vlad", "max_features=0", [">= 1"]),
    ("rsift-asmk", "codebook_size=1", [">= 2"]),
    ("rsift-asmk", "query_assignment=0", [">= 1"]),
    ("rsift-asmk", "tau=nan", ["<= 1"]),
]


def _describe(tmp_path, method, *extra):
    (tmp_path / "images").mkdir(exist_ok=True)  # never read: the settings fail first
    return main(["describe", "--method", method, "--images", str(tmp_path / "images"), "--set", "candidates",
                 "--out", str(tmp_path / "out"), "--workers", "0", *extra])


@pytest.mark.parametrize("method, param, words", BAD, ids=[f"{m}:{p}" for m, p, _ in BAD])
def test_describe_refuses_a_setting_out_of_its_domain_in_one_line(tmp_path, capsys, method, param, words):
    rc = _describe(tmp_path, method, "--param", param)
    err = capsys.readouterr().err.strip()
    key = param.partition("=")[0]
    assert rc == 2 and "\n" not in err and "Traceback" not in err, err
    for w in (method, key, *words):
        assert w in err, (w, err)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("method, param, words", BAD, ids=[f"{m}:{p}" for m, p, _ in BAD])
def test_the_manifest_refuses_a_setting_out_of_its_domain(method, param, words):
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    key, _, raw = param.partition("=")
    m["describe"]["params"] = {method: {key: yaml.safe_load(raw)}}
    with pytest.raises(UserError) as exc:
        manifest.validate(m, "x.yaml")
    msg = str(exc.value)
    assert "\n" not in msg and f"describe.params.{method}.{key}" in msg
    for w in (method, *words):
        assert w in msg, (w, msg)


def test_every_builtin_setting_declares_its_domain_and_its_default_is_in_it():
    for name in ("cnn-gem", "rsift-asmk", "rsift-vlad"):
        cls = method_class(name)
        assert set(cls.domains) == set(cls.defaults), name
        cls.check_params(cls.defaults)
    assert {"cnn-gem", "rsift-asmk", "rsift-vlad"} <= set(method_names())


def test_good_values_pass():
    method_class("cnn-gem").check_params({"whiten_dim": 64, "scales": [1, 0.7071], "p": 3, "device": "cpu",
                                          "max_side": 512, "whiten": False, "model_file": None})
    method_class("rsift-vlad").check_params({"vocabulary": 8, "dim": 16, "whiten_shrink": 0})


def test_cuda_without_a_gpu_is_one_line(tmp_path, capsys):
    """ONNX Runtime (the default backend) without its CUDA provider, and torch without a CUDA
    device: each a one-line refusal naming the setting, before any image is read."""
    import onnxruntime as ort
    import torch

    if torch.cuda.is_available() or "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this machine has a GPU")
    with pytest.raises(UserError, match="device=cuda.*no CUDA device"):
        get_method("cnn-gem", {"device": "cuda", "backend": "torch"}).device
    with pytest.raises(UserError, match="device=cuda.*CUDAExecutionProvider is not available"):
        method_class("cnn-gem").check_here({"device": "cuda"})
    rc = _describe(tmp_path, "cnn-gem", "--param", "device=cuda:1")
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "cnn-gem" in err and "CUDAExecutionProvider is not available" in err, err


TEXT_NUMBERS = [("cnn-gem", "whiten_shrink", "1e-3", "1.0e-3"), ("rsift-asmk", "tau", "1e-30", "1.0e-30"),
                ("rsift-asmk", "alpha", "3e2", "3.0e+2"), ("cnn-gem", "scales", "[1, 1e-3]", "1.0e-3")]


@pytest.mark.parametrize("method, key, raw, spelled", TEXT_NUMBERS, ids=[f"{m}:{k}" for m, k, _, _ in TEXT_NUMBERS])
def test_a_number_yaml_reads_as_text_says_so_and_how_to_write_it(tmp_path, capsys, method, key, raw, spelled):
    """YAML 1.1 reads `1e-3` (no dot) as text: as a --param value and in the manifest the refusal
    says the value is text and gives a spelling YAML reads as the number, which is then taken."""
    assert yaml.safe_load(spelled) == float(spelled) and isinstance(yaml.safe_load(raw.strip("[]").split()[-1]), str)
    rc = _describe(tmp_path, method, "--param", f"{key}={raw}")
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "text, not a number" in err and f"write {spelled}" in err, err
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    m["describe"]["params"] = {method: {key: yaml.safe_load(raw)}}
    with pytest.raises(UserError, match=rf"describe\.params\.{method}\.{key}: .*text, not a number.*write {re.escape(spelled)}"):
        manifest.validate(m, "x.yaml")
    m["describe"]["params"] = {method: {key: yaml.safe_load(raw.replace(raw.strip("[]").split()[-1], spelled))}}
    manifest.validate(m, "x.yaml")


@pytest.mark.parametrize("sv", [{"top_k": 0}, {"top_k": 5, "min_inliers": 0}, {"top_k": 2.5}, {"k": 3}])
def test_spatial_verification_out_of_its_domain_is_refused_by_every_reader_with_describes_rule(tmp_path, sv):
    """describe's rule (a mapping {top_k: integer >= 1, min_inliers: integer >= 1}) is the one
    rule: the settings (`options.build`, the manifest) and a store whose store.json says
    otherwise (score's and evaluate's reader, which wrote top_k 0 into score's stats.json)."""
    from mining.retrieval.descriptors import open_store, write_store_info
    from mining.retrieval.reranking import store_settings
    from mining.settings import options

    rule = "spatial_verification must be a mapping {top_k: integer >= 1, min_inliers: integer >= 1}"
    with pytest.raises(UserError, match=re.escape(rule)):
        method_class("rsift-asmk").check_params({"spatial_verification": sv})
    with pytest.raises(UserError, match=r"describe\.params\.rsift-asmk\.spatial_verification: .*" + re.escape(rule)):
        options.build("describe", {"params": {"rsift-asmk": {"spatial_verification": sv}}})
    write_store_info(tmp_path, {"method": "rsift-asmk", "kind": "asmk", "count": 0, "shards": 0,
                                "params": {"spatial_verification": sv}})
    with pytest.raises(UserError, match=rf"^{re.escape(str(tmp_path))}: store.json's .*{re.escape(rule)}"):
        store_settings(open_store(tmp_path), True)
    options.build("describe", {"params": {"rsift-asmk": {"spatial_verification": {"top_k": 5}}}})
