"""Commands printed for a person to paste: they must work in a fresh shell, as printed.

`mining` is usually installed in the project's virtualenv, which a fresh shell has not
activated, so a printed command names the `mining` beside the running Python (relative to
the current folder when it is under it: `.venv/bin/mining ...`), and every argument is
quoted as the shell needs.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path


def mining_executable() -> str:
    """The `mining` script beside this Python, as a path that works from the current folder."""
    exe = Path(sys.executable).parent / "mining"
    if not exe.is_file():
        return "mining"  # not a virtualenv layout: the one on PATH
    try:
        rel = exe.relative_to(Path.cwd())
    except ValueError:
        return str(exe)
    return str(rel) if os.sep in str(rel) else f".{os.sep}{rel}"


def mining_command(*args: str | os.PathLike) -> str:
    """`mining ARGS...` as one line a fresh shell runs as is."""
    return " ".join([shlex.quote(mining_executable()), *(shlex.quote(str(a)) for a in args)])
