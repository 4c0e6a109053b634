"""CLI for `mining download`: candidates → verified images + status per shard (see mining.download)."""

from __future__ import annotations

import argparse

from mining.cli import add_input, add_progress_flag, main_input


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "download",
        help="download candidates' 1024 px images: verified, polite, resumable, on Dask",
        description="Download the geofiltered candidates (Parquet file or folder) into "
        "DIR/jpg/<3 hex>/<key>.jpg (or DIR/tar/), with DIR/status/shard-NNNNN.parquet and "
        "DIR/summary.json. Rerunning the same command resumes.",
    )
    add_input(p, "candidates", metavar="CANDIDATES", help="geofilter output: a Parquet file or folder")
    p.add_argument("--out", required=True, metavar="DIR", help="download folder")
    p.add_argument("--host", default=None, help="base URL of the image host (default https://live.staticflickr.com)")
    p.add_argument("--size", choices=["b", "o"], default="b", help="b = 1024 px (default), o = original")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="use a running Dask scheduler")
    where.add_argument("--workers", type=int, metavar="N", help="LocalCluster worker processes (default min(4, CPUs))")
    where.add_argument("--slurm", metavar="YAML", help="dask-jobqueue SLURMCluster keyword arguments (+ `jobs`)")
    p.add_argument("--threads", type=int, default=64,
                   help="concurrent requests per shard task, over kept-alive connections (default 64)")
    p.add_argument("--per-host-rps", type=float, default=0.0, metavar="R",
                   help="cluster-wide requests/s per host; 0 = unlimited (default), 429/503 cooldowns always apply")
    p.add_argument("--shard-size", type=int, default=2000, metavar="K", help="photos per shard/task (default 2000)")
    p.add_argument("--min-size", type=int, default=1024, metavar="PX", help="minimum long side (default 1024)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S", help="total deadline per request (default 30)")
    p.add_argument("--connect-timeout", type=float, default=5.0, metavar="S", help="connect deadline (default 5)")
    p.add_argument("--retries", type=int, default=3, help="attempts for timeouts/5xx/broken connections (default 3)")
    p.add_argument("--max-throttle-wait", type=float, default=600.0, metavar="S",
                   help="cooldown one photo may wait in total before throttled_gave_up (default 600)")
    p.add_argument("--placeholder-sha256", metavar="FILE",
                   help="file of known placeholder image sha256 digests (one per line)")
    p.add_argument("--min-ok-fraction", type=float, default=None, metavar="F",
                   help="fail (exit 2, statuses kept) when fewer than this share of the photos are ok, or when "
                   "the first 1000 photos of a run all fail (default 0.5; 0 = never)")
    p.add_argument("--tar", action="store_true", help="store images in one tar per shard instead of files")
    add_progress_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import logging
    from pathlib import Path

    from mining.download import DEFAULT_HOST, DEFAULT_MIN_OK_FRACTION, FetchConfig, download
    from mining.download.logger import format_summary
    from mining.errors import UserError

    for name in ("threads", "shard_size", "min_size", "retries"):
        if getattr(args, name) < 0 or (name in ("threads", "shard_size", "retries") and getattr(args, name) < 1):
            raise UserError(f"--{name.replace('_', '-')} must be positive")
    if args.timeout <= 0 or args.connect_timeout <= 0 or args.per_host_rps < 0:
        raise UserError("--timeout and --connect-timeout must be > 0, --per-host-rps >= 0")
    if args.workers is not None and args.workers < 1:
        raise UserError("--workers must be at least 1")
    placeholders: frozenset[str] = frozenset()
    if args.placeholder_sha256:
        try:
            lines = Path(args.placeholder_sha256).read_text().split()
        except OSError as exc:
            raise UserError(f"cannot read {args.placeholder_sha256}: {exc.strerror}") from None
        placeholders = frozenset(x.lower() for x in lines)
    cfg = FetchConfig(min_size=args.min_size, connect_timeout=args.connect_timeout, timeout=args.timeout,
                      max_retries=args.retries, max_throttle_wait=args.max_throttle_wait, threads=args.threads,
                      rps=args.per_host_rps, placeholder_sha256=placeholders)
    if not args.verbose:  # Dask's per-worker start/stop chatter would bury the progress bar
        logging.getLogger("distributed").setLevel(logging.WARNING)
    summary = download(main_input(args, "candidates"), args.out, cfg, host=args.host or DEFAULT_HOST, size=args.size,
                       shard_size=args.shard_size, tar=args.tar, scheduler=args.scheduler, workers=args.workers,
                       slurm=args.slurm, progress=not args.no_progress,
                       min_ok_fraction=DEFAULT_MIN_OK_FRACTION if args.min_ok_fraction is None else args.min_ok_fraction)
    print(format_summary(summary))
    return 0
