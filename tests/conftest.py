"""Fixtures shared by test folders: ONE local run of the tiny demo for the whole session
(tests/workflow checks it; tests/slurm compares the SLURM run and the Dask fan-outs with it).

`make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadfile`): every test
file runs whole on one worker (its module fixtures are made once), and the SLURM tests' files
together on one (one worker starts the one cluster). The demo run and cnn-gem's model cache are made
once for the whole session, whichever worker asks first, under a file lock; the other worker
waits for them. Without xdist (`pytest -n 0`, or a single file) everything works the same."""

from __future__ import annotations

import mining  # noqa: F401 - first: pins every numeric library's SIMD level before one loads (mining/pins.py)

import os
from pathlib import Path

import pytest
from filelock import FileLock

from snakerun import DEMO_MANIFEST, failure_text, snakemake

TESTS = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: `-p no:xdist` has no such hook
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, with the SLURM tests' files as one unit: every test file runs whole on
    one worker (its module fixtures made once), and one worker runs all the SLURM tests (the
    one test cluster). (`--dist loadgroup` with xdist_group marks would say the same, but
    xdist 3.8 cannot group on pytest 9.2: pytest-dev/pytest-xdist#1386.)"""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False  # files in the order below, not largest first

    class FilesAndSlurm(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "tests/slurm" if nodeid.startswith("tests/slurm/") else super()._split_scope(nodeid)

    return FilesAndSlurm(config, log)


def _first(item) -> tuple[int, str]:
    """The SLURM tests first (mostly waiting on the controller, they run beside everything
    else), then the workflow runs (test_workflow.py, which makes the demo run, leading), then
    the rest: on two workers, the long files start first and the short ones fill in."""
    path = Path(str(item.fspath)).resolve().relative_to(TESTS).as_posix()
    if path.startswith("slurm/"):
        return 0, ""
    if path.startswith("workflow/"):
        return 1, "" if path == "workflow/test_workflow.py" else path
    return 2, ""


def pytest_collection_modifyitems(config, items):
    """On xdist workers, the files in the order of `_first` (a stable sort: within a file, and
    among the rest, the collection's order)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_first)


def shared_dir(tmp_path_factory) -> Path:
    """A folder every worker of this session sees (the session's own with a single process)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_per_session(tmp_path_factory, name: str, make) -> Path:
    """`make(folder)` run by the first worker that asks, under a lock; the others get the same
    folder, or the same failure (it is not retried)."""
    root = shared_dir(tmp_path_factory)
    folder, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with FileLock(str(root / f"{name}.lock")):
        if failed.exists():
            pytest.fail(failed.read_text(), pytrace=False)
        if not done.exists():
            folder.mkdir(exist_ok=True)
            try:
                make(folder)
            except BaseException as exc:
                failed.write_text(f"{name} failed in another test: {exc}")
                raise
            done.touch()
    return folder


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """One uninterrupted local run (`snakemake --cores 2`) of the default workflow on the tiny demo world."""

    def make(work: Path) -> None:
        r = snakemake(work, "--cores", "2", manifest=DEMO_MANIFEST)
        assert r.returncode == 0, failure_text(r, work / "results/demo")

    return once_per_session(tmp_path_factory, "demo-run", make)


@pytest.fixture(scope="session", autouse=True)
def model_cache(tmp_path_factory):
    """cnn-gem's ONNX export goes to a folder of this session (not the user's ~/.cache), unless
    MINING_CACHE_DIR is set (then that one is reused: the export takes ~40 s). The workers share
    it: the export takes its own file lock (mining/methods/efficientnet_lite_onnx.py)."""
    if os.environ.get("MINING_CACHE_DIR"):
        yield os.environ["MINING_CACHE_DIR"]
        return
    path = shared_dir(tmp_path_factory) / "model-cache"
    path.mkdir(exist_ok=True)
    os.environ["MINING_CACHE_DIR"] = str(path)
    try:
        yield str(path)
    finally:
        os.environ.pop("MINING_CACHE_DIR", None)
