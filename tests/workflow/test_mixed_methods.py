"""One manifest mines with a user's own ONNX models (`onnx-global-NAME`, two of them), rsift-asmk
with spatial verification and the shipped methods together: every stage runs on the micro
world, each method has its stores, the user's model checksum is in every one of its stores, and
the evaluation holds each method's rows, rsift-asmk's +SP ranking and the αQE/DBA rows of every
global method, the user's models included."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from onnx_models import cnn_model, vit_model
from snakerun import REPO, failure_text, snakemake

SETS = ("candidates", "queries", "database")


@pytest.mark.slow
def test_a_manifest_mines_with_user_onnx_models_spatial_verification_and_the_shipped_methods(tmp_path):
    cnn, vit = cnn_model(tmp_path / "my cnn.onnx"), vit_model(tmp_path / "my-vit.onnx")
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    m["demo"]["preset"] = "micro"
    m["methods"] = ["cnn-gem", "rsift-asmk", "onnx-global-cnn", "onnx-global-vit"]
    m["evaluate"]["held_out"] = []  # CI time: the demo's held-out network is the demo run's to check
    m["describe"]["params"].pop("cnn-gem-lite2")
    params = m["describe"]["params"]
    assert params["rsift-asmk"]["spatial_verification"]  # the demo manifest verifies rsift-asmk's top k
    params["onnx-global-cnn"] = {"model": cnn, "whiten": False, "max_side": 256}
    params["onnx-global-vit"] = {"model": vit, "whiten": False, "max_side": 256, "input": "patch_multiple",
                                 "patch": 4, "output": "cls_token"}
    m["select"]["n"] = 5
    m["score"]["review_top"] = 10
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump(m, allow_unicode=True))
    work = tmp_path / "run"
    r = snakemake(work, "--cores", "2", manifest=manifest)
    assert r.returncode == 0, failure_text(r, work / "results/demo")
    root = work / "results/demo"

    for name, path in (("onnx-global-cnn", cnn), ("onnx-global-vit", vit)):
        sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
        for s in SETS:
            info = json.loads((root / f"descriptors/{name}/{s}/store.json").read_text())
            assert info["method"] == name and info["params"]["model_sha256"] == sha[:16], (name, s, info)
    assert json.loads((root / "descriptors/onnx-global-cnn/candidates/store.json").read_text())["dim"] == 16
    assert json.loads((root / "descriptors/onnx-global-vit/candidates/store.json").read_text())["dim"] == 12

    ev = json.loads((root / "evaluation/evaluation.json").read_text())
    assert set(ev["results"]) == {"cnn-gem", "rsift-asmk", "rsift-asmk+SP", "onnx-global-cnn", "onnx-global-vit"}
    for method in ("cnn-gem", "onnx-global-cnn", "onnx-global-vit"):  # the global methods
        assert {f"{method}+αQE", f"{method}+DBA", f"{method}+DBA+αQE"} <= set(ev["variants"]), sorted(ev["variants"])
    assert not any(v.startswith("rsift-asmk") for v in ev["variants"])  # not a global method
    assert (root / "selected/distractors.txt").read_text().count("\n") == 5
