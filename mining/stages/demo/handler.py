"""The demo server's HTTP handler (mining/stages/demo/fake_flickr.py's `FlickrServer` holds the state):
Flickr's URL patterns, the Multimedia Commons mirror's layout, `/_stats`, and how each of the
demo's faults is answered. A scripted server (fixtures/scripted_server.py, tests/helpers/)
subclasses `Handler` for behaviours of its own; `_route`, `_answer`, `_damage` and
`_write_body` are its hooks."""

from __future__ import annotations

import io
import json
import re
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from PIL import Image

PLACEHOLDER_PATH = "/images/photo_unavailable.png"
_URL = re.compile(r"^/(\d+)/(\d+)_([0-9a-f]+)(?:_([a-z0-9]+))?\.([a-z0-9]+)$")
# the Multimedia Commons mirror's layout: /data/images/<h[0:3]>/<h[3:6]>/<h>.jpg (h: the photo hash)
_MIRROR_URL = re.compile(r"^/data/images/([0-9a-f]{3})/([0-9a-f]{3})/([0-9a-f]{16,32})\.jpg$")
MIRROR_SIDE = 500  # the mirror's copies: ~500 px long side
MIRROR_SMALL_SIDE = 200  # its `small` fault: below any sensible min_size
FINAL = {"not_found": 404, "gone": 410, "forbidden": 403}
_HTML = b"<html><head><title>Flickr</title></head><body>Oops</body></html>"


def make_handler(srv: Any, base: type["Handler"] | None = None) -> type["Handler"]:
    """The request handler class of one FlickrServer `srv` (`base`: `Handler` or a subclass)."""
    return type("Handler", (base or Handler,), {"srv": srv})


class Handler(BaseHTTPRequestHandler):
    """Answers one request of the server `srv` (set by `make_handler`)."""

    srv: Any
    protocol_version = "HTTP/1.1"
    server_version = "DemoFlickr/1.0"
    arrived = 0.0

    def log_message(self, format: str, *args: Any) -> None:  # quiet: /_stats has the counts
        return

    def _send(self, status: int, body: bytes, ctype: str, kind: str, extra: dict[str, str] | None = None,
              how: str = "whole") -> None:
        """Answer, and count it; `how` the body is sent (`_write_body`)."""
        self.srv.stats.record(self.client_address[0], self.path, kind, status, time.monotonic(), self.arrived)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        self._write_body(body, how)

    def _write_body(self, body: bytes, how: str) -> None:
        """The whole body, or (`stall`) half of it and then nothing for `stall_s`."""
        if how != "stall":
            self.wfile.write(body)
            return
        self.close_connection = True
        try:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
        except OSError:
            return
        self.srv.stopping.wait(self.srv.faults.stall_s)

    def do_HEAD(self) -> None:
        self.do_GET()

    def _route(self, path: str) -> tuple[str, bool]:
        """The photo path a request path names, and whether it is served as it is (no behaviour)."""
        return path, False

    def do_GET(self) -> None:
        srv = self.srv
        now = self.arrived = time.monotonic()
        path = self.path.split("?", 1)[0]
        if path == "/_stats":
            body = json.dumps(srv.stats_snapshot(), sort_keys=True).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if srv.bucket is not None and not srv.bucket.take(self.client_address[0], now):
            with srv.stats.lock:
                srv.stats.rate_limited += 1
            self._send(429, b"rate limited\n", "text/plain", "rate_limited", {"Retry-After": "1"})
            return
        if path == PLACEHOLDER_PATH:
            self._send(200, srv.placeholder, "image/png", "placeholder")
            return
        mm = _MIRROR_URL.match(path)
        if mm is not None or path.startswith("/data/"):
            h = mm.group(3) if mm else ""
            pid_m = srv.mirror_photo(h) if mm and (mm.group(1), mm.group(2)) == (h[:3], h[3:6]) else None
            if pid_m is None:
                self._send(404, b"<Error><Code>NoSuchKey</Code></Error>", "application/xml", "mirror")
                return
            fault = srv.mirror_behaviour_of(pid_m)
            if fault is not None:
                with srv.stats.lock:
                    srv.stats.by_fault["mirror:" + fault] += 1
            self._answer(pid_m, "mirror", "jpg", "mirror", fault)
            return
        path, as_is = self._route(path)
        m = _URL.match(path)
        pid, suffix, ext = (int(m.group(2)), m.group(4), m.group(5)) if m else (0, None, "")
        problem = "unknown" if m is None else srv.url_problem(pid, int(m.group(1)), m.group(3), suffix, ext)
        if problem is None and suffix not in (None, "b", "o"):
            problem = "bad_url"
        if problem is not None:
            self._send(404, b"not found\n", "text/plain", problem)
            return
        kind = {"b": "large", "o": "original", None: "medium"}[suffix]
        fault = None if as_is else srv.behaviour_of(pid)
        if fault is not None:
            with srv.stats.lock:
                srv.stats.by_fault[fault] += 1
        self._answer(pid, suffix, ext, kind, fault)

    def _damage(self, body: bytes, fault: str | None) -> bytes:
        """A photo's bytes as the fault sends them (`truncated`: the first half)."""
        return body[: len(body) // 2] if fault == "truncated" else body

    def _answer(self, pid: int, suffix: str | None, ext: str, kind: str, fault: str | None) -> None:
        srv = self.srv
        f = srv.faults
        retry_after = {"Retry-After": str(f.retry_after_s)}
        if fault == "wrong_type":
            fault = "png" if pid % 2 else "html"
        if fault in FINAL:
            self._send(FINAL[fault], b"<html><body>error</body></html>", "text/html", kind)
            return
        if fault == "placeholder" and suffix == "mirror":  # the mirror stored a placeholder
            fault = "placeholder_hash"
        if fault == "placeholder":
            host = self.headers.get("Host", f"127.0.0.1:{srv.port}")
            self._send(302, b"", "text/html", kind, {"Location": f"http://{host}{PLACEHOLDER_PATH}"})
            return
        if fault in ("throttle", "server_error") and \
                srv.attempt(pid if suffix != "mirror" else -pid) <= f.transient_attempts:
            if fault == "throttle":
                self._send(429, b"too many requests\n", "text/plain", kind, retry_after)
            else:
                code = 503 if pid % 2 else 500
                self._send(code, b"server error\n", "text/plain", kind, retry_after if code == 503 else None)
            return
        if fault == "png":
            body, ctype = srv.placeholder, "image/png"
        elif fault == "html":
            body, ctype = _HTML, "text/html"
        elif fault == "placeholder_hash":
            body, ctype = srv.placeholder_jpeg, "image/jpeg"
        else:
            max_side = {"b": 1024, None: 500, "o": None, "mirror": MIRROR_SIDE}[suffix]
            if fault == "small":
                max_side = MIRROR_SMALL_SIDE if suffix == "mirror" else 640 if max_side is None else min(max_side, 640)
            body = srv.image_bytes(pid, max_side)
            ctype = "image/jpeg"
            if suffix == "o" and ext == "png":
                buf = io.BytesIO()
                Image.open(io.BytesIO(body)).save(buf, format="PNG")
                body, ctype = buf.getvalue(), "image/png"
            body = self._damage(body, fault)
        if fault == "slow":
            srv.stopping.wait(f.slow_s)
        self._send(200, body, ctype, kind, how=fault or "whole")
