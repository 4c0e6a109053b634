"""Where fan-out stages run: a Dask LocalCluster, an existing scheduler, or SLURM workers.

One place for "which cluster", so that download and describe (and the workflow's single
`dask.cluster` manifest key) mean the same thing.
"""

from __future__ import annotations

import os
from typing import Any

from mining.errors import UserError


def make_client(scheduler: str | None = None, workers: int | None = None, slurm: str | None = None,
                processes: bool = True) -> tuple[Any, Any]:
    """A Dask client and the cluster it owns (None when attached to an existing scheduler)."""
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            return Client(scheduler, timeout="10s"), None
        except (OSError, TimeoutError) as exc:
            raise UserError(f"cannot reach Dask scheduler {scheduler}: {exc}") from None
    if slurm:
        return _slurm_client(slurm, workers)
    import dask

    n = workers or max(1, min(4, os.cpu_count() or 1))
    # Dask's nanny sets MALLOC_TRIM_THRESHOLD_ in its workers; any explicit value turns off
    # glibc's dynamic mmap threshold, so every large torch/OpenCV buffer is mmap'd and
    # faulted in again: describe workers spent 2-3x their compute time in the kernel
    # (cnn-gem on the tiny world: 166 s vs 55 s in-process). None = leave glibc's default.
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=processes, dashboard_address=":0")
    return Client(cluster), cluster


def _slurm_client(config: str, workers: int | None) -> tuple[Any, Any]:
    """dask-jobqueue SLURMCluster from a YAML of its keyword arguments (+ optional `jobs`)."""
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    from mining.yamlfile import read_yaml

    kwargs, _ = read_yaml(config, "SLURM config")
    kwargs = kwargs or {}
    if not isinstance(kwargs, dict):
        raise UserError(f"SLURM config {config}: expected a mapping of SLURMCluster keyword arguments")
    jobs = int(kwargs.pop("jobs", workers or 1))
    cluster = SLURMCluster(**kwargs)
    cluster.scale(jobs=jobs)
    return Client(cluster), cluster


def dashboard_link(client: Any) -> str | None:
    try:
        return client.dashboard_link
    except Exception:  # no bokeh, or a scheduler without a dashboard
        return None


