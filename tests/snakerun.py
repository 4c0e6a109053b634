"""Running the workflow from tests: one Snakemake command line (tests/workflow, tests/slurm, tests/unit)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
DEMO_MANIFEST = REPO / "manifests" / "demo.yaml"


def path_without_venv() -> str:
    venv_bin = str(Path(sys.executable).parent)
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)


def snakemake_cmd(workdir: Path, *args: str, manifest: Path | None = None) -> list[str]:
    cmd = [*SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir), *args]
    if manifest is not None:
        cmd += ["--config", f"manifest={manifest}"]
    return cmd


def snakemake(workdir: Path, *args: str, manifest: Path | None = None, timeout: int = 1800, env=None, **kw):
    # No virtualenv on PATH, as after `make setup` without activating it: the rules must
    # find `mining` beside Snakemake's own Python.
    env = dict(os.environ if env is None else env, PATH=path_without_venv())
    return subprocess.run(snakemake_cmd(workdir, *args, manifest=manifest), capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


def failure_text(r: subprocess.CompletedProcess, results: Path | None = None) -> str:
    """The end of a failed run's output and of every rule log, for an assertion message."""
    logs = ""
    if results is not None and (results / "logs").exists():
        logs = "".join(f"\n--- {p}\n" + p.read_text()[-1500:] for p in sorted((results / "logs").rglob("*.log")))
    return r.stdout[-4000:] + r.stderr[-4000:] + logs

