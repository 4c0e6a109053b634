"""`mining download`: candidates → verified 1024 px images + a status Parquet per shard +
`index.parquet`, each photo asked of the sources in order (`sources`: Flickr, the Multimedia
Commons mirror, local folders) until one serves it.

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

from mining import atomic, cluster
from mining.stages.download.downloader import FetchConfig
from mining.stages.download.reader import (DEFAULT_HOST, build_jobs, check_out_dir, load_candidates, plan_fingerprint,
                                           plan_shards)
from mining.stages.download.sources import Source
from mining.stages.download.writer import sweep_debris
from mining.errors import UserError
from mining.options import defaults

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_HOST", "FetchConfig", "Source", "download"]

# A download fails (UserError, after its statuses are written) when fewer than min_ok_fraction
# of its photos are `ok` (schema: download.min_ok_fraction), and stops early, before the rest of the shards, once this many photos of a run have all failed.
GIVE_UP_AFTER = 1000


class _Hopeless(Exception):
    """Every photo this run tried so far failed: stop before the rest of the shards."""


_SCHEMA = defaults("download")  # the manifest schema's defaults


def download(candidates: str | Path, out: str | Path, cfg: FetchConfig, host: str = _SCHEMA.host,
             size: str = _SCHEMA.size, shard_size: int = _SCHEMA.shard_size, tar: bool = _SCHEMA.tar, scheduler: str | None = None, workers: int | None = None,
             slurm: str | None = None, processes: bool = True, progress: bool = True,
             min_ok_fraction: float = _SCHEMA.min_ok_fraction, give_up_after: int = GIVE_UP_AFTER,
             sources: list[Source] | None = None) -> dict:
    """Download every candidate not yet settled; returns the run summary (also in DIR/summary.json)
    and writes DIR/index.parquet (every photo: its image's path, source, status).

    `sources`: tried in order per photo (`mining.stages.download.sources`); default one flickr source
    at `host` with `size` and `cfg`'s politeness and min_size.

    Raises UserError (naming the host and the most common failure) when fewer than
    `min_ok_fraction` of the photos are `ok`, or when the first `give_up_after` photos of this
    run all failed (then the remaining shards are not started); the statuses written so far
    stay, so a rerun resumes. `min_ok_fraction=0` turns both checks off.
    """
    from mining.stages.download import distributor, logger

    if not 0 <= min_ok_fraction <= 1:
        raise UserError(f"--min-ok-fraction must be between 0 and 1, not {min_ok_fraction}")
    srcs = tuple(sources) if sources else (Source(kind="flickr", name="flickr", host=host.rstrip("/"), size=size,
                                                  rps=cfg.rps, threads=cfg.threads, min_size=cfg.min_size),)
    table = load_candidates(candidates)
    ids, keys, urls = build_jobs(table, list(srcs))
    out = check_out_dir(out)
    variant = ",".join(s.size for s in srcs if s.kind == "flickr")
    plan = {"shard_size": shard_size, "photos": len(ids), "fingerprint": plan_fingerprint(ids, keys, shard_size, variant),
            "tar": tar}
    plan_file = out / "download.json"
    if plan_file.exists():
        old = json.loads(plan_file.read_text())
        if old != plan:
            raise UserError(f"{out} holds a download with another plan (shard size {old.get('shard_size')}, "
                            f"{old.get('photos')} photos, tar {old.get('tar')}; or one made before images were keyed "
                            "by photo hash); use the same candidates and options, or a new --out")
    else:
        atomic.write_json(plan_file, plan)
    swept = sweep_debris(out)
    if swept:
        log.info("removed %d partial file(s) left by an interrupted run", swept)
    shards, n_shards = plan_shards(out, ids, urls, shard_size, tar=tar, keys=keys)
    remaining = sum(len(s.photo_ids) for s in shards)
    log.info("%d photos in %d shards; %d shards (%d photos) to do", len(ids), n_shards, len(shards), remaining)
    t0 = time.monotonic()
    results: list[dict] = []
    dashboard = None
    stopped = False
    tally = {"tried": 0, "ok": 0}  # running totals: one shard's counts added per call, not all shards'

    def on_shard(r: dict) -> None:
        results.append(r)
        tally["tried"] += sum(r["counts"].values())
        tally["ok"] += r["counts"].get("ok", 0)
        if min_ok_fraction > 0 and tally["tried"] >= give_up_after and not tally["ok"]:
            raise _Hopeless()

    if shards:
        with cluster.connect(scheduler, workers or None, slurm, processes=processes) as client:
            dashboard = cluster.dashboard_link(client)
            if dashboard:
                log.info("Dask dashboard: %s", dashboard)
            bar: Any = logger.progress_bar(len(ids), len(ids) - remaining) if progress else None
            try:
                distributor.run_shards(client, shards, out, cfg, tar,
                                       on_progress=(bar.update if bar else (lambda k: None)), on_shard=on_shard,
                                       sources=srcs)
            except _Hopeless:
                stopped = True
            finally:
                if bar is not None:
                    bar.close()
    hosts = ", ".join(s.host or s.path or s.name for s in srcs)
    logger.write_index(out, ids, keys, shard_size, tar)
    summary = logger.summarize(out, results, time.monotonic() - t0, len(ids), dashboard, host=hosts,
                               min_ok_fraction=min_ok_fraction, stopped_early=stopped, sources=srcs)
    if summary["failure"]:
        raise UserError(summary["failure"])
    return summary
