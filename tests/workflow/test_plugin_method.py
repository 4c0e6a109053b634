"""A third-party retrieval method: a tiny plug-in package, installed the way pip
installs one (a package + its .dist-info with a `mining.methods` entry point, on the path),
declares its settings; the manifest's `describe: {params: ...}` and `mining describe --param`
set them; the whole workflow runs on it alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from snakerun import REPO, failure_text, snakemake

PLUGIN = '''
import numpy as np

from mining.methods import Method


class TinyHist(Method):
    """A colour histogram: a global descriptor whose size is a setting (bins per channel)."""

    name = "tiny-hist"
    defaults = {"max_side": 64, "bins": 4}

    def describe(self, image):
        bins = int(self.params["bins"])
        img = image if image.ndim == 3 else np.repeat(image[..., None], 3, axis=2)
        h = np.concatenate([np.histogram(img[..., c], bins=bins, range=(0, 256))[0] for c in range(3)])
        v = h.astype(np.float32)
        return v / max(float(np.linalg.norm(v)), 1e-12)

    def dim(self):
        return 3 * int(self.params["bins"])
'''


def install_plugin(site: Path) -> dict[str, str]:
    """The files `pip install tinyplug` would leave in site-packages; returns the environment
    that puts them on the path."""
    (site / "tinyplug").mkdir(parents=True)
    (site / "tinyplug" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    dist = site / "tinyplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mining.methods]\ntiny-hist = tinyplug:TinyHist\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))


def _mining(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "mining"), *args], capture_output=True, text=True,
                          env=env, timeout=600)


def test_a_plugin_method_is_listed_checked_and_set_from_the_manifest(tmp_path):
    env = install_plugin(tmp_path / "site")
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    m["methods"] = ["tiny-hist"]
    m["evaluate"]["held_out"] = []  # the plug-in alone
    m["describe"]["params"] = {"tiny-hist": {"bins": 6, "colour": 1}}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(m))
    r = snakemake(tmp_path / "w", "-n", "--cores", "1", manifest=bad, env=env)
    assert r.returncode != 0 and "method 'tiny-hist' has no setting 'colour' (it has: bins, max_side)" in r.stdout + r.stderr
    m["describe"]["params"] = {"cnn-gem": {"whiten_dim": 64}}
    bad.write_text(yaml.safe_dump(m))
    r = snakemake(tmp_path / "w", "-n", "--cores", "1", manifest=bad, env=env)
    assert r.returncode != 0 and "settings for 'cnn-gem', which is in neither methods nor evaluate: held_out (tiny-hist)" in r.stdout + r.stderr
    # without the plug-in installed, the manifest names an unknown method
    m["describe"]["params"] = {}
    bad.write_text(yaml.safe_dump(m))
    r = snakemake(tmp_path / "w", "-n", "--cores", "1", manifest=bad)
    assert r.returncode != 0 and "unknown method 'tiny-hist'" in r.stdout + r.stderr


@pytest.mark.slow
def test_the_workflow_runs_on_a_plugin_method_with_settings_from_the_manifest(tmp_path):
    env = install_plugin(tmp_path / "site")
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    m["demo"]["preset"] = "micro"
    m["methods"] = ["tiny-hist"]
    m["evaluate"]["held_out"] = []  # the plug-in alone
    m["describe"]["params"] = {"tiny-hist": {"bins": 6}}
    m["select"]["n"] = 5
    m["score"]["review_top"] = 10
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump(m))
    work = tmp_path / "run"
    r = snakemake(work, "--cores", "2", manifest=manifest, env=env)
    assert r.returncode == 0, failure_text(r, work / "results/demo")
    root = work / "results/demo"
    for s in ("candidates", "queries", "database"):
        info = json.loads((root / f"descriptors/tiny-hist/{s}/store.json").read_text())
        assert info["method"] == "tiny-hist" and info["dim"] == 18, info  # 3 x bins from the manifest
    ev = json.loads((root / "evaluation/evaluation.json").read_text())
    assert list(ev["results"]) == ["tiny-hist"]
    assert (root / "selected/distractors.txt").read_text().count("\n") == 5
    assert (root / "report.html").is_file()

    # the CLI sets the same setting by name, for one method of several too
    images = root / "images"
    out = tmp_path / "cli"
    r = _mining(env, "describe", "--method", "tiny-hist", "--images", str(images), "--set", "candidates",
                "--out", str(out), "--workers", "0", "--param", "tiny-hist:bins=2", "--no-progress")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((out / "store.json").read_text())["dim"] == 6
    r = _mining(env, "describe", "--method", "tiny-hist", "--images", str(images), "--set", "candidates",
                "--out", str(tmp_path / "x"), "--workers", "0", "--param", "bins=[oops")
    assert r.returncode == 2 and "--param 'bins=[oops': VALUE is not a YAML value" in r.stderr
    r = _mining(env, "describe", "--method", "tiny-hist", "--images", str(images), "--set", "candidates",
                "--out", str(tmp_path / "x"), "--workers", "0", "--param", "cnn-gem:whiten_dim=3")
    assert r.returncode == 2 and "cnn-gem is not one of --method (tiny-hist)" in r.stderr
