"""`mining download`: candidates → verified 1024 px images + a status Parquet per shard.

Split like img2dataset: reader (plan shards, skip done work), downloader (one shard),
writer (atomic files / tars, status), distributor (Dask), ratelimit (cluster-wide
politeness), logger (progress, summary). `download()` ties them together.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from mining import atomic
from mining.download.downloader import FetchConfig
from mining.download.reader import DEFAULT_HOST, build_urls, check_out_dir, load_candidates, plan_fingerprint, plan_shards
from mining.errors import UserError

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_HOST", "FetchConfig", "download"]


def download(candidates: str | Path, out: str | Path, cfg: FetchConfig, host: str = DEFAULT_HOST, size: str = "b",
             shard_size: int = 2000, tar: bool = False, scheduler: str | None = None, workers: int | None = None,
             slurm: str | None = None, processes: bool = True, progress: bool = True) -> dict:
    """Download every candidate not yet settled; returns the run summary (also in DIR/summary.json)."""
    from mining.download import distributor, logger
    from mining.download.writer import sweep_debris

    table = load_candidates(candidates)
    ids, urls = build_urls(table, host, size)
    out = check_out_dir(out)
    plan = {"shard_size": shard_size, "photos": len(ids), "fingerprint": plan_fingerprint(ids, urls, shard_size),
            "tar": tar}
    plan_file = out / "download.json"
    if plan_file.exists():
        old = json.loads(plan_file.read_text())
        if old != plan:
            raise UserError(f"{out} holds a download with another plan (shard size {old.get('shard_size')}, "
                            f"{old.get('photos')} photos, tar {old.get('tar')}); use the same options or a new --out")
    else:
        atomic.write_json(plan_file, plan)
    swept = sweep_debris(out)
    if swept:
        log.info("removed %d partial file(s) left by an interrupted run", swept)
    shards, n_shards = plan_shards(out, ids, urls, shard_size, tar=tar)
    remaining = sum(len(s.photo_ids) for s in shards)
    log.info("%d photos in %d shards; %d shards (%d photos) to do", len(ids), n_shards, len(shards), remaining)
    t0 = time.monotonic()
    results: list[dict] = []
    dashboard = None
    if shards:
        client, cluster = distributor.make_client(scheduler, workers, slurm, processes=processes)
        try:
            dashboard = distributor.dashboard_link(client)
            if dashboard:
                log.info("Dask dashboard: %s", dashboard)
            bar: Any = logger.progress_bar(len(ids), len(ids) - remaining) if progress else None
            try:
                results = distributor.run_shards(client, shards, out, cfg, tar,
                                                 on_progress=(bar.update if bar else (lambda k: None)),
                                                 on_shard=lambda r: None)
            finally:
                if bar is not None:
                    bar.close()
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    return logger.summarize(out, results, time.monotonic() - t0, len(ids), dashboard)
