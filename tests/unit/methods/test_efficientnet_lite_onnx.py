"""cnn-gem on ONNX Runtime: one session for every image size, and a describe path without torch.

The graph's stride-2 convolutions pad SAME_UPPER (TF "same", from the input's size at run
time); the resize, normalisation and GeM are numpy (`mining.methods.onnx_run`), torch's
written out. Every check is against torch itself."""

from __future__ import annotations

import math
import subprocess
import sys

import cv2
import numpy as np

from fixtures.flickr_sizes import MIX, photo
from mining.photos import imageindex
from mining.settings import layout
from mining.methods import get_method
from mining.methods import efficientnet_lite_onnx
from mining.methods.onnx_run import gem, rescale, resize, to_input

from paths import ROOT


def _parities(n: int) -> tuple[int, ...]:
    out = []
    for _ in range(5):  # EfficientNet-Lite0's 5 stride-2 levels
        out.append(n % 2)
        n = math.ceil(n / 2)
    return tuple(out)


def test_the_verified_sizes_cover_every_parity_pattern_of_each_side_in_both_orientations():
    land = [(h, w) for h, w in efficientnet_lite_onnx.PARITY_SIZES if w > h]
    port = [(h, w) for h, w in efficientnet_lite_onnx.PARITY_SIZES if h > w]
    for sizes in (land, port):
        for side in (0, 1):
            assert len({_parities(s[side]) for s in sizes}) == 32
    assert set(efficientnet_lite_onnx.PARITY_SIZES) <= set(efficientnet_lite_onnx.VERIFY_SIZES)


def test_one_session_matches_the_torch_backbone_at_every_parity_pattern():
    """GeM of the ONNX feature map against torch's, cosine >= 0.99999, at each of the 64
    sizes (every parity pattern of each side at every stride-2 level, landscape and
    portrait), all through ONE session (the Flickr mix's sizes: the next test)."""
    import torch

    from mining.methods.efficientnet_lite import build_lite

    net = build_lite()
    runner = efficientnet_lite_onnx.backbone("cpu")
    rng = np.random.default_rng(0)
    worst = 1.0
    for hw in efficientnet_lite_onnx.PARITY_SIZES:
        x = rng.uniform(-1, 1, (1, 3, *hw)).astype(np.float32)
        with torch.inference_mode():
            ref = gem(net(torch.from_numpy(x)).numpy(), 3.0)
        got = gem(runner.features(x), 3.0)
        worst = min(worst, float(got @ ref / np.linalg.norm(got) / np.linalg.norm(ref)))
    assert worst >= 0.99999, worst
    assert efficientnet_lite_onnx.backbone("cpu").session is runner.session  # the same session, every size


def test_numpy_resize_normalisation_and_gem_are_torchs():
    import torch
    from torch.nn import functional as F

    rng = np.random.default_rng(1)
    for h, w in [(576, 768), (768, 512), (683, 1024), (33, 47)]:
        x = rng.uniform(-1, 1, (1, 3, h, w)).astype(np.float32)
        for s in (1 / math.sqrt(2), 0.5, 0.3, 1.5):
            ref = F.interpolate(torch.from_numpy(x), scale_factor=s, mode="bilinear", align_corners=False,
                                antialias=True).numpy()
            got = rescale(x, s)
            assert got.shape == ref.shape and np.abs(got - ref).max() < 1e-6, (h, w, s)
        ref = F.interpolate(torch.from_numpy(x), size=(224, 224), mode="bilinear", align_corners=False,
                            antialias=True).numpy()
        assert np.abs(resize(x, 224, 224) - ref).max() < 1e-6
    img = rng.integers(0, 256, (57, 75, 3), dtype=np.uint8)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    xt = torch.from_numpy(img.copy()).permute(2, 0, 1).unsqueeze(0).float().div_(255.0)
    xt = (xt - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    assert np.array_equal(to_input(img, mean, std), xt.numpy())  # the same bits
    assert np.array_equal(to_input(img, mean, std, bgr=True), to_input(img[:, :, ::-1].copy(), mean, std))
    f = rng.uniform(-1, 6, (1, 64, 5, 7)).astype(np.float32)
    for p in (3.0, 2.5):
        ref = torch.from_numpy(f).clamp(min=1e-6).pow(p).mean((2, 3)).pow(1 / p).numpy()[0]
        assert np.abs(gem(f, p) - ref).max() < 1e-5


def test_onnx_descriptors_are_the_torch_backends_on_the_flickr_mix():
    """cnn-gem's default (ONNX Runtime, numpy pre- and post-processing) against backend torch
    on photos of every shape of the Flickr mix, as the stage decodes them (768 px long side)."""
    onnx_m, torch_m = (get_method("cnn-gem", {"whiten": False, "backend": b}) for b in ("onnx", "torch"))
    for i, (w, h, _) in enumerate(MIX):
        s = 768 / max(w, h)
        img = photo(i, round(w * s), round(h * s))
        assert float(onnx_m.describe(img) @ torch_m.describe(img)) >= 0.99999, (w, h)


def test_describing_with_the_onnx_backend_imports_no_torch(tmp_path):
    """`mining describe --method cnn-gem` in one process, the model cached: torch is never
    imported (its import alone is ~2.5 CPU s per process)."""
    efficientnet_lite_onnx.ensure_model()
    images = tmp_path / "images"
    for pid, (w, h) in enumerate([(96, 72), (72, 96), (90, 61)], start=1):
        p = images / layout.image_relpath(pid)
        p.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(p), photo(pid, w, h))
    imageindex.write(images, [{"photo_id": pid, "status": "ok", "path": layout.image_relpath(pid)} for pid in (1, 2, 3)])
    code = ("import sys; from mining.cli import main; "
            f"rc = main(['describe', '--method', 'cnn-gem', '--images', {str(images)!r}, '--set', 'candidates', "
            f"'--out', {str(tmp_path / 'store')!r}, '--workers', '0', '--param', 'whiten=false', '--no-progress']); "
            "print(rc, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-2:] == ["0", "False"], r.stdout
    assert '"count": 3' in r.stdout


def test_the_cached_file_pads_same_upper_and_is_conv_clip_add_only():
    import onnx

    model = onnx.load(str(efficientnet_lite_onnx.ensure_model()))
    stride2 = efficientnet_lite_onnx._stride2(model)
    assert len(stride2) == 5
    for node in stride2:
        attrs = {a.name: a for a in node.attribute}
        assert attrs["auto_pad"].s == b"SAME_UPPER" and "pads" not in attrs
    assert {n.op_type for n in model.graph.node} <= {"Conv", "Clip", "Add"}
