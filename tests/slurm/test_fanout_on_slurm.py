"""Download and describe with their Dask fan-out on the real SLURM cluster (tests/slurm/conftest.py):
`dask: {cluster: slurm}` (dask-jobqueue workers are SLURM jobs, their partition given by
DASK_JOBQUEUE__SLURM__QUEUE) and `dask: {cluster: scheduler}` (a real `dask scheduler`, `dask
worker`s started as SLURM jobs from another folder); outputs equal the local run's; the stage's
own SLURM workers are cancelled when it ends, also when it fails, and a scheduler's workers it
joined are left running."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from slurmcluster import PARTITION, Cluster
from snakerun import DEMO_MANIFEST, assert_same_outputs, failure_text, snakemake, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# ---------------------------------------------------------------- Dask fan-out on the cluster
FANOUT_METHOD = "rsift-vlad"


def _fanout_workdir(demo_run: Path, tmp_path: Path, dask: dict) -> tuple[Path, Path]:
    """A run folder holding the local run's results up to the candidates, and a manifest with `dask`."""
    work = tmp_path / "fanout"
    for sub in ("world", "landmarks", "metadata", "candidates"):  # everything upstream of download
        if (demo_run / "results/demo" / sub).is_dir():
            shutil.copytree(demo_run / "results/demo" / sub, work / "results/demo" / sub)
    m = yaml.safe_load(DEMO_MANIFEST.read_text())
    m["dask"] = dask
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(m))
    return work, manifest


def _fanout_run(work: Path, manifest: Path, env: dict[str, str]) -> None:
    target = f"results/demo/descriptors/{FANOUT_METHOD}/candidates/store.json"
    r = snakemake(work, "--cores", "2", target, manifest=manifest, env=env, timeout=1200)
    assert r.returncode == 0, failure_text(r, work / "results/demo")
    ran = set(re.findall(r"^(?:local)?rule (\w+):", r.stdout + r.stderr, re.M))
    # geofilter reruns too: the manifest is its input, and this one is new; rsift-vlad is
    # described with rsift-asmk in one job (one shared RootSIFT extraction)
    job = "describe_candidates_shared" if FANOUT_METHOD in ("rsift-asmk", "rsift-vlad") else "describe_candidates"
    assert {"download", job} <= ran <= {"geofilter", "download", job}, ran


def _jobqueue_file(tmp_path: Path) -> Path:
    cfg = tmp_path / "dask-jobqueue.yaml"
    # workflows/profiles/slurm/dask-jobqueue.yaml sized for this 2-core machine
    cfg.write_text(yaml.safe_dump({"jobs": 2, "cores": 1, "processes": 1, "memory": "2GB",
                                   "walltime": "00:30:00", "local_directory": str(tmp_path / "dask-tmp"),
                                   "log_directory": str(tmp_path / "dask-logs")}))
    return cfg


def _dask_jobs(cluster: Cluster, before: set[str]) -> list[dict[str, str]]:
    return [j for j in cluster.jobs() if j["id"] not in before and j["name"] == "dask-worker"]


def test_fan_out_on_dask_jobqueue_workers_that_are_slurm_jobs(slurm, slurm_env, demo_run, tmp_path):
    before = {j["id"] for j in slurm.jobs()}
    work, manifest = _fanout_workdir(demo_run, tmp_path, {"cluster": "slurm", "slurm": str(_jobqueue_file(tmp_path))})
    _fanout_run(work, manifest, slurm_env)
    workers = _dask_jobs(slurm, before)
    # download and describe each started 2 worker jobs, and cancelled them when they ended
    assert len(workers) == 4, workers
    assert not [j for j in slurm.queue() if j["name"] == "dask-worker"], slurm.queue()
    assert {j["partition"] for j in workers} == {PARTITION}
    assert_same_outputs(demo_run, work, ("images", f"descriptors/{FANOUT_METHOD}/candidates"))


def test_failed_stage_cancels_its_slurm_workers(slurm, slurm_env, demo_run, tmp_path):
    before = {j["id"] for j in slurm.jobs()}
    out = tmp_path / "store"
    (out / "shards").parent.mkdir(parents=True)
    (out / "shards").write_text("not a folder: every shard task fails when it writes here")
    cmd = [str(Path(sys.executable).parent / "mining"), "describe", "--method", FANOUT_METHOD,
           "--images", str(demo_run / "results/demo/images"), "--set", "candidates", "--out", str(out),
           "--shard-size", "100", "--slurm", str(_jobqueue_file(tmp_path))]
    r = subprocess.run(cmd, capture_output=True, text=True, env=slurm_env, timeout=900)
    assert r.returncode != 0, r.stdout[-2000:] + r.stderr[-2000:]
    workers = _dask_jobs(slurm, before)
    assert workers, "the stage failed before it started its SLURM workers: nothing tested"
    wait_for(lambda: not [j for j in slurm.queue() if j["name"] == "dask-worker"], 60, what="workers cancelled")
    assert all(j["state"] != "RUNNING" for j in _dask_jobs(slurm, before))


def test_fan_out_on_a_running_dask_scheduler_with_workers_as_slurm_jobs(slurm, slurm_env, demo_run, tmp_path):
    dask_bin = str(Path(sys.executable).parent / "dask")
    sched_file = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen([dask_bin, "scheduler", "--host", "127.0.0.1", "--port", "0",
                                  "--no-dashboard", "--scheduler-file", str(sched_file)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    worker_ids: list[str] = []
    try:
        wait_for(sched_file.exists, 60, scheduler, "the scheduler file")
        address = json.loads(sched_file.read_text())["address"]
        elsewhere = tmp_path / "elsewhere"  # the workers' folder is not the run folder
        elsewhere.mkdir()
        for _ in range(2):
            r = slurm.run("sbatch", "--parsable", "-p", PARTITION, "-c", "1", "--mem", "2000", "-J", "dask-worker-ext",
                          "-D", str(elsewhere),
                          "-o", str(tmp_path / "worker-%j.log"),
                          "--wrap", f"{dask_bin} worker {address} --nthreads 1 --no-nanny --no-dashboard --death-timeout 30")
            worker_ids.append(r.stdout.strip())
        from distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=120)
        work, manifest = _fanout_workdir(demo_run, tmp_path, {"cluster": "scheduler", "scheduler": address})
        _fanout_run(work, manifest, slurm_env)
        # the stages joined the scheduler and left its workers running: they are not theirs
        running = {j["id"] for j in slurm.queue() if j["state"] == "RUNNING"}
        assert set(worker_ids) <= running
        assert_same_outputs(demo_run, work, ("images", f"descriptors/{FANOUT_METHOD}/candidates"))
    finally:
        for job in worker_ids:
            slurm.run("scancel", job, check=False)
        # the workers leave before their scheduler does (one left without it outlived the
        # session, waiting for it; --death-timeout ends such a one)
        deadline = time.monotonic() + 60
        while set(worker_ids) & {j["id"] for j in slurm.queue()} and time.monotonic() < deadline:
            time.sleep(0.5)
        os.killpg(scheduler.pid, signal.SIGTERM)
        scheduler.wait(timeout=30)
