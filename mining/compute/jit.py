"""Compiled numeric kernels: numba's njit, the one way every package compiles one (retrieval's
similarities and metrics, evaluate's tallies, ingest's number parsing)."""

from __future__ import annotations

import logging
from typing import Any, Callable

from numba import njit

log = logging.getLogger(__name__)


def compiled(fn: Callable[..., Any]) -> Any:
    """njit(nogil, cache); without a writable cache location (a read-only install and a
    read-only HOME, as in some containers) numba refuses `cache=True` outright, so compile
    on every run instead (~1 s) rather than fail."""
    try:
        return njit(nogil=True, cache=True)(fn)
    except RuntimeError as exc:
        log.debug("numba cache unavailable (%s); compiling %s on every run", exc, fn.__name__)
        return njit(nogil=True, cache=False)(fn)
