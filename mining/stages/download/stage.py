"""`mining download`: `run` (the candidates → images, statuses, index and summary), with the
settings' request behaviour (`fetch_config`) and sources (`sources_of`); the parts are listed
in the package's docstring."""


from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from mining import atomic, cluster
from mining.stages.download.downloader import FetchConfig
from mining.stages.download.reader import build_jobs, check_out_dir, load_candidates, plan_fingerprint, plan_shards
from mining.stages.download.sources import Source, resolve, section_entries
from mining.stages.download.writer import sweep_debris
from mining.errors import UserError
from mining.options import DownloadOptions

log = logging.getLogger("mining.stages.download")  # the stage's name in the run's logs, not this module's

# A download fails (UserError, after its statuses are written) when fewer than min_ok_fraction
# of its photos are `ok` (schema: download.min_ok_fraction), and stops early, before the rest of the shards, once this many photos of a run have all failed.
GIVE_UP_AFTER = 1000


class _Hopeless(Exception):
    """Every photo this run tried so far failed: stop before the rest of the shards."""


@dataclass(frozen=True)
class Inputs:
    """The files `mining download` reads."""

    candidates: str | Path  # geofilter's candidates: a Parquet file or folder
    placeholders: str | Path | None = None  # known placeholder images' sha256 digests, one per line


def fetch_config(options: DownloadOptions, placeholders: frozenset[str] = frozenset()) -> FetchConfig:
    """How one request behaves, by the settings."""
    return FetchConfig(min_size=options.min_size, connect_timeout=options.connect_timeout, timeout=options.timeout,
                       max_retries=options.retries, max_throttle_wait=options.max_throttle_wait,
                       threads=options.threads, rps=options.per_host_rps, placeholder_sha256=placeholders)


def inherited(options: DownloadOptions) -> dict[str, Any]:
    """The settings a source takes when its entry and its kind do not set them."""
    return {"per_host_rps": options.per_host_rps, "threads": options.threads, "min_size": options.min_size,
            "size": options.size}


def sources_of(options: DownloadOptions, where: str = "manifest") -> list[Source]:
    """The sources the settings name: `sources`, or the one flickr source at `host`."""
    return resolve(section_entries({"host": options.host, "sources": options.sources}, where), inherited(options))


def _placeholders(path: str | Path | None) -> frozenset[str]:
    if path is None:
        return frozenset()
    try:
        lines = Path(path).read_text().split()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    return frozenset(x.lower() for x in lines)


def run(inputs: Inputs, out: str | Path, options: DownloadOptions, *, sources: Sequence[Source] | None = None,
        scheduler: str | None = None, workers: int | None = None, slurm: str | None = None, processes: bool = True,
        progress: bool = True, give_up_after: int = GIVE_UP_AFTER) -> dict:
    """Download every candidate not yet settled; returns the run summary (also in DIR/summary.json)
    and writes DIR/index.parquet (every photo: its image's path, source, status).

    `sources`: tried in order per photo (`mining.stages.download.sources`), resolved; default
    the settings' (`sources_of`).

    Raises UserError (naming the host and the most common failure) when fewer than
    `options.min_ok_fraction` of the photos are `ok`, or when the first `give_up_after` photos
    of this run all failed (then the remaining shards are not started); the statuses written so
    far stay, so a rerun resumes. `min_ok_fraction=0` turns both checks off.
    """
    candidates, shard_size, tar, min_ok_fraction = inputs.candidates, options.shard_size, options.tar, \
        options.min_ok_fraction
    from mining.stages.download import distributor, logger

    if not 0 <= min_ok_fraction <= 1:
        raise UserError(f"--min-ok-fraction must be between 0 and 1, not {min_ok_fraction}")
    cfg = fetch_config(options, _placeholders(inputs.placeholders))
    srcs = tuple(sources) if sources else tuple(sources_of(options))
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
