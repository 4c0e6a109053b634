"""mining/pins.py and requirements.lock: the SIMD level every library is pinned to before it loads,
the refusal of a process that is not at it, and a lock that covers every dependency."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from packaging.requirements import Requirement

from mining import pins

from paths import ROOT

AVX512 = "avx512f" in pins.cpu_flags()


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in pins.VARIABLES and k != pins.ENV_SWITCH}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120, check=False)


_REPORT = ("import json, os, mining, cv2, numpy; from mining import pins; "
           "print(json.dumps({'env': {v: os.environ.get(v) for v in sorted(pins.VARIABLES)}, "
           "'cv2': cv2.getCPUFeaturesLine(), 'problems': pins.problems()}))")


def test_importing_mining_pins_every_library_before_it_loads():
    r = _python(_REPORT)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["problems"] == []
    assert got["env"]["OPENCV_IPP"] == "disabled" and got["env"]["OPENBLAS_CORETYPE"] == "Haswell"
    assert got["env"]["NUMBA_CPU_NAME"] == "haswell" and got["env"]["FAISS_OPT_LEVEL"] == "avx2"
    on = [f.lstrip("*") for f in got["cv2"].split() if not f.endswith("?")]
    assert "AVX2" in on and not [f for f in on if f.startswith("AVX512")]
    assert "IPP" not in r.stderr  # OpenCV's warning that IPP is off is not printed


def test_a_users_own_disables_are_kept_and_joined():
    r = _python(_REPORT, {"OPENCV_CPU_DISABLE": "SSE4.2", "NPY_DISABLE_CPU_FEATURES": "AVX512_SPR"})
    got = json.loads(r.stdout)
    assert got["env"]["OPENCV_CPU_DISABLE"].split(",")[0] == "SSE4.2"
    assert got["env"]["NPY_DISABLE_CPU_FEATURES"].split().count("AVX512_SPR") == 1
    assert "X86_V4" in got["env"]["NPY_DISABLE_CPU_FEATURES"]


def test_native_leaves_the_libraries_alone_and_says_so():
    r = _python(_REPORT + "; print(pins.fingerprint()['simd'])", {"MINING_SIMD": "native"})
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.splitlines()[0])
    assert got["env"]["OPENCV_IPP"] is None and got["env"]["NUMBA_CPU_NAME"] is None
    assert r.stdout.splitlines()[1] == "native"


@pytest.mark.skipif(not AVX512, reason="only a CPU with AVX-512 can load numpy above the pinned level")
def test_numpy_loaded_before_mining_is_found():
    r = _python("import numpy, cv2, mining; from mining import pins; pins.check('probe')")
    assert r.returncode != 0
    assert "numpy was loaded before mining pinned it" in r.stderr and "OpenCV was loaded before" in r.stderr


def test_a_level_below_the_pin_is_refused_by_the_cli_in_one_line(tmp_path):
    """AVX2 switched off in OpenCV and numpy, as on a CPU without it: the stage refuses before any
    work, naming the level and the way out."""
    env = {"OPENCV_CPU_DISABLE": "AVX2", "NPY_DISABLE_CPU_FEATURES": "X86_V3"}
    r = _python("import sys; from mining.cli import main; import cv2, numpy; "
                f"sys.exit(main(['geofilter', '--metadata', {str(tmp_path)!r}, '--manifest', 'manifests/demo.yaml', "
                f"'--out', {str(tmp_path / 'o')!r}]))",
                env)
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "pinned SIMD level x86-64-v3" in lines[0], r.stderr
    assert "OpenCV does not run AVX2" in lines[0] and "MINING_SIMD=native" in lines[0]
    assert not (tmp_path / "o").exists()


def test_exports_are_shell_lines_for_workers_started_elsewhere():
    lines = pins.exports()
    assert {line.split("=", 1)[0].removeprefix("export ") for line in lines} >= {"OPENCV_IPP", "NUMBA_CPU_NAME"}
    r = subprocess.run(["bash", "-c", "\n".join(lines) + "\necho \"$NPY_DISABLE_CPU_FEATURES\""],
                       capture_output=True, text=True, check=True)
    assert r.stdout.strip() == os.environ["NPY_DISABLE_CPU_FEATURES"]


# ---- the lock --------------------------------------------------------------------------------
def _locked() -> dict[str, tuple[str, str]]:
    """name -> (version, the entry's text) of every pin in requirements.lock."""
    text = (ROOT / "requirements.lock").read_text()
    out = {}
    for entry in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", entry)
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = (m.group(2), entry)
    return out


def test_the_lock_pins_every_dependency_of_the_package_and_the_tests_with_hashes():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    locked = _locked()
    for spec in project["dependencies"] + project["optional-dependencies"]["dev"]:
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        assert name in locked, f"{req.name} is not in requirements.lock: run `make lock`"
        version, entry = locked[name]
        assert req.specifier.contains(version, prereleases=True), \
            f"requirements.lock has {req.name}=={version}, pyproject.toml asks {req.specifier}: run `make lock`"
    assert all("--hash=sha256:" in entry for _, entry in locked.values())
    assert {"numpy", "opencv-python-headless", "onnxruntime", "faiss-cpu", "torch"} <= set(locked)


def test_this_environment_is_the_locked_one_and_the_fingerprint_says_so():
    fp = pins.fingerprint()
    assert fp["environment"] == "matches", fp
    assert fp["lock_sha256"] == __import__("hashlib").sha256((ROOT / "requirements.lock").read_bytes()).hexdigest()
    assert fp["simd"] == pins.LEVEL


def test_setup_installs_from_the_lock_and_nothing_else():
    make = (ROOT / "Makefile").read_text()
    setup = make.split("$(BIN)/mining:", 1)[1].split("\n\n", 1)[0]
    assert "--require-hashes --no-deps -r requirements.lock" in setup
    assert all("--no-deps" in line for line in setup.splitlines() if "pip install" in line)
    assert "requirements.lock" in setup.splitlines()[0]  # a new lock rebuilds the venv
