"""A small fault-injecting Flickr-like image server for the download tests (tests/unit/test_download.py)
and benchmark (benchmarks/download.py).

Each photo id is given a behaviour (`ok`, `not_found`, `placeholder_redirect`, `truncated`,
`throttle_once`, ...). The server answers `/{server}/{id}_{secret}_b.jpg` accordingly and
records every request (time, path, code), so tests can check politeness from its side.
"""

from __future__ import annotations

import io
import re
import threading
import time
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from PIL import Image

PATH = re.compile(r"^/(\d+)/(\d+)_(\w+)_([bo])\.(\w+)$")
PLACEHOLDER_HOST_URL = "https://s.yimg.com/pw/images/en-us/photo_unavailable.png"


@lru_cache(maxsize=8)
def jpeg(width: int = 1024, height: int = 768, seed: int = 0, quality: int = 85) -> bytes:
    """A photo-like JPEG (smooth gradients + mild noise, ~100-200 kB at 1024 px)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([128 + 90 * np.sin(x / (40 + 10 * c) + y / (70 + 7 * c) + seed) for c in range(3)], -1)
    arr = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def unique(data: bytes, tag: int) -> bytes:
    """Same picture, different bytes: a JPEG comment segment right after SOI."""
    text = f"photo {tag}".encode()
    return data[:2] + b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text + data[2:]


@lru_cache(maxsize=2)
def png(width: int = 1024, height: int = 768) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 200, 200)).save(buf, "PNG")
    return buf.getvalue()


class FaultServer:
    """Context manager: `with FaultServer({id: kind}) as s: s.url ...`; `s.log` has requests."""

    def __init__(self, behaviour: dict[int, str] | None = None, default: str = "ok", delay: float = 0.0,
                 rate_limit: float | None = None, retry_after: str = "1",
                 placeholder_url: str = PLACEHOLDER_HOST_URL, port: int = 0, slow_s: float = 1.0,
                 stall_s: float = 20.0) -> None:
        self.behaviour = behaviour or {}
        self.slow_s = slow_s  # `slow`: the answer starts after this long (a slow host)
        self.stall_s = stall_s  # `stall`: the body stops after 1000 bytes for this long
        self.default = default
        self.delay = delay
        self.rate_limit = rate_limit  # requests/s over a sliding 1 s window, else 429
        self.retry_after = retry_after
        self.placeholder_url = placeholder_url  # Flickr's is on another host
        self.port = port
        self.log: list[tuple[float, str, int]] = []
        self.seen: dict[str, int] = {}
        self.placeholder_jpeg = unique(jpeg(1024, 768, seed=9), -1)
        jpeg(), jpeg(500, 375), png()  # warm the caches: no request should pay for rendering
        self._lock = threading.Lock()

    def __enter__(self) -> "FaultServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                server._handle(self)

        class Quiet(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # clients hang up on stalls: fine
                pass

        self.httpd = Quiet(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def codes(self, path_part: str = "") -> list[int]:
        return [c for _, p, c in self.log if path_part in p]

    def max_per_window(self, window: float = 1.0) -> int:
        """Most requests the server saw in any half-open window of `window` seconds."""
        t = sorted(x for x, _, _ in self.log)
        best, j = 0, 0
        for i in range(len(t)):
            while t[i] - t[j] >= window:
                j += 1
            best = max(best, i - j + 1)
        return best

    def _record(self, path: str, code: int, t: float) -> None:
        with self._lock:
            self.log.append((t, path, code))

    def _send(self, h, code: int, body: bytes = b"", ctype: str = "image/jpeg", headers: dict | None = None,
              length: int | None = None) -> None:
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body) if length is None else length))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def _handle(self, h) -> None:
        t = time.monotonic()
        m = PATH.match(h.path)
        if h.path.startswith("/images/photo_unavailable"):
            self._record(h.path, 200, t)
            return self._send(h, 200, png(500, 375), "image/png")
        if not m:
            self._record(h.path, 404, t)
            return self._send(h, 404, b"no", "text/plain")
        pid = int(m.group(2))
        kind = self.behaviour.get(pid, self.default)
        with self._lock:
            n = self.seen[h.path] = self.seen.get(h.path, 0) + 1
            if self.rate_limit is not None:
                recent = sum(1 for x, _, c in self.log if x > t - 1.0)
                if recent >= self.rate_limit:
                    self.log.append((t, h.path, 429))
                    return self._send(h, 429, b"slow down", "text/plain", {"Retry-After": self.retry_after})
        if self.delay:
            time.sleep(self.delay)
        if kind == "slow":
            time.sleep(self.slow_s)
        code, body, ctype, headers, length = 200, unique(jpeg(), pid), "image/jpeg", {}, None
        if kind in ("not_found", "gone", "forbidden"):
            code, body, ctype = {"not_found": 404, "gone": 410, "forbidden": 403}[kind], b"x", "text/plain"
        elif kind == "placeholder_redirect":
            code, body, headers = 302, b"", {"Location": self.placeholder_url}
        elif kind == "placeholder_same_host":
            code, body, headers = 302, b"", {"Location": "/images/photo_unavailable.png"}
        elif kind == "placeholder_hash":
            body = self.placeholder_jpeg
        elif kind == "dup":
            body = jpeg()
        elif kind == "small":
            body = unique(jpeg(500, 375), pid)
        elif kind == "truncated":
            body = body[: len(body) * 3 // 5]
        elif kind == "missing_eoi":
            body = body[:-2]
        elif kind == "png":
            body, ctype = png(), "image/png"
        elif kind == "html":
            body, ctype = b"<html><body>photo unavailable</body></html>", "text/html"
        elif kind == "error500":
            code, body, ctype = 500, b"oops", "text/plain"
        elif kind == "throttle_once" and n == 1:
            code, body, ctype, headers = 429, b"slow", "text/plain", {"Retry-After": self.retry_after}
        elif kind == "flaky503" and n <= 2:
            code, body, ctype = 503, b"busy", "text/plain"
        elif kind == "throttle_forever":
            code, body, ctype, headers = 429, b"slow", "text/plain", {"Retry-After": self.retry_after}
        elif kind in ("stall", "cut"):
            self._record(h.path, 200, t)
            h.send_response(200)
            h.send_header("Content-Type", "image/jpeg")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body[:1000])
            h.wfile.flush()
            if kind == "stall":
                time.sleep(self.stall_s)
            h.close_connection = True
            return
        elif kind == "trickle":
            self._record(h.path, 200, t)
            h.send_response(200)
            h.send_header("Content-Type", "image/jpeg")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            try:
                for i in range(0, len(body), 200):
                    h.wfile.write(body[i:i + 200])
                    h.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
            h.close_connection = True
            return
        self._record(h.path, code, t)
        self._send(h, code, body, ctype, headers, length)


class ServerProcess:
    """A FaultServer in its own process, so its request clock is not disturbed by the GIL of
    the downloaders under test (their threads decode JPEGs in the test process).

    `with ServerProcess(behaviour) as s:` gives `s.url`; `s.fetch_log()` the request log.
    """

    def __init__(self, *args, **kwargs) -> None:
        self.args, self.kwargs = args, kwargs

    def __enter__(self) -> "ServerProcess":
        import multiprocessing as mp

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
        server = FaultServer()
        server.log = self.fetch_log()
        return server.max_per_window(window)

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
                with s._lock:
                    conn.send(list(s.log))
