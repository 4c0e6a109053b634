"""Running the review app with uvicorn: in the foreground (`mining review serve`) or in a thread
of this process (tests, the demo). Who may connect is `mining.stages.review.access`."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Iterator


def serve(app: Any, host: str, port: int) -> None:
    """Run until interrupted (the CLI's `serve`)."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False, lifespan="off")


@contextlib.contextmanager
def running(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """A real uvicorn server on a free port in a background thread; yields its base URL."""
    import uvicorn

    # port=0 lets the OS pick a free port; read it back from the listening socket. (Passing a
    # pre-bound socket via `sockets=` makes every keep-alive request ~40 ms slower.)
    config = uvicorn.Config(app, host=host, port=0, log_level="warning", access_log=False,
                            lifespan="off", timeout_keep_alive=30)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("review server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
