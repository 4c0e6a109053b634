"""Worker plugins for the clusters `mining.compute.cluster` starts (a module of its own so that
importing `mining.compute.cluster` does not import distributed).

`QuietClose`: a worker that closes while its heartbeat to the scheduler is in flight closes
its own connection pool under that heartbeat, and distributed logs the resulting
CommClosedError as an ERROR with a traceback ("Failed to communicate with scheduler during
heartbeat."). It is harmless at shutdown, but it lands in every stage's log as a traceback,
where it reads as a failure and hides real ones. The plugin drops that one message while
the worker is closing; the same message from a running worker is kept.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from distributed import WorkerPlugin
from distributed.core import Status

_HEARTBEAT_FAILED = "Failed to communicate with scheduler during heartbeat."
_CLOSING = frozenset({Status.closing, Status.closing_gracefully, Status.closed})


class _HeartbeatAtClose(logging.Filter):
    def __init__(self, worker: Any) -> None:
        super().__init__()
        self._worker = weakref.ref(worker)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _HEARTBEAT_FAILED:
            return True
        worker = self._worker()
        return worker is not None and worker.status not in _CLOSING


class QuietClose(WorkerPlugin):
    """Drops the heartbeat traceback of a worker that is closing (see the module's docstring)."""

    name = "mining-quiet-close"

    def setup(self, worker: Any) -> None:
        self._filter = _HeartbeatAtClose(worker)
        logging.getLogger("distributed.worker").addFilter(self._filter)
        # No teardown that removes it: a closing worker tears its plugins down before it
        # closes its connections, which is when the message comes.
