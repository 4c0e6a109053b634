"""A site without SLURM accounting (no slurmdbd): `sacct` fails there ("Slurm accounting
storage is disabled", exit 1), so the plugin must be told `--slurm-status-command squeue`
(README, SLURM). The micro demo's first stages (the world, the landmark check, ingest,
geofilter, the download: five sbatch jobs one after another, each followed by squeue to its
end) run that way; the whole demo on SLURM, with sacct, is test_demo_on_slurm.py (the status
command is the only difference between the two).

The session's cluster has accounting (the other tests need sacct), so the workflow is given
an `sacct` that fails exactly as the real one does on a cluster without it (checked by hand
on `slurmcluster.py start --no-accounting`: same message, exit 1); everything else is the
real cluster. The controller's own record (real sacct, outside the workflow's PATH) then
says which jobs ran.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import yaml

from slurmcluster import PARTITION
from slurmrun import SLURM_ARGS, completed_per_rule, expected_jobs, job_rules
from snakerun import DEMO_MANIFEST, snakemake_cmd

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

UNTIL = ["download"]  # the first stages, to the end of the first Dask fan-out


def test_micro_demo_first_stages_with_squeue_status_where_sacct_is_disabled(slurm, slurm_env, tmp_path):
    m = yaml.safe_load(DEMO_MANIFEST.read_text())
    m["demo"]["preset"] = "micro"
    manifest = tmp_path / "micro.yaml"
    manifest.write_text(yaml.safe_dump(m))
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "sacct-calls.txt"
    (fake / "sacct").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n'
                                'echo "Slurm accounting storage is disabled" >&2\nexit 1\n')
    (fake / "sacct").chmod(0o755)
    env = dict(slurm_env, PATH=f"{fake}:{slurm_env['PATH']}")
    expected = expected_jobs(tmp_path / "plan", manifest, *UNTIL)
    before = {j["id"] for j in slurm.jobs()}
    work = tmp_path / "run"
    work.mkdir()
    t0 = time.monotonic()
    r = subprocess.run(snakemake_cmd(work, *SLURM_ARGS, "--slurm-status-command", "squeue", "--until", *UNTIL, manifest=manifest),
                       capture_output=True, text=True, env=env, timeout=1500)
    minutes = (time.monotonic() - t0) / 60
    assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
    root = work / "results/demo"
    assert json.loads((root / "candidates/stats.json").read_text())["rows_out"] > 0
    assert list((root / "images/jpg").rglob("*.jpg")) and not (root / "scores").exists()
    jobs = job_rules(slurm, before)
    assert set(expected) == {"demo_world", "landmarks_check", "ingest", "geofilter", "download"}, expected
    assert completed_per_rule(jobs) == expected, (jobs, expected)
    assert all(state == "COMPLETED" for _, state in jobs), jobs
    assert {j["partition"] for j in slurm.jobs() if j["id"] not in before} == {PARTITION}
    # the disabled sacct was really in the way: the plugin asked it (for a default account)
    # and carried on without it
    assert calls.is_file() and calls.read_text().strip(), "the workflow never called sacct: nothing was emulated"
    print(f"\nmicro demo's first stages on SLURM, squeue status, sacct disabled: {minutes:.1f} min, {len(jobs)} sbatch jobs, "
          f"{len(calls.read_text().splitlines())} sacct calls refused")
