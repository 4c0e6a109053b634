"""Work on a thread pool, results in input order, a bounded number of items ahead.

`ThreadPoolExecutor.map` submits every item at once: memory grows with the input, and a
stop (an error, Ctrl-C) waits for every item left, since leaving the pool waits for all
that was submitted; for a release's million images that is days. `in_order` keeps `ahead`
items submitted and cancels the rest when the consumer stops, so a stop waits only for the
few items already running.
"""

from __future__ import annotations

import collections
from concurrent.futures import Executor, Future
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def in_order(pool: Executor, fn: Callable[[T], R], items: Iterable[T], ahead: int) -> Iterator[tuple[T, R]]:
    """(item, fn(item)) for every item, in input order, at most `ahead` (≥ 1) submitted and
    not yet handed out. An exception of fn(item) is raised when that item's turn comes."""
    pending: collections.deque[tuple[T, Future[R]]] = collections.deque()
    try:
        for item in items:
            pending.append((item, pool.submit(fn, item)))
            if len(pending) >= max(1, ahead):
                done, fut = pending.popleft()
                yield done, fut.result()
        while pending:
            done, fut = pending.popleft()
            yield done, fut.result()
    finally:
        for _, fut in pending:  # not started yet: never started
            fut.cancel()
