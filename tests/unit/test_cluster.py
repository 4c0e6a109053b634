"""Where fan-out stages run: one manifest key, the same meaning for download and describe."""

import pytest
import yaml

from mining.cluster import make_client
from mining.describe import task_runner
from mining.errors import UserError


def _square(x: int) -> int:
    return x * x


def test_joining_an_existing_scheduler_runs_tasks_there():
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        client, owned = make_client(scheduler=cluster.scheduler_address)
        try:
            assert owned is None  # joined, not started
            assert client.submit(_square, 7).result() == 49
        finally:
            client.close()
        # describe's runner uses the same client factory
        with task_runner(0, cluster.scheduler_address) as run:
            assert sorted(run(_square, [(2,), (3,)])) == [4, 9]


def test_unreachable_scheduler_is_a_user_error():
    with pytest.raises(UserError, match="cannot reach"):
        make_client(scheduler="tcp://127.0.0.1:9")


def test_unreadable_slurm_config_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="SLURM config"):
        make_client(slurm=str(tmp_path / "missing.yaml"))


def test_manifest_cluster_choice_needs_its_address(tmp_path):
    from pathlib import Path

    from mining import manifest

    m = yaml.safe_load((Path(__file__).resolve().parents[2] / "manifests" / "demo.yaml").read_text())
    m["dask"] = {"cluster": "slurm"}
    with pytest.raises(UserError, match="slurm"):
        manifest.validate(m, "m.yaml")
    m["dask"] = {"cluster": "slurm", "slurm": "workflows/profiles/slurm/dask-jobqueue.yaml"}
    manifest.validate(m, "m.yaml")
