"""Where shards run: a Dask LocalCluster by default, an existing scheduler, or SLURM.

One Dask task per shard (thousands of URLs), never one per URL: the scheduler stays idle
and each task keeps its keep-alive connections for the whole shard. The per-host schedule
and the progress counter are Dask Actors, so all workers share them.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from mining.compute.cluster import run_tasks
from mining.stages.download.ratelimit import HostSchedule, RunStopped


class Counter:
    """Images finished so far, across the cluster (an Actor the progress bar polls)."""

    def __init__(self) -> None:
        self.n = 0

    def add(self, k: int) -> int:
        self.n += k
        return self.n

    def value(self) -> int:
        return self.n


def _bind(actor: Any) -> None:
    """Tie an Actor handle to this worker while in the task thread (where `get_worker` works),
    so the shard's own download threads can call it too (distributed binds lazily, per thread).
    """
    if getattr(actor, "_worker", None) is None and getattr(actor, "_client", None) is None:
        bind = getattr(actor, "_try_bind_worker_client", None)
        if bind is not None:
            bind()


def _shard_task(shard: Any, out: str, cfg: Any, tar: bool, schedule: Any, counter: Any, sources: tuple = ()) -> dict:
    """Runs on a worker: one shard, reporting progress to the shared counter in batches."""
    from mining.stages.download.downloader import download_shard

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

    try:
        result = download_shard(shard, Path(out), cfg, schedule, tar=tar, tick=tick, sources=sources)
    except RunStopped:  # another shard failed: this one's finished photos are journaled, the rest not asked
        return {"shard": shard.index, "stopped": True}
    except OSError as exc:  # a full disk, a read-only folder: handed to the driver, which raises it once
        if exc.errno is None:
            raise
        return {"shard": shard.index, "os_error": [exc.errno, exc.strerror, exc.filename]}
    if pending[0]:
        counter.add(pending[0])
    return result


def run_shards(client: Any, shards: list, out: Path, cfg: Any, tar: bool,
               on_progress: Callable[[int], None], on_shard: Callable[[dict], None], sources: tuple = ()) -> list[dict]:
    """Run every shard (`mining.compute.cluster.run_tasks`), reporting progress while they run; returns
    the shard tallies in shard order."""
    schedule = client.submit(HostSchedule, cfg.rps, actor=True, pure=False).result()
    counter = client.submit(Counter, actor=True, pure=False).result()
    seen = [0]

    def poll() -> None:
        now = counter.value().result()
        if now > seen[0]:
            on_progress(now - seen[0])
            seen[0] = now

    def done(r: dict) -> None:
        if r.get("os_error"):
            raise OSError(*r["os_error"])
        if not r.get("stopped"):
            on_shard(r)

    # a shard that raises (a bug, a full disk; not a network fault) re-raises here, once the
    # others have stopped asking the schedule (they would call it after it is gone)
    return run_tasks(client, _shard_task, [(s, os.path.abspath(out), cfg, tar, schedule, counter, sources)
                                            for s in shards],
                     on_done=done, on_tick=poll, name="download",
                     on_fail=lambda: schedule.stop().result())
