"""Where shards run: a Dask LocalCluster by default, an existing scheduler, or SLURM.

One Dask task per shard (thousands of URLs), never one per URL: the scheduler stays idle
and each task keeps its keep-alive connections for the whole shard. The per-host schedule
and the progress counter are Dask Actors, so all workers share them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from mining.errors import UserError


class Counter:
    """Images finished so far, across the cluster (an Actor the progress bar polls)."""

    def __init__(self) -> None:
        self.n = 0

    def add(self, k: int) -> int:
        self.n += k
        return self.n

    def value(self) -> int:
        return self.n


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
    n = workers or max(1, min(4, os.cpu_count() or 1))
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=processes, dashboard_address=":0")
    return Client(cluster), cluster


def _slurm_client(config: str, workers: int | None) -> tuple[Any, Any]:
    """dask-jobqueue SLURMCluster from a YAML of its keyword arguments (+ optional `jobs`)."""
    import yaml
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    try:
        kwargs = yaml.safe_load(Path(config).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"cannot read SLURM config {config}: {exc}") from None
    jobs = int(kwargs.pop("jobs", workers or 1))
    cluster = SLURMCluster(**kwargs)
    cluster.scale(jobs=jobs)
    return Client(cluster), cluster


def dashboard_link(client: Any) -> str | None:
    try:
        return client.dashboard_link
    except Exception:  # no bokeh, or a scheduler without a dashboard
        return None


def _bind(actor: Any) -> None:
    """Tie an Actor handle to this worker while in the task thread (where `get_worker` works),
    so the shard's own download threads can call it too (distributed binds lazily, per thread).
    """
    if getattr(actor, "_worker", None) is None and getattr(actor, "_client", None) is None:
        bind = getattr(actor, "_try_bind_worker_client", None)
        if bind is not None:
            bind()


def _shard_task(shard: Any, out: str, cfg: Any, tar: bool, schedule: Any, counter: Any) -> dict:
    """Runs on a worker: one shard, reporting progress to the shared counter in batches."""
    import threading

    from mining.download.downloader import download_shard

    for actor in (schedule, counter):
        _bind(actor)
    lock = threading.Lock()
    pending = [0, time.monotonic()]

    def tick(k: int) -> None:
        with lock:
            pending[0] += k
            if time.monotonic() - pending[1] < 0.5:
                return
            k, pending[0], pending[1] = pending[0], 0, time.monotonic()
        counter.add(k)

    result = download_shard(shard, Path(out), cfg, schedule, tar=tar, tick=tick)
    if pending[0]:
        counter.add(pending[0])
    return result


def run_shards(client: Any, shards: list, out: Path, cfg: Any, tar: bool,
               on_progress: Callable[[int], None], on_shard: Callable[[dict], None]) -> list[dict]:
    """Submit every shard, report progress while they run; returns the shard tallies."""
    from distributed import wait

    from mining.download.ratelimit import HostSchedule

    schedule = client.submit(HostSchedule, cfg.rps, actor=True, pure=False).result()
    counter = client.submit(Counter, actor=True, pure=False).result()
    futures = [client.submit(_shard_task, s, str(out), cfg, tar, schedule, counter, pure=False,
                             key=f"download-{s.name}-{time.time_ns()}") for s in shards]
    results, pending, seen = [], set(futures), 0
    while pending:
        try:
            done, pending = wait(pending, timeout=0.5, return_when="FIRST_COMPLETED")
        except TimeoutError:  # nothing finished in this tick: just refresh the progress bar
            done = set()
        for f in done:
            r = f.result()  # a shard that raised re-raises here: a bug, not a network fault
            results.append(r)
            on_shard(r)
        now = counter.value().result()
        if now > seen:
            on_progress(now - seen)
            seen = now
    return results
