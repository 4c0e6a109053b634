"""CLI for `mining download`: candidates → verified images + status per shard (see mining.stages.download)."""

from __future__ import annotations

import argparse

from mining.files.names import IMAGES_SUMMARY, IMAGE_INDEX
from mining.settings import options
from mining.flags import add_cluster_flags, add_progress_flag, cluster_of


def register(sub: argparse._SubParsersAction) -> None:
    from mining.stages.download.sources import kind_defaults

    p = sub.add_parser(
        "download",
        help="download candidates' 1024 px images: verified, polite, resumable, on Dask",
        description="Download the geofiltered candidates (Parquet file or folder) into "
        "DIR/jpg/<3 hex>/<key>.jpg (or DIR/tar/), with DIR/status/shard-NNNNN.parquet, "
        f"DIR/{IMAGE_INDEX} (every photo: status, source, path) and DIR/{IMAGES_SUMMARY}, from one or more "
        "sources tried in order (Flickr, the Multimedia Commons mirror, a local folder). Rerunning the "
        "same command resumes. Defaults are the manifest schema's (download section).",
    )
    p.add_argument("--candidates", required=True, metavar="CANDIDATES", help="geofilter output: a Parquet file or folder")
    p.add_argument("--out", required=True, metavar="DIR", help="download folder")
    srcs = p.add_mutually_exclusive_group()
    srcs.add_argument("--source", action="append", metavar="SPEC", dest="source",
                      help="a source, tried in the order given (repeat): key=value pairs, e.g. kind=flickr "
                      "kind=multimedia-commons (host default " + kind_defaults()["multimedia-commons"]["host"] +
                      ", low_res) kind=local,path=DIR; keys: kind, name, host, size, path, per_host_rps, "
                      "threads, min_size, low_res. Unset keys: the kind's default, else the settings below; "
                      "not with --host")
    srcs.add_argument("--sources-json", metavar="JSON",
                      help="the sources as a JSON list of objects (the manifest's download.sources)")
    add_cluster_flags(p)
    p.add_argument("--placeholder-sha256", metavar="FILE",
                   help="file of known placeholder image sha256 digests (one per line)")
    options.add_flags(p, "download", keys=[k for k in options.section_schema("download")["properties"] if k != "sources"])
    add_progress_flag(p)
    p.set_defaults(func=run)


def sources_from_args(args: argparse.Namespace, d: options.DownloadOptions) -> list:
    """The resolved sources of a command line: --source/--sources-json, else the settings'
    (the manifest's sources, or one flickr source at the host)."""
    from mining.stages.download.sources import check_entries, parse_json, parse_spec, resolve
    from mining.stages.download.stage import inherited, sources_of
    from mining.errors import UserError

    if args.source or args.sources_json:
        if getattr(args, options.dest("download", "host")) is not None:
            raise UserError("--host and --source/--sources-json disagree on where images come from: "
                            "give the flickr host inside the sources (host=...)")
        entries = [parse_spec(t) for t in args.source] if args.source else parse_json(args.sources_json)
        return resolve(check_entries(entries, "--source" if args.source else "--sources-json"), inherited(d))
    return sources_of(d, str(args.manifest) if args.manifest else "--host")


def run(args: argparse.Namespace) -> int:
    import logging

    from mining.compute.cluster import Cluster
    from mining.stages.download.logger import format_summary
    from mining.stages.download.stage import run

    d = options.from_args(args, "download")
    sources = sources_from_args(args, d)
    scheduler, slurm = cluster_of(args)
    if not args.verbose:  # Dask's per-worker start/stop chatter would bury the progress bar
        logging.getLogger("distributed").setLevel(logging.WARNING)
    summary = run(candidates=args.candidates, out=args.out, options=d, placeholders=args.placeholder_sha256,
                  sources=sources, progress=not args.no_progress,
                  cluster=Cluster(scheduler=scheduler, slurm=slurm,
                                  workers=args.workers if not (scheduler or slurm) else None))
    print(format_summary(summary))
    return 0
