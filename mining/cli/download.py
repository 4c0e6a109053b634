"""CLI for `mining download`: candidates → verified images + status per shard (see mining.download)."""

from __future__ import annotations

import argparse

from mining.cli import add_input, add_progress_flag, main_input


def register(sub: argparse._SubParsersAction) -> None:
    from mining.download.sources import kind_defaults, section_defaults

    d = section_defaults()  # every default is the manifest schema's (download section)
    p = sub.add_parser(
        "download",
        help="download candidates' 1024 px images: verified, polite, resumable, on Dask",
        description="Download the geofiltered candidates (Parquet file or folder) into "
        "DIR/jpg/<3 hex>/<key>.jpg (or DIR/tar/), with DIR/status/shard-NNNNN.parquet, "
        "DIR/index.parquet (every photo: status, source, path) and DIR/summary.json, from one or more "
        "sources tried in order (Flickr, the Multimedia Commons mirror, a local folder). Rerunning the "
        "same command resumes. Defaults are the manifest schema's (download section).",
    )
    add_input(p, "candidates", metavar="CANDIDATES", help="geofilter output: a Parquet file or folder")
    p.add_argument("--out", required=True, metavar="DIR", help="download folder")
    p.add_argument("--host", default=None,
                   help=f"base URL of the one flickr source (default {d['host']}); not with --source")
    srcs = p.add_mutually_exclusive_group()
    srcs.add_argument("--source", action="append", metavar="SPEC", dest="source",
                      help="a source, tried in the order given (repeat): key=value pairs, e.g. kind=flickr "
                      "kind=multimedia-commons (host default " + kind_defaults()["multimedia-commons"]["host"] +
                      ", low_res) kind=local,path=DIR; keys: kind, name, host, size, path, per_host_rps, "
                      "threads, min_size, low_res. Unset keys: the kind's default, else the flags below")
    srcs.add_argument("--sources-json", metavar="JSON",
                      help="the sources as a JSON list of objects (the manifest's download.sources)")
    p.add_argument("--size", choices=["b", "o"], default=d["size"],
                   help=f"flickr: b = 1024 px, o = original (default {d['size']})")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="use a running Dask scheduler")
    where.add_argument("--workers", type=int, metavar="N", help="LocalCluster worker processes (default min(4, CPUs))")
    where.add_argument("--slurm", metavar="YAML", help="dask-jobqueue SLURMCluster keyword arguments (+ `jobs`)")
    p.add_argument("--threads", type=int, default=d["threads"],
                   help=f"concurrent requests per shard task and source, over kept-alive connections (default {d['threads']})")
    p.add_argument("--per-host-rps", type=float, default=d["per_host_rps"], metavar="R",
                   help=f"cluster-wide requests/s per host (default {d['per_host_rps']:g}); 0 = unlimited; "
                   "429/503 cooldowns always apply")
    p.add_argument("--shard-size", type=int, default=d["shard_size"], metavar="K",
                   help=f"photos per shard/task (default {d['shard_size']})")
    p.add_argument("--min-size", type=int, default=d["min_size"], metavar="PX",
                   help=f"minimum long side of full-resolution sources (default {d['min_size']})")
    p.add_argument("--timeout", type=float, default=d["timeout"], metavar="S",
                   help=f"total deadline per request (default {d['timeout']:g})")
    p.add_argument("--connect-timeout", type=float, default=d["connect_timeout"], metavar="S",
                   help=f"connect deadline (default {d['connect_timeout']:g})")
    p.add_argument("--retries", type=int, default=d["retries"],
                   help=f"attempts for timeouts/5xx/broken connections (default {d['retries']})")
    p.add_argument("--max-throttle-wait", type=float, default=d["max_throttle_wait"], metavar="S",
                   help=f"cooldown one photo may wait in total before throttled_gave_up (default {d['max_throttle_wait']:g})")
    p.add_argument("--placeholder-sha256", metavar="FILE",
                   help="file of known placeholder image sha256 digests (one per line)")
    p.add_argument("--min-ok-fraction", type=float, default=d["min_ok_fraction"], metavar="F",
                   help="fail (exit 2, statuses kept) when fewer than this share of the photos are ok, or when "
                   f"the first 1000 photos of a run all fail (default {d['min_ok_fraction']:g}; 0 = never)")
    p.add_argument("--tar", action="store_true", default=d["tar"],
                   help="store images in one tar per shard instead of files")
    add_progress_flag(p)
    p.set_defaults(func=run)


def sources_from_args(args: argparse.Namespace) -> list:
    """The resolved sources of a command line: --source/--sources-json, else one flickr at --host."""
    from mining.download.sources import check_entries, parse_json, parse_spec, resolve, section_defaults
    from mining.errors import UserError

    section = {"per_host_rps": args.per_host_rps, "threads": args.threads, "min_size": args.min_size,
               "size": args.size}
    if args.source or args.sources_json:
        if args.host is not None:
            raise UserError("--host and --source/--sources-json disagree on where images come from: "
                            "give the flickr host inside the sources (host=...)")
        entries = [parse_spec(t) for t in args.source] if args.source else parse_json(args.sources_json)
        return resolve(check_entries(entries, "--source" if args.source else "--sources-json"), section)
    host = args.host or section_defaults()["host"]
    return resolve(check_entries([{"kind": "flickr", "host": host}], "--host"), section)


def run(args: argparse.Namespace) -> int:
    import logging
    from pathlib import Path

    from mining.download import FetchConfig, download
    from mining.download.logger import format_summary
    from mining.errors import UserError

    for name in ("threads", "shard_size", "min_size", "retries"):
        if getattr(args, name) < 0 or (name in ("threads", "shard_size", "retries") and getattr(args, name) < 1):
            raise UserError(f"--{name.replace('_', '-')} must be positive")
    if args.timeout <= 0 or args.connect_timeout <= 0 or args.per_host_rps < 0:
        raise UserError("--timeout and --connect-timeout must be > 0, --per-host-rps >= 0")
    if args.workers is not None and args.workers < 1:
        raise UserError("--workers must be at least 1")
    sources = sources_from_args(args)
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
    summary = download(main_input(args, "candidates"), args.out, cfg, shard_size=args.shard_size, tar=args.tar,
                       scheduler=args.scheduler, workers=args.workers, slurm=args.slurm,
                       progress=not args.no_progress, min_ok_fraction=args.min_ok_fraction, sources=sources)
    print(format_summary(summary))
    return 0
