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
from snakerun import DEMO_MANIFEST, REPO, assert_same_outputs, failure_text, snakemake, snakemake_cmd, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# The README's SLURM command, with the test cluster's partition given on the command line,
# threads capped to this 2-core machine, and the plugin's first status check after 2 s
# instead of 40 (the jobs here take seconds, not hours).
SLURM_ARGS = [
    "--workflow-profile", str(REPO / "workflows" / "profiles" / "slurm"),
    "--default-resources", f"slurm_partition={PARTITION}",
    "--max-threads", "2",
    "--slurm-init-seconds-before-status-checks", "2",
]
KILLED_METHOD = "cnn-gem"  # the slowest describe: the one killed mid-stage


def _job_rules(cluster: Cluster, before: set[str]) -> list[tuple[str, str]]:
    """(rule with wildcards, final state) of every workflow job in the controller's record
    that was not there before (`before`: job ids)."""
    return sorted((j["comment"].removeprefix("rule_"), j["state"]) for j in cluster.jobs()
                  if j["comment"].startswith("rule_") and j["id"] not in before)


def _expected_jobs(workdir: Path) -> dict[str, int]:
    """Jobs per rule that the workflow plans for a fresh run (a dry run's job stats, `all` left out)."""
    r = snakemake(workdir, "-n", "--cores", "2", manifest=DEMO_MANIFEST)
    assert r.returncode == 0, failure_text(r)
    table = r.stdout.split("Job stats:", 1)[1].split("Reasons:", 1)[0]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}
    counts.pop("all", None)
    counts.pop("total", None)
    return counts


# ---------------------------------------------------------------- the demo through SLURM
def _kill_a_running_describe_job(cluster: Cluster, shards: Path, proc: subprocess.Popen, result: dict) -> None:
    """A lost job: once the describe job of KILLED_METHOD has written a shard, SIGKILL its
    processes on the node (as the OOM killer or a crashing node would: the job ends FAILED)."""
    try:
        wait_for(lambda: any(shards.glob("*.ids.parquet")), 3000, proc, f"a {KILLED_METHOD} shard")
        for job in cluster.queue():
            comment = cluster.run("squeue", "-h", "-j", job["id"], "-o", "%k", check=False).stdout.strip()
            if job["state"] == "RUNNING" and "describe_candidates" in comment and KILLED_METHOD in comment:
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
    expected = _expected_jobs(tmp_path / "plan")
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
    jobs = _job_rules(slurm, before)
    completed: dict[str, int] = {}
    for name, state in jobs:
        if state == "COMPLETED":
            rule = name.split("_wildcards_")[0]
            completed[rule] = completed.get(rule, 0) + 1
    assert completed == expected, (jobs, expected)
    failed = [name for name, state in jobs if state != "COMPLETED"]
    assert failed == [f"describe_candidates_wildcards_{KILLED_METHOD}"], jobs
    assert [j["state"] for j in slurm.jobs() if j["id"] == killed["job"]] == ["FAILED"]
    assert {j["partition"] for j in slurm.jobs() if j["id"] not in before} == {PARTITION}

    # The retry resumed: shards finished before the kill were kept, not redone.
    for name, mtime in killed["kept"].items():
        assert (shards / name).stat().st_mtime_ns == mtime, name
    assert_same_outputs(demo_run, work)
    print(f"\nSLURM demo run: {minutes:.1f} min, {len(jobs)} sbatch jobs")
