"""Where fan-out stages run: a Dask LocalCluster, an existing scheduler, or SLURM workers.

One place for "which cluster", so that download and describe (and the workflow's single
`dask.cluster` manifest key) mean the same thing; and one way to run a list of tasks there,
`run_tasks`, which returns the results in task order whatever order the workers finish in
(the stages' outputs must not depend on the worker count or on the cluster's timing).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from mining import pins
from mining.errors import UserError
from mining.files.yamlfile import read_yaml


@dataclass(frozen=True)
class Cluster:
    """Where a fan-out stage runs (`connect`): a running scheduler's address, SLURM workers (a
    YAML of SLURMCluster keyword arguments), or else a LocalCluster of `workers` processes
    (threads with `processes=False`)."""

    scheduler: str | None = None
    slurm: str | None = None
    workers: int | None = None
    processes: bool = True


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. a SLURM allocation), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


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

    n = workers or min(4, available_cpus())
    # Dask's nanny sets MALLOC_TRIM_THRESHOLD_ in its workers; any explicit value turns off
    # glibc's dynamic mmap threshold, so every large torch/OpenCV buffer is mmap'd and
    # faulted in again: describe workers spent 2-3x their compute time in the kernel
    # (cnn-gem on the tiny world: 166 s vs 55 s in-process). None = leave glibc's default.
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=processes, dashboard_address=":0")
    return _quiet_at_close(Client(cluster)), cluster


def _slurm_client(config: str, workers: int | None) -> tuple[Any, Any]:
    """dask-jobqueue SLURMCluster from a YAML of its keyword arguments (+ optional `jobs`)."""
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    kwargs, _ = read_yaml(config, "SLURM config")
    kwargs = kwargs or {}
    if not isinstance(kwargs, dict):
        raise UserError(f"SLURM config {config}: expected a mapping of SLURMCluster keyword arguments")
    jobs = int(kwargs.pop("jobs", workers or 1))
    # the job's worker loads numpy before it runs mining: the pins go in its environment first
    kwargs["job_script_prologue"] = [*(kwargs.get("job_script_prologue") or []), *pins.exports()]
    cluster = SLURMCluster(**kwargs)
    cluster.scale(jobs=jobs)
    return _quiet_at_close(Client(cluster)), cluster


def _quiet_at_close(client: Any) -> Any:
    """`client`, its workers (also those that join later) told not to log a traceback for a
    heartbeat cut short by their own shutdown (`mining.compute.dask_plugins.QuietClose`). Only for
    clusters this process starts: another's workers keep their logging."""
    from mining.compute.dask_plugins import QuietClose

    client.register_plugin(QuietClose(), name=QuietClose.name)
    return client


@contextlib.contextmanager
def connect(where: Cluster) -> Iterator[Any]:
    """A client of the cluster `where` names, closed (with the cluster it started) on exit.

    Yields None, meaning "run in this process", when `where.workers` is 0 and neither a
    scheduler nor SLURM is given.
    """
    if where.workers == 0 and not where.scheduler and not where.slurm:
        yield None
        return
    client, cluster = make_client(where.scheduler, where.workers, where.slurm, processes=where.processes)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def run_tasks(client: Any, fn: Callable[..., Any], arglist: Sequence[tuple], *,
              on_done: Callable[[Any], None] | None = None, on_tick: Callable[[], None] | None = None,
              tick_s: float = 0.5, name: str | None = None, on_fail: Callable[[], None] | None = None,
              settle_s: float = 60.0) -> list[Any]:
    """`[fn(*args) for args in arglist]`, run on `client`'s cluster (in this process when None).

    The results come back in task order, never in completion order. `on_done(result)` is
    called as each task finishes (in completion order: for progress bars and logs only) and
    `on_tick()` about every `tick_s` seconds while waiting. A task that raises re-raises
    here, after the tasks not yet started are cancelled; with `on_fail` (which tells the running
    tasks to end), after `on_fail()` and after the running tasks ended (at most `settle_s`).
    """
    if client is None:
        results = []
        for args in arglist:
            results.append(fn(*args))
            if on_done is not None:
                on_done(results[-1])
            if on_tick is not None:
                on_tick()
        return results
    from distributed import wait

    prefix = name or getattr(fn, "__name__", "task")
    futures = [client.submit(fn, *args, pure=False, key=f"{prefix}-{i}-{time.time_ns()}")
               for i, args in enumerate(arglist)]
    index = {f.key: i for i, f in enumerate(futures)}
    results: list[Any] = [None] * len(futures)
    pending = set(futures)
    try:
        while pending:
            try:
                done, pending = wait(pending, timeout=tick_s if on_tick is not None else None,
                                     return_when="FIRST_COMPLETED")
            except TimeoutError:  # nothing finished in this tick
                done = set()
            for f in sorted(done, key=lambda f: index[f.key]):
                results[index[f.key]] = f.result()
                if on_done is not None:
                    on_done(results[index[f.key]])
            if on_tick is not None:
                on_tick()
    except BaseException:
        if on_fail is not None and pending:
            with contextlib.suppress(Exception):
                on_fail()
                wait(pending, timeout=settle_s)
        raise
    finally:
        if pending:
            client.cancel(list(pending))
    return results


def dashboard_link(client: Any) -> str | None:
    try:
        return client.dashboard_link
    except Exception:  # no bokeh, or a scheduler without a dashboard
        return None


