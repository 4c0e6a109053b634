"""`mining` command line: parses arguments and calls the package, nothing else.

Each stage's verb is `mining/stages/<stage>/cli.py` with `register(subparsers)`, which adds
its subcommand and sets `func` (the list: `mining.stages.names()`); this module holds what the
verbs share. Heavy imports (torch, dask, ...) happen inside `func`, so that
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

from mining import __version__, pins, stages
from mining.settings import options
from mining.errors import UserError


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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every verb, or of the verb `only` alone (a run imports only its own
    stage's CLI: importing all of them cost ~1.5 CPU s per process, each SLURM job and Dask
    worker start included)."""
    parser = argparse.ArgumentParser(
        prog="mining",
        description=(
            "Mine hard distractor images for landmark retrieval benchmarks (R1M-style). "
            + ("Stages, in pipeline order: " + ", ".join(stages.names()) + ". " if only is None else "")
            + "Run `mining STAGE --help` for each stage's options."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="STAGE")
    for stage in stages.names() if only is None else [only]:
        importlib.import_module(f"mining.stages.{stage}.cli").register(sub)
    return parser


def _verb(argv: list[str]) -> str | None:
    """The stage named by the first argument that is not a global flag, if it names one."""
    first = next((a for a in argv if a not in ("-v", "--verbose")), None)
    return first if first is not None and stages.is_stage(first) else None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_verb(argv))
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
        # faiss announces at INFO that it loaded (and which build): nothing about the user's data
        logging.getLogger("faiss.loader").setLevel(logging.WARNING)
        # Dask's own INFO chatter (and its INFO-level tracebacks when workers close) would
        # bury the stage's messages in the logs. distributed sets its logger levels from the
        # dask config when first imported (inside the stages), hence the config variable.
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    try:
        pins.check()  # one set on every CPU: stop before any work when this process cannot give it
        pins.warn_unlocked(f"mining {args.command}")
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
