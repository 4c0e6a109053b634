"""Cluster-wide per-host politeness: one request schedule and one cooldown per host.

A Dask Actor holds, for every host, the earliest time the next request may start (a GCRA /
virtual-clock token bucket with no burst). Every worker thread asks it for a slot before a
request, so the limit holds across all threads, processes and machines of the cluster, not
per thread. A 429/503 pushes that time forward (the host "cools down") for everybody.

Slots are absolute wall-clock times (`time.time()`, NTP-synchronised across a cluster), not
"wait d seconds" replies: a reply that arrives late (a busy event loop) then cannot make two
requests start closer together than their slots, which is what keeps the server-side count
under the limit. Slots are spaced 5% wider than 1/R to absorb sleep overshoot and clock skew.
"""

from __future__ import annotations

import random
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any


class HostSchedule:
    """The shared state: per-host next free slot and cooldown end (lives in one Actor)."""

    def __init__(self, rps: float = 0.0) -> None:
        # Spacing of 1/R with 2% headroom: network jitter can only compress a little.
        self.interval = 1.05 / rps if rps and rps > 0 else 0.0
        self.next_free: dict[str, float] = {}
        self.cool_until: dict[str, float] = {}
        self.stopped = False

    def stop(self) -> float:
        """The run is failing (a shard raised): every later `reserve`/`cooling` answers STOPPED,
        so the other shards' threads end now instead of calling this Actor after it is gone."""
        self.stopped = True
        return 0.0

    def reserve(self, host: str, rps: float | None = None) -> float:
        """Book the next request slot for `host` (at `rps`, default the schedule's); returns its
        start time (epoch seconds), or STOPPED. Sources sharing a host share its schedule."""
        if self.stopped:
            return STOPPED
        now = time.time()
        start = max(now, self.next_free.get(host, 0.0), self.cool_until.get(host, 0.0))
        self.next_free[host] = start + (1.05 / rps if rps and rps > 0 else self.interval)
        return start

    def cooldown(self, host: str, seconds: float) -> float:
        """Nobody may send to `host` for `seconds`; returns the remaining cooldown."""
        now = time.time()
        until = max(self.cool_until.get(host, 0.0), now + seconds)
        self.cool_until[host] = until
        return until - now

    def cooling(self, host: str) -> float:
        """Seconds of cooldown left for `host` (0 when none), or STOPPED."""
        if self.stopped:
            return STOPPED
        return max(0.0, self.cool_until.get(host, 0.0) - time.time())


STOPPED = -1.0  # HostSchedule's answer once the run is stopping


class RunStopped(Exception):
    """Another shard failed and the run is stopping: this shard ends without asking for more."""


def _call(obj: Any, method: str, *args: Any) -> float:
    """Call a HostSchedule directly or through a Dask Actor proxy (which returns a future);
    RunStopped when it says the run is stopping."""
    out = getattr(obj, method)(*args)
    value = float(out.result() if hasattr(out, "result") else out)
    if value == STOPPED and method in ("reserve", "cooling"):
        raise RunStopped()
    return value


class Politeness:
    """What a downloading thread uses: wait for a slot, report throttling, back off.

    With no rate limit (rps 0) the shared schedule is only consulted on throttling and at most
    every `poll_s` for the cooldown, so the unthrottled fast path costs no round trip.
    """

    def __init__(self, schedule: Any, rps: float, poll_s: float = 0.5) -> None:
        self.schedule = schedule
        self.rps = rps
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._local_cool: dict[str, float] = {}
        self._last_poll: dict[str, float] = {}

    def wait(self, host: str) -> float:
        """Block until a request to `host` may start; returns the seconds spent waiting."""
        t0 = time.monotonic()
        if self.rps > 0:
            # A slot is only good near its time: a thread that wakes up late (busy CPU, a new
            # shard's start-up) would otherwise send together with the next slots' owners.
            late_ok = min(0.02, 0.25 / self.rps)
            while True:
                start = _call(self.schedule, "reserve", host, self.rps)
                while (delay := start - time.time()) > 0:
                    time.sleep(delay)
                if time.time() - start <= late_ok:
                    return time.monotonic() - t0
        while True:
            now = time.monotonic()
            with self._lock:
                stale = now - self._last_poll.get(host, -1e9) >= self.poll_s
                if stale:
                    self._last_poll[host] = now
            if stale:
                left = _call(self.schedule, "cooling", host)
                with self._lock:
                    self._local_cool[host] = max(self._local_cool.get(host, 0.0), time.monotonic() + left)
            with self._lock:
                left = self._local_cool.get(host, 0.0) - time.monotonic()
            if left <= 0:
                return time.monotonic() - t0
            time.sleep(min(left, self.poll_s))

    def throttled(self, host: str, retry_after: float | None, attempt: int) -> float:
        """Start (or extend) the host's cooldown after a 429/503; returns its length."""
        seconds = retry_after if retry_after is not None else backoff(attempt)
        left = _call(self.schedule, "cooldown", host, seconds)
        with self._lock:
            self._local_cool[host] = max(self._local_cool.get(host, 0.0), time.monotonic() + left)
        return left


def backoff(attempt: int, base: float = 0.5, cap: float = 60.0) -> float:
    """Exponential back-off with full jitter (AWS style): spreads retries of many workers."""
    return random.uniform(base, min(cap, base * 2 ** max(0, attempt - 1)) + base)


def parse_retry_after(value: str | None, cap: float = 600.0) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date); None if absent/invalid."""
    if not value:
        return None
    value = value.strip()
    try:
        return min(cap, max(0.0, float(value)))
    except ValueError:
        pass

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return min(cap, max(0.0, when.timestamp() - time.time()))
