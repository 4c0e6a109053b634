"""A Flickr-like image server for a demo world, with deterministic, realistic faults.

URL patterns are Flickr's (`/{server}/{id}_{secret}_b.jpg`, `/{server}/{id}_{secret}.jpg`,
`/{server}/{id}_{secretoriginal}_o.{ext}`) so the downloader builds real Flickr URLs and
only the host differs. Each photo's fault is a pure function of (world seed, photo id), so a
test can predict exactly which photos fail and how; transient faults (429, 500/503) clear
after a fixed number of attempts, so a polite retry succeeds. `/_stats` reports what was
served and the highest request rate seen per client, so tests can assert politeness.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PLACEHOLDER_PATH = "/images/photo_unavailable.png"
_URL = re.compile(r"^/(\d+)/(\d+)_([0-9a-f]+)(?:_([a-z0-9]+))?\.([a-z0-9]+)$")


@dataclass(frozen=True)
class Faults:
    """Share of photos answered with each fault (deterministic per photo), and their timings."""

    not_found: float = 0.0
    gone: float = 0.0
    forbidden: float = 0.0
    placeholder: float = 0.0  # 302 to a placeholder PNG, like a deleted Flickr photo
    throttle: float = 0.0  # 429 + Retry-After, then OK
    server_error: float = 0.0  # 500 or 503, then OK
    slow: float = 0.0  # answers after `slow_s`
    stall: float = 0.0  # sends half the body, then hangs for `stall_s`
    truncated: float = 0.0  # a cut JPEG with a consistent Content-Length
    wrong_type: float = 0.0  # a PNG or an HTML page with 200
    small: float = 0.0  # a valid JPEG below 1024 px
    transient_attempts: int = 1  # how many attempts a transient fault fails before success
    retry_after_s: int = 1
    slow_s: float = 0.3
    stall_s: float = 30.0

    ORDER = ("not_found", "gone", "forbidden", "placeholder", "throttle", "server_error", "slow", "stall",
             "truncated", "wrong_type", "small")

    def __post_init__(self) -> None:
        total = sum(getattr(self, n) for n in self.ORDER)
        if any(getattr(self, n) < 0 for n in self.ORDER) or total > 1.0 + 1e-9:
            raise ValueError(f"fault rates must be ≥ 0 and sum to ≤ 1 (sum is {total:.3f})")

    @classmethod
    def from_rates(cls, rates: dict[str, float], **kw: Any) -> "Faults":
        known = {f.name for f in fields(cls)}
        unknown = set(rates) - known
        if unknown:
            raise ValueError(f"unknown fault(s): {', '.join(sorted(unknown))}")
        return cls(**{**rates, **kw})


def fault_for(seed: int, photo_id: int, faults: Faults) -> str | None:
    """The fault a photo always gets (None = served correctly): a hash picks a point in [0, 1)."""
    h = hashlib.sha256(f"{seed}:{photo_id}".encode()).digest()
    u = int.from_bytes(h[:8], "big") / 2**64
    acc = 0.0
    for name in Faults.ORDER:
        acc += getattr(faults, name)
        if u < acc:
            return name
    return None


def _placeholder_png() -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (500, 374), (240, 240, 240))
    d = ImageDraw.Draw(img)
    d.rectangle([150, 110, 350, 260], outline=(180, 180, 180), width=6)
    d.text((170, 280), "This photo is no longer available", fill=(120, 120, 120))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@dataclass
class _Stats:
    lock: threading.Lock = field(default_factory=threading.Lock)
    total: int = 0
    by_status: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    by_kind: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    by_path: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    by_fault: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    windows: dict[str, deque] = field(default_factory=lambda: defaultdict(deque))
    max_rate: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    rate_limited: int = 0

    def record(self, client: str, path: str, kind: str, status: int, now: float) -> None:
        with self.lock:
            self.total += 1
            self.by_status[str(status)] += 1
            self.by_kind[kind][str(status)] += 1
            self.by_path[path][str(status)] += 1
            w = self.windows[client]
            w.append(now)
            while w and w[0] <= now - 1.0:
                w.popleft()
            self.max_rate[client] = max(self.max_rate[client], len(w))

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": self.total,
                "by_status": dict(sorted(self.by_status.items())),
                "by_kind": {k: dict(sorted(v.items())) for k, v in sorted(self.by_kind.items())},
                "by_path": {k: dict(sorted(v.items())) for k, v in sorted(self.by_path.items())},
                "faults_served": dict(sorted(self.by_fault.items())),
                "max_requests_per_second": dict(sorted(self.max_rate.items())),
                "rate_limited": self.rate_limited,
            }


class _TokenBucket:
    """Per-client token bucket: `rate` requests/s sustained, `burst` at once."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.state: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def take(self, client: str, now: float) -> bool:
        with self.lock:
            tokens, last = self.state.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            ok = tokens >= 1.0
            self.state[client] = (tokens - 1.0 if ok else tokens, now)
            return ok


class _QuietServer(ThreadingHTTPServer):
    """Clients that give up (deadlines, resets) are normal here, not server errors."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class DemoServer:
    """A threaded HTTP/1.1 server over a built world; use as a context manager in tests.

    >>> with DemoServer(world_dir, port=0, faults=Faults(not_found=0.1)) as srv:
    ...     requests.get(srv.url + "/123/456_abcdef0123_b.jpg")
    """

    def __init__(self, world: str | Path, port: int = 0, faults: Faults | None = None,
                 rate_limit: float | None = 0.0, burst: float | None = None, host: str = "127.0.0.1") -> None:
        import pyarrow.parquet as pq

        self.root = Path(world)
        meta_path = self.root / "world.json"
        if not meta_path.is_file():
            from mining.errors import UserError

            raise UserError(f"{self.root}: not a demo world (no world.json; run `mining demo build` first)")
        self.meta = json.loads(meta_path.read_text())
        self.seed = int(self.meta["seed"])
        self.faults = faults if faults is not None else Faults.from_rates(self.meta.get("faults", {}))
        tab = pq.read_table(self.root / "images" / "index.parquet").to_pydict()
        self.photos = {int(pid): (int(srv), sec, seco, ext) for pid, srv, sec, seco, ext in zip(
            tab["photo_id"], tab["server"], tab["secret"], tab["secret_original"], tab["extension"])}
        self.stats = _Stats()
        self.bucket = _TokenBucket(rate_limit, burst or max(1.0, 2 * rate_limit)) if rate_limit else None
        self.attempts: dict[int, int] = defaultdict(int)
        self.attempts_lock = threading.Lock()
        self.stopping = threading.Event()
        self.placeholder = _placeholder_png()
        self._small: dict[tuple[int, int], bytes] = {}
        self._httpd = _QuietServer((host, port), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "DemoServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # releases stalled responses
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "DemoServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stats_snapshot(self) -> dict[str, Any]:
        return self.stats.snapshot()

    def fault_of(self, photo_id: int) -> str | None:
        return fault_for(self.seed, photo_id, self.faults)

    def image_bytes(self, photo_id: int, max_side: int | None) -> bytes:
        """The stored JPEG, or a downscaled copy whose long side is `max_side` (cached)."""
        raw = (self.root / "images" / f"{photo_id}.jpg").read_bytes()
        if max_side is None:
            return raw
        key = (photo_id, max_side)
        if key not in self._small:
            from PIL import Image

            img = Image.open(io.BytesIO(raw))
            if max(img.size) <= max_side:
                return raw
            s = max_side / max(img.size)
            img = img.convert("RGB").resize((max(1, round(img.width * s)), max(1, round(img.height * s))))
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=88)
            if len(self._small) > 4096:
                self._small.clear()
            self._small[key] = buf.getvalue()
        return self._small[key]


def _make_handler(srv: DemoServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "DemoFlickr/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: /_stats has the counts
            return

        def _send(self, status: int, body: bytes, ctype: str, kind: str, extra: dict[str, str] | None = None,
                  length: int | None = None) -> None:
            srv.stats.record(self.client_address[0], self.path, kind, status, time.monotonic())
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            now = time.monotonic()
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
            m = _URL.match(path)
            photo = srv.photos.get(int(m.group(2))) if m else None
            if m is None or photo is None:
                self._send(404, b"not found\n", "text/plain", "unknown")
                return
            server_id, secret, secret_o, ext = photo
            pid, sec, suffix, req_ext = int(m.group(2)), m.group(3), m.group(4), m.group(5)
            want_secret, want_ext = (secret_o, ext) if suffix == "o" else (secret, "jpg")
            if int(m.group(1)) != server_id or sec != want_secret or req_ext != want_ext or suffix not in (None, "b", "o"):
                self._send(404, b"not found\n", "text/plain", "bad_url")
                return
            kind = {"b": "large", "o": "original", None: "medium"}[suffix]
            fault = srv.fault_of(pid)
            if fault is not None:
                with srv.stats.lock:
                    srv.stats.by_fault[fault] += 1
            if fault in ("not_found", "gone", "forbidden"):
                code = {"not_found": 404, "gone": 410, "forbidden": 403}[fault]
                self._send(code, b"<html><body>error</body></html>", "text/html", kind)
                return
            if fault == "placeholder":
                host = self.headers.get("Host", f"127.0.0.1:{srv.port}")
                self._send(302, b"", "text/html", kind, {"Location": f"http://{host}{PLACEHOLDER_PATH}"})
                return
            if fault in ("throttle", "server_error"):
                with srv.attempts_lock:
                    srv.attempts[pid] += 1
                    n = srv.attempts[pid]
                if n <= srv.faults.transient_attempts:
                    if fault == "throttle":
                        self._send(429, b"too many requests\n", "text/plain", kind,
                                   {"Retry-After": str(srv.faults.retry_after_s)})
                    else:
                        code = 503 if pid % 2 else 500
                        self._send(code, b"server error\n", "text/plain", kind,
                                   {"Retry-After": str(srv.faults.retry_after_s)} if code == 503 else None)
                    return
            max_side = {"b": 1024, None: 500, "o": None}[suffix]
            if fault == "small":
                max_side = 640 if max_side is None else min(max_side, 640)
            body = srv.image_bytes(pid, max_side)
            ctype = "image/jpeg"
            if suffix == "o" and ext == "png":
                from PIL import Image

                buf = io.BytesIO()
                Image.open(io.BytesIO(body)).save(buf, format="PNG")
                body, ctype = buf.getvalue(), "image/png"
            if fault == "slow":
                srv.stopping.wait(srv.faults.slow_s)
            elif fault == "truncated":
                body = body[: len(body) // 2]
            elif fault == "wrong_type":
                if pid % 2:
                    body, ctype = srv.placeholder, "image/png"
                else:
                    body, ctype = b"<html><head><title>Flickr</title></head><body>Oops</body></html>", "text/html"
            elif fault == "stall":
                srv.stats.record(self.client_address[0], self.path, kind, 200, time.monotonic())
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                except OSError:
                    return
                srv.stopping.wait(srv.faults.stall_s)
                self.close_connection = True
                return
            self._send(200, body, ctype, kind)

    return Handler


def serve_forever(world: str | Path, port: int = 8765, fault_overrides: dict[str, float] | None = None,
                  no_faults: bool = False, rate_limit: float | None = None,
                  command: list[str] | None = None) -> int:
    """CLI entry: serve until Ctrl-C; or, given a command, serve only while it runs.

    With a command, `{host}` in its arguments becomes the server's base URL and its exit
    code is returned: that is how the workflow downloads from the demo world (the server's
    life is tied to the download's, and its /_stats summary lands in the same log).
    """
    import subprocess

    root = Path(world)
    meta = json.loads((root / "world.json").read_text()) if (root / "world.json").is_file() else {}
    rates = {} if no_faults else {**meta.get("faults", {}), **(fault_overrides or {})}
    try:
        faults = Faults.from_rates(rates)
    except ValueError as exc:
        from mining.errors import UserError

        raise UserError(str(exc)) from None
    srv = DemoServer(root, port=port, faults=faults,
                     rate_limit=meta.get("rate_limit_rps", 0.0) if rate_limit is None else rate_limit)
    print(f"serving {root} at {srv.url} (stats at {srv.url}/_stats)" + ("" if command else "; Ctrl-C to stop"),
          flush=True)
    srv.start()
    try:
        if command:
            argv = [a.replace("{host}", srv.url) for a in command]
            code = subprocess.call(argv)
            print("demo server stats: " + json.dumps(srv.stats_snapshot(), sort_keys=True), flush=True)
            return code
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 130
    finally:
        srv.stop()
