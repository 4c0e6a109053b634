"""`mining` command line: parses arguments and calls the package, nothing else.

Each stage has a module `mining.cli.<stage>` with `register(subparsers)`, which adds its
subcommand and sets `func`. Heavy imports (torch, dask, ...) happen inside `func`, so that
`mining --help` stays instant.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import re
import sys

from mining import __version__
from mining.errors import UserError

STAGES = [
    "demo",
    "landmarks",
    "ingest",
    "geofilter",
    "download",
    "describe",
    "neardup",
    "score",
    "leakrisk",
    "review",
    "select",
    "evaluate",
    "release",
    "report",
]


# OSErrors that are about the machine (permissions, space, a path that cannot be a folder),
# not about the code: reported in one line. Any other OSError keeps its traceback.
_ENVIRONMENT_ERRNOS = frozenset({
    errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG,
    errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENAMETOOLONG, errno.ELOOP,
})


def os_error_line(exc: OSError, fallback: object = None) -> str:
    """`PATH: reason` for an OSError; Arrow's errors carry no filename, but often quote it."""
    path = exc.filename
    if path is None:
        quoted = re.search(r"'([^']+)'", str(exc))
        path = quoted.group(1) if quoted else fallback
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    if exc.errno == errno.EEXIST and path is not None and os.path.isfile(path):
        reason = "a file is in the way (a folder is needed here)"
    if exc.filename2 is not None:
        return f"{path} -> {exc.filename2}: {reason}"
    return f"{path}: {reason}" if path is not None else reason


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mining",
        description=(
            "Mine hard distractor images for landmark retrieval benchmarks (R1M-style). "
            "Stages, in pipeline order: " + ", ".join(STAGES) + ". "
            "Run `mining STAGE --help` for each stage's options."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="STAGE")
    for stage in STAGES:
        importlib.import_module(f"mining.cli.{stage}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare `--` is passed through untouched (e.g. `mining demo serve W -- CMD`).
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    args.passthrough = passthrough
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        # Dask's own INFO chatter (and its INFO-level tracebacks when workers close) would
        # bury the stage's messages in the logs. distributed sets its logger levels from the
        # dask config when first imported (inside the stages), hence the config variable.
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"mining {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno not in _ENVIRONMENT_ERRNOS:
            raise
        # a read-only, full or unreachable output place: the stages write atomically, so
        # nothing partial is left; say where in one line
        print(f"mining {args.command}: error: {os_error_line(exc, getattr(args, 'out', None))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"mining {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
