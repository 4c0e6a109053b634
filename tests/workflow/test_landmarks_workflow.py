"""`mining landmarks check` runs before anything else: a broken landmark file stops the workflow
in its first rule, naming the query and the key, before ingest has read a single row."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import yaml

from paths import ROOT as REPO


def _manifest(tmp_path: Path, gnd: Path) -> Path:
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    del m["demo"]
    metadata = tmp_path / "yfcc100m_dataset"
    metadata.write_text("")
    m.update(name="city", results=str(tmp_path / "results"), metadata=[str(metadata)], landmarks=str(gnd),
             review={"mode": "human"})
    path = tmp_path / "city.yaml"
    path.write_text(yaml.safe_dump(m))
    return path


def _gnd(folder: Path, easy: list[int]) -> Path:
    folder.mkdir(parents=True)
    (folder / "jpg").mkdir()
    from PIL import Image

    for name in ("a", "b", "tower_001", "tower_002"):
        Image.new("RGB", (20, 20)).save(folder / "jpg" / f"{name}.jpg")
    path = folder / "gnd_city.pkl"
    path.write_bytes(pickle.dumps({"imlist": ["a", "b"], "qimlist": ["tower_001", "tower_002"], "gnd": [
        {"bbx": [0, 0, 10, 10], "easy": [0, 1], "hard": [], "junk": []},
        {"bbx": [0, 0, 10, 10], "easy": easy, "hard": [], "junk": []}]}))
    return path


def _run(tmp_path: Path, manifest: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
           "--cores", "1", "--config", f"manifest={manifest}", "--", str(tmp_path / "results" / "metadata" / "stats.json")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ))


def test_broken_landmarks_stop_the_workflow_first(tmp_path):
    gnd = _gnd(tmp_path / "lm", easy=[0, -1])
    r = _run(tmp_path, _manifest(tmp_path, gnd))
    assert r.returncode != 0
    results = tmp_path / "results"
    log = (results / "logs" / "landmarks_check.log").read_text()
    assert "query 'tower_002' (#1): gnd.easy holds index -1" in log and str(gnd) in log
    assert "landmarks_check" in r.stdout + r.stderr
    assert not (results / "metadata").exists() and not (results / "landmarks" / "landmarks.json").exists()


def test_a_good_landmark_file_is_checked_then_ingest_runs(tmp_path):
    gnd = _gnd(tmp_path / "lm", easy=[1, 0])
    r = _run(tmp_path, _manifest(tmp_path, gnd))
    results = tmp_path / "results"
    import json

    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    got = json.loads((results / "landmarks" / "landmarks.json").read_text())
    assert got["landmarks"] == [{"name": "tower", "queries": ["tower_001", "tower_002"]}] and got["problems"] == []
    assert (results / "metadata" / "stats.json").is_file()
