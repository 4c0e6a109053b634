"""Retrieval-method plug-ins: each one finds a transformed copy before unrelated images."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mining.settings import options
from mining.errors import UserError
from mining.methods import get_method
from mining.methods.base import apply_pca_whitening, fit_pca_whitening
from scenes import gray, scene, transformed
from paths import ROOT

SMALL = {
    "cnn-gem": {"max_side": 160, "scales": [1.0], "whiten_dim": 8},
    "rsift-asmk": {"codebook_size": 64, "max_features": 400},
    "rsift-vlad": {"vocabulary": 16, "dim": 24, "max_features": 400},
}


def _prep(method, img):
    from PIL import Image

    im = Image.fromarray(img).convert(method.mode)
    s = min(1.0, method.max_side / max(im.size))
    im = im.resize((max(1, round(im.width * s)), max(1, round(im.height * s))))
    return np.asarray(im)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_transformed_copy_beats_unrelated_images(name):
    db_method = get_method(name, SMALL[name])
    q_method = get_method(name, SMALL[name], query=True)
    train = [scene(100 + i) for i in range(24)]
    if db_method.learns:
        state = db_method.fit([db_method.fit_features(_prep(db_method, t)) for t in train])
        q_method.set_state(state)
    originals = [scene(s) for s in range(6)]
    db = [db_method.describe(_prep(db_method, o)) for o in originals]
    db_payload = db_method.concat_payloads([_block(db_method, [p]) for p in db], {}) if db_method.kind != "global" else np.stack(db)
    for i in (0, 3):
        q = q_method.describe(_prep(q_method, transformed(originals[i], seed=i)))
        qp = q_method.concat_payloads([_block(q_method, [q])], {}) if q_method.kind != "global" else q[None]
        sims = db_method.similarity(qp, db_payload, {"params": db_method.params})[0]
        assert sims.dtype == np.float32 and sims.shape == (6,)
        others = np.delete(sims, i)
        assert sims[i] > others.max(), (name, i, sims)


def _block(method, payloads):
    """A payload round-tripped through the method's own shard file format."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        method.write_payloads(Path(d), "00000", payloads)
        return method.load_payload(Path(d), "00000", {})


def test_lite0_backbone_loads_every_checkpoint_key_strictly():
    import torch

    from mining.methods.efficientnet_lite import build_lite, lite_weights_path

    net = build_lite()  # load_state_dict(strict=True) inside
    ckpt = torch.load(lite_weights_path(), map_location="cpu", weights_only=True)
    assert len(ckpt) == 296 and set(net.state_dict()) == set(ckpt)
    with torch.inference_mode():
        fmap = net(torch.zeros(1, 3, 97, 131))
    assert fmap.shape == (1, 1280, 4, 5)  # TF "same" padding: ceil(97/32), ceil(131/32)


@pytest.mark.parametrize("variant, side, blocks", [("lite0", 224, 16), ("lite2", 260, 21)])
def test_each_lite_backbone_loads_strictly_and_sees_the_cat_in_a_real_photo(variant, side, blocks):
    """EfficientNet-Lite0 and -Lite2 (cnn-gem's `backbone`) as written out: every checkpoint key
    loads, and the ImageNet head puts a cat class (281-285) first for scikit-image's photo of
    Chelsea the cat (TF preprocessing, mean = std = 0.5), so the stages' table is the network's."""
    import torch
    from PIL import Image
    from skimage import data

    from mining.methods.efficientnet_lite import build_lite

    net = build_lite(variant)
    assert len(net._blocks) == blocks
    img = np.asarray(Image.fromarray(data.chelsea()).resize((side, side), Image.BILINEAR), np.float32) / 255.0
    x = torch.from_numpy((img - 0.5) / 0.5).permute(2, 0, 1)[None].contiguous()
    with torch.inference_mode():
        top = int(net.logits(x).argmax())
    assert 281 <= top <= 285, top


def test_asmk_kernel_matches_the_asmk_package_inverted_file():
    from asmk import inverted_file
    from asmk.functional import asmk_kernel

    m = get_method("rsift-asmk", SMALL["rsift-asmk"])
    q = get_method("rsift-asmk", SMALL["rsift-asmk"], query=True)
    train = [gray(scene(200 + i)) for i in range(10)]
    q.set_state(m.fit([m.fit_features(t) for t in train]))
    db = [m.describe(gray(scene(s))) for s in range(5)]
    qs = [q.describe(gray(transformed(scene(s)))) for s in (0, 2)]
    ours = m.similarity(_block(q, qs), _block(m, db), {"params": m.params})
    ivf = inverted_file.IVF.initialize_empty(codebook_size=64, use_idf=False)
    words = np.concatenate([w for w, _ in db])
    bits = np.concatenate([b for _, b in db]).view(np.uint32)  # asmk's packing
    imids = np.concatenate([np.full(len(w), i) for i, (w, _) in enumerate(db)])
    ivf.add(bits, words, imids)
    kern = m._asmk()[1]
    for row, (w, b) in enumerate(qs):
        ranks, scores = ivf.search(b.view(np.uint32), w, topk=None,
                                   similarity_func=lambda *x: kern.similarity(*x, alpha=3.0, similarity_threshold=0.0))
        ref = np.zeros(5)
        ref[ranks] = scores
        np.testing.assert_allclose(ours[row], ref, rtol=1e-4, atol=1e-6)
    assert asmk_kernel is not None


def test_pca_whitening_decorrelates_training_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 8)) @ rng.normal(size=(8, 8)) + 3.0
    st = fit_pca_whitening(x, 8, shrink=0.0)
    z = (x - st["pca_mean"]) @ st["pca_proj"]
    np.testing.assert_allclose(np.cov(z.T), np.eye(8), atol=1e-3)
    y = apply_pca_whitening(x[:5], st)
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), 1.0, rtol=1e-5)
    assert fit_pca_whitening(x[:5], 8)["pca_proj"].shape == (8, 4)  # capped by the sample


def test_unknown_method_and_parameter_are_user_errors():
    with pytest.raises(UserError, match="unknown method"):
        get_method("nope")
    with pytest.raises(UserError, match="unknown parameter"):
        get_method("cnn-gem", {"codebook_size": 3})
    with pytest.raises(UserError, match="codebook missing"):
        get_method("rsift-asmk").describe(gray(scene(1)))


def test_whitening_is_skipped_on_too_small_a_sample():
    m = get_method("cnn-gem", {"whiten_dim": 8})
    rng = np.random.default_rng(1)
    assert m.fit([rng.normal(size=(1, 1280)) for _ in range(10)]) == {}
    assert m.fit([rng.normal(size=(1, 1280)) for _ in range(16)])["pca_proj"].shape == (1280, 8)


# ---- cnn-gem's backbone on ONNX Runtime (backend onnx, the default) -----------------------

def _bench_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("describe_bench", ROOT / "benchmarks" / "describe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def micro_world(tmp_path_factory):
    from mining.stages.demo.stage import run_build

    out = tmp_path_factory.mktemp("micro-world")
    run_build(out=out, options=replace(options.defaults("demo"), preset="micro"), workers=1)
    return out


def test_onnx_backend_matches_torch_at_every_demo_image_size(micro_world):
    """Candidates, database images and query crops of a demo world, decoded as the stage
    does: the default (ONNX Runtime) descriptor is the torch one's within cosine 0.9999 at
    every size there is (TF "same" padding depends on each size's parity)."""
    got = _bench_module().backend_agreement(micro_world, per_size=1)
    assert got["sizes"] >= 4, got  # 768x576, smaller photos, query crops of several sizes
    assert got["min_cosine"] >= 0.9999, got


def test_onnx_backend_is_exported_once_verified_and_recorded():
    from mining.methods import efficientnet_lite_onnx
    from mining.methods.efficientnet_lite import short_sha256

    m = get_method("cnn-gem", {"whiten": False})
    path = efficientnet_lite_onnx.ensure_model()
    assert m.params["backend"] == "onnx" and m.params["onnx_sha256"] == short_sha256(str(path))
    assert path.parent == efficientnet_lite_onnx.cache_dir() and path.name.endswith(f"-v{efficientnet_lite_onnx.EXPORT_VERSION}.onnx")
    img = scene(3)
    a, b = m.describe(img), get_method("cnn-gem", {"whiten": False}).describe(img)
    assert a.dtype == np.float32 and a.shape == (1280,) and a.tobytes() == b.tobytes()  # deterministic
    with pytest.raises(UserError, match="onnx_sha256=0000 but this machine's export"):
        get_method("cnn-gem", {"onnx_sha256": "0000"})


def test_the_onnx_file_does_not_depend_on_where_the_package_is_installed():
    # the exporter records each node's stack trace (absolute paths) and module names; kept, the
    # file and the onnx_sha256 in every cnn-gem store would change with the install's folder
    import onnx

    import mining
    from mining.methods import efficientnet_lite_onnx

    path = efficientnet_lite_onnx.ensure_model()
    model = onnx.load(str(path))
    assert [h for h in (model, model.graph, *model.graph.node) if len(h.metadata_props) or h.doc_string] == []
    data = path.read_bytes()
    assert str(Path(mining.__file__).parent).encode() not in data and b"stack_trace" not in data


def test_reading_the_rules_does_not_import_torch():
    """The Snakefile groups the methods (`shared_groups`, which builds each one) while the rules
    are read: in every dry run and in each SLURM job. With the model cached, that imports no
    torch (~2.5 s of CPU per parse; the cache file's name takes torch's version from its metadata)."""
    from mining.methods import efficientnet_lite_onnx

    efficientnet_lite_onnx.ensure_model()  # exported once per session, then cached
    code = ("import sys; from mining.methods import shared_groups; "
            "print(shared_groups(['cnn-gem', 'rsift-asmk', 'rsift-vlad']), 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["[['cnn-gem'],", "['rsift-asmk',", "'rsift-vlad']]", "False"], r.stdout


def test_an_onnx_model_off_tolerance_is_refused_and_not_cached(tmp_path, monkeypatch):
    """A model that differs from torch beyond tolerance at some size fails loudly, and no file
    is left under the cache's final name (the next run exports and checks again)."""
    import shutil

    from mining.methods import efficientnet_lite_onnx

    good = efficientnet_lite_onnx.ensure_model()
    monkeypatch.setenv("MINING_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(efficientnet_lite_onnx, "export", lambda p, variant: shutil.copyfile(good, p))
    monkeypatch.setattr(efficientnet_lite_onnx, "TOLERANCE", 1e-9)
    with pytest.raises(UserError, match=r"ONNX export differs from the torch backbone at [0-9]+x[0-9]+ .*use backend=torch"):
        efficientnet_lite_onnx.ensure_model()
    assert not list(tmp_path.glob("*.onnx")) and not list(tmp_path.glob("*.tmp"))
    monkeypatch.setattr(efficientnet_lite_onnx, "TOLERANCE", 1e-3)
    assert efficientnet_lite_onnx.ensure_model().read_bytes() == good.read_bytes()


def test_backend_domain_and_model_file_rules(tmp_path):
    with pytest.raises(UserError, match=r"backend='tf' is not allowed \(backend must be onnx or torch\)"):
        get_method("cnn-gem", {"backend": "tf"})
    with pytest.raises(UserError, match="onnx_sha256 is only for backend=onnx"):
        get_method("cnn-gem", {"backend": "torch", "onnx_sha256": "ab"})
    import torch

    model = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(torch.nn.Conv2d(3, 8, 3)), str(model))
    m = get_method("cnn-gem", {"model_file": str(model), "whiten": False})
    assert m.params["backend"] == "torch" and m.params["onnx_sha256"] is None and m.describe(scene(1)).shape == (8,)
    with pytest.raises(UserError, match="backend=onnx runs the built-in backbone only"):
        get_method("cnn-gem", {"model_file": str(model), "backend": "onnx"})
