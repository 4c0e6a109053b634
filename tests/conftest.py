"""Fixtures shared by test folders: ONE local run of the tiny demo for the whole session
(tests/workflow checks it; tests/slurm compares the SLURM run and the Dask fan-outs with it)."""

from __future__ import annotations

import pytest

from snakerun import DEMO_MANIFEST, failure_text, snakemake


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """One uninterrupted local run (`snakemake --cores 2`) of the default workflow on the tiny demo world."""
    work = tmp_path_factory.mktemp("demo-run")
    r = snakemake(work, "--cores", "2", manifest=DEMO_MANIFEST)
    assert r.returncode == 0, failure_text(r, work / "results/demo")
    return work


@pytest.fixture(scope="session", autouse=True)
def model_cache(tmp_path_factory):
    """cnn-gem's ONNX export goes to a folder of this session (not the user's ~/.cache), unless
    MINING_CACHE_DIR is set (then that one is reused: the export takes ~40 s)."""
    import os

    if os.environ.get("MINING_CACHE_DIR"):
        yield os.environ["MINING_CACHE_DIR"]
        return
    path = tmp_path_factory.mktemp("model-cache")
    os.environ["MINING_CACHE_DIR"] = str(path)
    try:
        yield str(path)
    finally:
        os.environ.pop("MINING_CACHE_DIR", None)
