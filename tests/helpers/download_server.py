"""The download tests' Flickr server (tests/unit/stages/download/test_download.py): the scripted server
(fixtures/scripted_server.py) with the behaviours only these tests use — broken bodies,
endless streams, redirects, permanent errors, re-uploads — and a delay before every answer.

`FaultServer({id: behaviour}, delay=...)` takes a behaviour per photo id: `ok`, a name in
`BEHAVIOURS` (the scripted server's and the ones below); `ServerProcess` runs one in its own
process.
"""

from __future__ import annotations

import multiprocessing as mp
import time

from scripted_server import SCRIPTED_BEHAVIOURS, ScriptedHandler, ScriptedServer, max_per_window

BEHAVIOURS = {
    **SCRIPTED_BEHAVIOURS,
    "missing_eoi": "the JPEG without its end marker",
    "dup": "the bytes of the first `dup` photo asked for (a re-upload)",
    "error500": "500, always",
    "flaky503": "503 without Retry-After for the first 2 attempts, then served",
    "throttle_forever": "429 + Retry-After, always",
    "cut": "half the body, then the connection closes",
    "trickle": "200 bytes every 0.1 s",
    "huge_length": "200 declaring a Content-Length of 10^12, the JPEG's bytes streamed as fast as they go",
    "endless": "200 without a Content-Length, the JPEG's bytes streamed until the client hangs up",
    "redirect_same_host": "302 to the photo at /moved/... on this host (absolute URL for odd ids, relative for "
                          "even), which serves it",
    "redirect_loop": "302 to itself, always",
}
MOVED = "/moved"  # `redirect_same_host`'s target: the photo under this prefix, served as it is
STREAM_CAP = 1 << 30  # what `huge_length` and `endless` send at most, when the client never hangs up


class FaultHandler(ScriptedHandler):
    """The scripted server's answers, plus the behaviours above and the delay."""

    def _route(self, path: str) -> tuple[str, bool]:
        return (path[len(MOVED):], True) if path.startswith(MOVED + "/") else (path, False)

    def _damage(self, body: bytes, fault: str | None) -> bytes:
        return body[:-2] if fault == "missing_eoi" else super()._damage(body, fault)

    def _write_body(self, body: bytes, how: str) -> None:
        if how not in ("cut", "trickle"):
            super()._write_body(body, how)
            return
        self.close_connection = True
        try:
            if how == "trickle":
                for i in range(0, len(body), 200):
                    self.wfile.write(body[i:i + 200])
                    self.wfile.flush()
                    if self.srv.stopping.wait(0.1):
                        return
                return
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
        except OSError:
            return

    def _stream(self, body: bytes, kind: str, declare: bool) -> None:
        """200, then `body` over and over as fast as the socket takes it, until the client
        hangs up (or STREAM_CAP): with a Content-Length of 10^12 (`declare`), or none."""
        srv = self.srv
        srv.stats.record(self.client_address[0], self.path, kind, 200, time.monotonic(), self.arrived)
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "image/jpeg")
        self.send_header("Content-Length" if declare else "Connection", str(10 ** 12) if declare else "close")
        self.end_headers()
        sent = 0
        try:
            while sent < STREAM_CAP and not srv.stopping.is_set():
                self.wfile.write(body)
                sent += len(body)
        except OSError:
            return

    def _answer(self, pid: int, suffix: str | None, ext: str, kind: str, fault: str | None) -> None:
        srv = self.srv
        if srv.latency_s:
            srv.stopping.wait(srv.latency_s)
        retry_after = {"Retry-After": str(srv.faults.retry_after_s)}
        if fault == "error500":
            self._send(500, b"<html><body>error</body></html>", "text/html", kind)
        elif fault in ("redirect_same_host", "redirect_loop"):
            host = self.headers.get("Host", f"127.0.0.1:{srv.port}")
            target = self.path if fault == "redirect_loop" else MOVED + self.path
            where = f"http://{host}{target}" if pid % 2 else target
            self._send(302, b"", "text/html", kind, {"Location": where})
        elif fault in ("huge_length", "endless"):
            self._stream(srv.image_bytes(pid, 1024), kind, fault == "huge_length")
        elif fault == "throttle_forever":
            self._send(429, b"too many requests\n", "text/plain", kind, retry_after)
        elif fault == "flaky503" and srv.attempt(pid if suffix != "mirror" else -pid) <= 2:
            self._send(503, b"server error\n", "text/plain", kind)
        elif fault in ("flaky503", "dup"):
            super()._answer(srv.dup_source(pid) if fault == "dup" else pid, suffix, ext, kind, None)
        else:
            super()._answer(pid, suffix, ext, kind, fault)


class FaultServer(ScriptedServer):
    """`ScriptedServer` with the behaviours above; `delay` delays every photo answer."""

    handler = FaultHandler
    behaviours = BEHAVIOURS

    def __init__(self, behaviour: dict[int, str] | None = None, default: str = "ok", delay: float = 0.0,
                 **kwargs) -> None:
        self.latency_s = delay
        self.dup_of: int | None = None
        super().__init__(behaviour, default, **kwargs)

    def dup_source(self, photo_id: int) -> int:
        """The photo whose bytes `dup` serves: the first one asked for."""
        with self.attempts_lock:
            if self.dup_of is None:
                self.dup_of = photo_id
            return self.dup_of


class ServerProcess:
    """A FaultServer in its own process, so its request clock is not disturbed by the GIL of
    the downloaders under test (their threads decode JPEGs in the test process).

    `with ServerProcess(behaviour) as s:` gives `s.url`; `s.fetch_log()` the request log.
    """

    def __init__(self, *args, **kwargs) -> None:
        self.args, self.kwargs = args, kwargs

    def __enter__(self) -> "ServerProcess":
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve_child, args=(child, self.args, self.kwargs), daemon=True)
        self.proc.start()
        self.url = self.conn.recv()
        return self

    def fetch_log(self) -> list[tuple[float, str, int]]:
        self.conn.send("log")
        return self.conn.recv()

    def max_per_window(self, window: float = 1.0) -> int:
        return max_per_window(self.fetch_log(), window)

    def __exit__(self, *exc) -> None:
        self.conn.send("stop")
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


def _serve_child(conn, args, kwargs) -> None:
    with FaultServer(*args, **kwargs) as s:
        conn.send(s.url)
        while (msg := conn.recv()) != "stop":
            if msg == "log":
                with s.stats.lock:
                    conn.send(list(s.log))
