"""One set on every CPU (mining/pins.py, docs/reproducibility.md).

- The SIMD levels this machine has above the pinned one (AVX-512, AVX-VNNI), switched off in every
  library that has a switch, as on a CPU without them: describe (every shipped method, every image
  set, the learning included), score and select give the demo run's bytes.
- The pinned level itself switched off (AVX2, as on a CPU below x86-64-v3): describe refuses
  before any work, in one line.
- Under QEMU's Haswell model (a real x86-64-v3 CPU without AVX-512, emulated instruction by
  instruction, so ONNX Runtime's kernels, which have no switch, run their AVX2 code too) each
  method describes a photo to the same bytes as natively.
Today's code before the pins fails the first and the last on a CPU with AVX-512.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mining import pins

from paths import ROOT

MANIFEST = ROOT / "manifests" / "demo.yaml"
MINING = str(Path(sys.executable).parent / "mining")
PROBE = ROOT / "tests" / "helpers" / "describe_probe.py"

_FLAGS = pins.cpu_flags()
# what switches off, in each library with a switch, the levels above the pin that this CPU has
# (AVX-512, AVX-VNNI: one run for both, CI time; OpenCV dispatches AVX-VNNI only in its DNN module)
_OFF = [("AVX512-SKX,AVX512-CLX,AVX512-CNL,AVX512-ICL", "X86_V4 AVX512_ICL AVX512_SPR", "avx512f"),
        ("AVX_VNNI", "", "avx_vnni")]
_HAVE = [(cv, npy) for cv, npy, flag in _OFF if flag in _FLAGS]
ABOVE = {"avx512-and-avx-vnni-off": {"OPENCV_CPU_DISABLE": ",".join(cv for cv, _ in _HAVE),
                                     "NPY_DISABLE_CPU_FEATURES": " ".join(n for _, n in _HAVE if n)}} if _HAVE else {}


def _env(extra: dict[str, str]) -> dict[str, str]:
    """The user's environment as a new shell has it (no pins yet: mining sets them) plus `extra`."""
    base = {k: v for k, v in os.environ.items() if k not in pins.VARIABLES and k != pins.ENV_SWITCH}
    return {**base, **extra}


def _mining(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([MINING, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200, check=False)


def _ok(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, r.stderr[-3000:]


def _describe_all(run: Path, out: Path, env: dict[str, str]) -> None:
    """Every method's stores of every image set, as the workflow's describe rules make them."""
    images, gnd = run / "images", run / "world/landmarks/gnd_demo.pkl"
    for methods in ("cnn-gem", "rsift-asmk,rsift-vlad"):
        common = ["--manifest", str(MANIFEST), "--workers", "2", "--no-progress"]
        _ok(_mining(["describe", "--method", methods, "--images", str(images), "--set", "candidates",
                     "--out", str(out / "{method}/candidates"), *common], env, run))
        for image_set in ("queries", "database"):
            _ok(_mining(["describe", "--method", methods, "--images", str(gnd), "--set", image_set,
                         "--model", str(out / "{method}/candidates"), "--out", str(out / f"{{method}}/{image_set}"),
                         "--dask-cluster=local", *common], env, run))


def _payload_files(store: Path) -> dict[str, bytes]:
    """A store's descriptor payloads and learned state (store.json names its own folders)."""
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and (p.parent.name == "shards" or p.name == "model.npz")}


@pytest.mark.slow
@pytest.mark.parametrize("level", sorted(ABOVE))
def test_a_level_above_the_pin_switched_off_gives_the_same_stores_scores_and_set(demo_run, tmp_path, level):
    run = demo_run / "results" / "demo"
    env = _env(ABOVE[level])
    desc = tmp_path / "descriptors"
    _describe_all(run, desc, env)
    # the mining methods' stores (the held-out cnn-gem-lite2 is cnn-gem's code with other weights)
    stores = [p.parent for m in ("cnn-gem", "rsift-asmk", "rsift-vlad") for p in (run / "descriptors" / m).glob("*/store.json")]
    assert len(stores) == 9
    for store in sorted(stores):
        rel = store.relative_to(run / "descriptors")
        mine = _payload_files(desc / rel)
        assert mine and mine == _payload_files(store), f"{rel}: other bytes with {level} off"
    _ok(_mining(["score", "--manifest", str(MANIFEST), "--landmarks", str(run / "world/landmarks/gnd_demo.pkl"),
                 "--descriptors", *[str(desc / m) for m in ("cnn-gem", "rsift-asmk", "rsift-vlad")],
                 "--out", str(tmp_path / "scores"), "--threads", "2",
                 "--near-duplicates", str(run / "neardup/neardup.parquet"),
                 "--candidates", str(run / "candidates/candidates.parquet")], env, run))
    for name in ("scores.parquet", "review_queue.parquet"):
        assert (tmp_path / "scores" / name).read_bytes() == (run / "scores" / name).read_bytes(), name
    _ok(_mining(["select", "--manifest", str(MANIFEST), "--scores", str(tmp_path / "scores"),
                 "--decisions", str(run / "review/decisions.parquet"),
                 "--candidates", str(run / "candidates/candidates.parquet"),
                 "--landmarks", str(run / "world/landmarks/gnd_demo.pkl"),
                 "--near-duplicates", str(run / "neardup/neardup.parquet"),
                 "--leak-risk", str(run / "leakrisk/leakrisk.parquet"), "--images-root", str(run / "images"),
                 "--out", str(tmp_path / "selected")], env, run))
    for name in ("distractors.txt", "distractors.parquet"):
        assert (tmp_path / "selected" / name).read_bytes() == (run / "selected" / name).read_bytes(), name


@pytest.mark.slow
def test_the_pinned_level_switched_off_is_refused_before_any_work(demo_run, tmp_path):
    run = demo_run / "results" / "demo"
    env = _env({"OPENCV_CPU_DISABLE": "AVX2", "NPY_DISABLE_CPU_FEATURES": "X86_V3"})
    r = _mining(["describe", "--method", "rsift-asmk", "--images", str(run / "world/landmarks/gnd_demo.pkl"),
                 "--set", "queries", "--model", str(run / "descriptors/rsift-asmk/candidates"),
                 "--out", str(tmp_path / "q"), "--manifest", str(MANIFEST), "--dask-cluster=local", "--workers", "1",
                 "--no-progress"], env, run)
    assert r.returncode == 2, r.stderr[-3000:]
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "pinned SIMD level x86-64-v3" in errors[0], r.stderr[-3000:]
    assert "does not run" in errors[0] and "Traceback" not in r.stderr  # OpenCV or numpy below x86-64-v3
    assert not list((tmp_path / "q").glob("shards/*.npz"))


@pytest.mark.slow
def test_every_method_describes_a_photo_to_the_same_bytes_on_an_emulated_haswell(demo_run):
    """QEMU's user-mode emulator runs this very Python and its libraries on a Haswell (AVX2, FMA,
    no AVX-512): every library picks its Haswell code, ONNX Runtime's MLAS included. The photo is
    described at 160 px (emulation costs ~500x; the kernels are those of any size)."""
    qemu = shutil.which("qemu-x86_64")
    assert qemu, "qemu-x86_64 is missing: `make cpu-deps` installs Debian's qemu-user"
    run = demo_run / "results" / "demo"
    photo = str(sorted((run / "images" / "jpg").rglob("*.jpg"))[0])
    args = [str(PROBE), str(run / "descriptors"), "160", photo]
    native = subprocess.run([sys.executable, *args], env=_env({}), capture_output=True, text=True, timeout=300)
    assert native.returncode == 0, native.stderr[-3000:]
    emulated = subprocess.run([qemu, "-cpu", "Haswell", sys.executable, *args], env=_env({}), capture_output=True,
                              text=True, timeout=900)
    assert emulated.returncode == 0, emulated.stderr[-3000:]
    got, want = json.loads(emulated.stdout.splitlines()[-1]), json.loads(native.stdout.splitlines()[-1])
    assert set(want) == {"cnn-gem", "rsift-asmk", "rsift-vlad"}
    assert got == want, "other bytes on a Haswell: " + ", ".join(m for m in want if got.get(m) != want[m])
