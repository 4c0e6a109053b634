"""The real single-node SLURM cluster (tests/slurm/slurmcluster.py), started once for the
session and stopped at its end, and the environment the workflow runs with on it."""

from __future__ import annotations

import pytest

from slurmcluster import PARTITION, Cluster, missing_programs
from snakerun import path_without_venv


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    missing = missing_programs(accounting=True)
    assert not missing, f"Debian packages {missing} missing: `make slurm-deps` installs them (as root)"
    cluster = Cluster(tmp_path_factory.mktemp("slurm-cluster"), accounting=True, cpus=8).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def slurm_env(slurm) -> dict[str, str]:
    # The Dask workers' partition comes from Dask's configuration, not from a file (README).
    return dict(slurm.env(), PATH=path_without_venv(), DASK_JOBQUEUE__SLURM__QUEUE=PARTITION)
