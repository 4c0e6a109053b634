"""The workflow and its Dask fan-out on a real single-node SLURM cluster (slurmctld, slurmd,
slurmdbd + MariaDB, munge; started once for the session by tests/slurm/slurmcluster.py).

- the tiny demo through the README's SLURM command: every rule is an sbatch job (sacct), the
  processes of one describe job are killed mid-stage (the job ends FAILED) and the retry
  resumes, outputs equal the local run's;
- the Dask fan-out on the same cluster: test_fanout_on_slurm.py.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from slurmcluster import PARTITION, Cluster
from slurmrun import SLURM_ARGS, completed_per_rule, expected_jobs, job_rules
from snakerun import DEMO_MANIFEST, assert_same_outputs, snakemake_cmd, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

KILLED_METHOD = "cnn-gem"  # the slowest describe: the one killed mid-stage


# ---------------------------------------------------------------- the demo through SLURM
def _kill_a_running_describe_job(cluster: Cluster, shards: Path, proc: subprocess.Popen, result: dict) -> None:
    """A lost job: once the describe job of KILLED_METHOD has written a shard, SIGKILL its
    processes on the node (as the OOM killer or a crashing node would: the job ends FAILED)."""
    try:
        wait_for(lambda: any(shards.glob("*.ids.parquet")), 3000, proc, f"a {KILLED_METHOD} shard")
        for job in cluster.queue():
            comment = cluster.run("squeue", "-h", "-j", job["id"], "-o", "%k", check=False).stdout.strip()
            # that method's job, not another whose name it begins (cnn-gem-lite2, the held-out one)
            if job["state"] == "RUNNING" and re.search(rf"describe_candidates\w*_{re.escape(KILLED_METHOD)}(?![\w-])",
                                                       comment):
                result["kept"] = {p.name: p.stat().st_mtime_ns for p in shards.glob("*.ids.parquet")}
                result["killed"] = cluster.kill_job_processes(job["id"])
                result["job"] = job["id"]
                return
        result["error"] = f"no running {KILLED_METHOD} describe job: {cluster.queue()}"
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        result["error"] = repr(exc)


def test_demo_on_slurm_every_rule_is_a_job_a_lost_job_resumes_outputs_equal_local(slurm, slurm_env, request, tmp_path):
    work = tmp_path / "slurm-run"
    work.mkdir()
    expected = expected_jobs(tmp_path / "plan", DEMO_MANIFEST)
    before = {j["id"] for j in slurm.jobs()}
    log = open(tmp_path / "snakemake.log", "w")
    t0 = time.monotonic()
    proc = subprocess.Popen(snakemake_cmd(work, *SLURM_ARGS, manifest=DEMO_MANIFEST), stdout=log,
                            stderr=subprocess.STDOUT, env=slurm_env, start_new_session=True)
    shards = work / "results/demo/descriptors" / KILLED_METHOD / "candidates/shards"
    killed: dict = {}
    watcher = threading.Thread(target=_kill_a_running_describe_job, args=(slurm, shards, proc, killed))
    watcher.start()
    try:
        # The SLURM run mostly waits (for sbatch, the controller, status checks): the local
        # run it is compared with runs meanwhile, if this session has not made it yet.
        demo_run = request.getfixturevalue("demo_run")
        rc = proc.wait(timeout=1800)
    finally:
        if proc.poll() is None:  # the plugin may ignore SIGTERM while it waits for sacct
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        watcher.join()
        log.close()
    minutes = (time.monotonic() - t0) / 60
    output = (tmp_path / "snakemake.log").read_text()
    assert rc == 0, output[-5000:]
    assert "job" in killed and killed["killed"] > 0, killed
    root = work / "results/demo"
    assert (root / "report.html").is_file() and (root / "selected/distractors.txt").is_file()

    # Every rule ran as an sbatch job in partition testq: the controller recorded each once
    # (the killed describe job twice: FAILED, then completed by the retry).
    jobs = job_rules(slurm, before)
    assert completed_per_rule(jobs) == expected, (jobs, expected)
    failed = [name for name, state in jobs if state != "COMPLETED"]
    assert failed == [f"describe_candidates_wildcards_{KILLED_METHOD}"], jobs
    assert [j["state"] for j in slurm.jobs() if j["id"] == killed["job"]] == ["FAILED"]
    assert {j["partition"] for j in slurm.jobs() if j["id"] not in before} == {PARTITION}

    # The retry resumed: shards finished before the kill were kept, not redone.
    for name, mtime in killed["kept"].items():
        assert (shards / name).stat().st_mtime_ns == mtime, name
    assert_same_outputs(demo_run, work)
    print(f"\nSLURM demo run: {minutes:.1f} min, {len(jobs)} sbatch jobs")
