"""Progress bars that suit both a terminal and a log file.

Why: the workflow sends every stage's stderr to a log (Snakemake, SLURM), where tqdm's
carriage-return redraws pile up into one unreadable line of megabytes. On a terminal this
is plain tqdm; elsewhere the same bar is written as one complete line every
`MINING_PROGRESS_SECONDS` seconds (default 60), which `tail -f` and `grep` can read.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, TextIO

from tqdm import tqdm

_DEFAULT_LOG_SECONDS = 60.0


class _Lines:
    """A file for tqdm that turns each redraw into one line of its own."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, s: str) -> None:
        text = s.replace("\r", "").strip()
        if text:
            self._stream.write(text + "\n")

    def flush(self) -> None:
        self._stream.flush()


def bar(iterable: Iterable | None = None, *, total: float | None = None, desc: str = "", unit: str = "it",
        disable: bool = False, stream: TextIO | None = None, **kwargs: Any) -> Any:
    """A tqdm bar on `stream` (default stderr): redrawn in place on a terminal, a line per
    interval otherwise. Extra keyword arguments go to tqdm (initial, unit_scale, ...)."""
    stream = stream or sys.stderr
    if disable:
        return tqdm(iterable, total=total, desc=desc, unit=unit, disable=True, **kwargs)
    if stream.isatty():
        return tqdm(iterable, total=total, desc=desc, unit=unit, file=stream, dynamic_ncols=True, **kwargs)
    try:
        every = float(os.environ.get("MINING_PROGRESS_SECONDS", _DEFAULT_LOG_SECONDS))
    except ValueError:
        every = _DEFAULT_LOG_SECONDS
    kwargs.pop("mininterval", None)
    kwargs.pop("leave", None)
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=_Lines(stream), mininterval=every, maxinterval=every,
                ncols=100, ascii=True, leave=True, **kwargs)
