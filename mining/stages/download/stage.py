"""`mining download`: `run` (the candidates → images, statuses, index and summary), with the
settings' request behaviour (`fetch_config`) and sources (`sources_of`); the parts are listed
in the package's docstring."""


from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from mining.files import atomic
from mining.compute.cluster import Cluster, connect, dashboard_link
from mining.stages.download.downloader import FetchConfig
from mining.stages.download.reader import build_jobs, check_out_dir, load_candidates, plan_fingerprint, plan_shards
from mining.stages.download.sources import Source, resolve, section_entries
from mining.stages.download.writer import sweep_debris
from mining.errors import UserError
from mining.settings.options import DownloadOptions

log = logging.getLogger("mining.stages.download")  # the stage's name in the run's logs, not this module's

# A download fails (UserError, after its statuses are written) when fewer than min_ok_fraction
# of its photos are `ok` (schema: download.min_ok_fraction), and stops early, before the rest of the shards, once this many photos of a run have all failed.
GIVE_UP_AFTER = 1000


class _Hopeless(Exception):
    """Every photo this run tried so far failed: stop before the rest of the shards."""


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


def run(*, candidates: str | Path, out: str | Path, options: DownloadOptions, placeholders: str | Path | None = None,
        sources: Sequence[Source] | None = None, cluster: Cluster = Cluster(), progress: bool = True,
        give_up_after: int = GIVE_UP_AFTER) -> dict:
    """Download every candidate (geofilter's candidates: a Parquet file or folder) not yet
    settled into the folder OUT; returns the run summary (also in OUT/summary.json) and writes
    OUT/index.parquet (every photo: its image's path, source, status).

    `placeholders`: a file of known placeholder images' sha256 digests, one per line.
    `sources`: tried in order per photo (`mining.stages.download.sources`), resolved; default
    the settings' (`sources_of`). `cluster`: where the shards run (a LocalCluster of
    min(4, CPUs) processes by default).

    Raises UserError (naming the host and the most common failure) when fewer than
    `options.min_ok_fraction` of the photos are `ok`, or when the first `give_up_after` photos
    of this run all failed (then the remaining shards are not started); the statuses written so
    far stay, so a rerun resumes. `min_ok_fraction=0` turns both checks off.
    """
    from mining.stages.download import logger

    if not 0 <= options.min_ok_fraction <= 1:
        raise UserError(f"--min-ok-fraction must be between 0 and 1, not {options.min_ok_fraction}")
    if cluster.workers is not None and cluster.workers < 1:
        raise UserError("--workers must be at least 1")
    cfg = fetch_config(options, _placeholders(placeholders))
    srcs = tuple(sources) if sources else tuple(sources_of(options))
    ids, keys, urls = build_jobs(load_candidates(candidates), list(srcs))
    out = check_out_dir(out)
    variant = ",".join(s.size for s in srcs if s.kind == "flickr")
    _keep_plan(out, {"shard_size": options.shard_size, "photos": len(ids),
                     "fingerprint": plan_fingerprint(ids, keys, options.shard_size, variant), "tar": options.tar})
    swept = sweep_debris(out)
    if swept:
        log.info("removed %d partial file(s) left by an interrupted run", swept)
    shards, n_shards = plan_shards(out, ids, urls, options.shard_size, tar=options.tar, keys=keys)
    remaining = sum(len(s.photo_ids) for s in shards)
    log.info("%d photos in %d shards; %d shards (%d photos) to do", len(ids), n_shards, len(shards), remaining)
    t0 = time.monotonic()
    tally = _Tally(options.min_ok_fraction, give_up_after)
    bar = (len(ids), len(ids) - remaining) if progress else None
    dashboard = _download(shards, out, cfg, srcs, options.tar, cluster, tally, bar) if shards else None
    logger.write_index(out, ids, keys, options.shard_size, options.tar)
    summary = logger.summarize(out, tally.results, time.monotonic() - t0, len(ids), dashboard,
                               host=", ".join(s.host or s.path or s.name for s in srcs),
                               min_ok_fraction=options.min_ok_fraction, stopped_early=tally.stopped, sources=srcs)
    if summary["failure"]:
        raise UserError(summary["failure"])
    return summary


def _keep_plan(out: Path, plan: dict[str, Any]) -> None:
    """Write OUT/download.json, or refuse a folder that holds a download with another plan."""
    plan_file = out / "download.json"
    if not plan_file.exists():
        atomic.write_json(plan_file, plan)
        return
    old = json.loads(plan_file.read_text())
    if old != plan:
        raise UserError(f"{out} holds a download with another plan (shard size {old.get('shard_size')}, "
                        f"{old.get('photos')} photos, tar {old.get('tar')}; or one made before images were keyed "
                        "by photo hash); use the same candidates and options, or a new --out")


class _Tally:
    """The shards' results as they come, and the running totals that stop a hopeless run."""

    def __init__(self, min_ok_fraction: float, give_up_after: int):
        self.min_ok_fraction, self.give_up_after = min_ok_fraction, give_up_after
        self.results: list[dict] = []
        self.tried = self.ok = 0  # one shard's counts added per call, not all shards'
        self.stopped = False

    def add(self, r: dict) -> None:
        self.results.append(r)
        self.tried += sum(r["counts"].values())
        self.ok += r["counts"].get("ok", 0)
        if self.min_ok_fraction > 0 and self.tried >= self.give_up_after and not self.ok:
            raise _Hopeless()


def _download(shards: list, out: Path, cfg: FetchConfig, sources: tuple[Source, ...], tar: bool, where: Cluster,
              tally: _Tally, bar: tuple[int, int] | None) -> str | None:
    """Run the shards on the cluster, each result into `tally` (a hopeless run stops early);
    return the Dask dashboard's link. `bar`: (photos, photos already done) of the progress bar."""
    from mining.stages.download import distributor, logger

    with connect(replace(where, workers=where.workers or None)) as client:  # 0: the default pool, not in-process
        dashboard = dashboard_link(client)
        if dashboard:
            log.info("Dask dashboard: %s", dashboard)
        progress: Any = logger.progress_bar(*bar) if bar is not None else None
        try:
            distributor.run_shards(client, shards, out, cfg, tar,
                                   on_progress=(progress.update if progress else (lambda k: None)),
                                   on_shard=tally.add, sources=sources)
        except _Hopeless:
            tally.stopped = True
        finally:
            if progress is not None:
                progress.close()
    return dashboard
