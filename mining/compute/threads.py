"""Work on a thread pool, results in input order, a bounded number of items ahead.

`ThreadPoolExecutor.map` submits every item at once: memory grows with the input, and a
stop (an error, Ctrl-C) waits for every item left, since leaving the pool waits for all
that was submitted; for a release's million images that is days. `in_order` keeps `ahead`
items submitted and cancels the rest when the consumer stops, so a stop waits only for the
few items already running. `read_ahead` is the same mechanism for a generator whose next
item is the expensive part (decoding the next Parquet batch).
"""

from __future__ import annotations

import collections
import itertools
from concurrent.futures import Executor, Future, ThreadPoolExecutor
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


_END = object()


def read_ahead(items: Iterable[T], depth: int = 1) -> Iterator[T]:
    """`items` in order, each produced on a thread of its own up to `depth` items ahead, so
    that producing the next one (pyarrow decoding a Parquet batch releases the GIL) overlaps
    the work on this one. One thread calls next(): the generator never runs on two at once."""
    it = iter(items)
    with ThreadPoolExecutor(1, thread_name_prefix="read-ahead") as pool:
        for _, item in in_order(pool, lambda _: next(it, _END), itertools.repeat(None), depth + 1):
            if item is _END:
                return
            yield item
