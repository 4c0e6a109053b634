"""A Flickr-like image server with deterministic, realistic faults: the demo's.

URL patterns are Flickr's (`/{server}/{id}_{secret}_b.jpg`, `/{server}/{id}_{secret}.jpg`,
`/{server}/{id}_{secretoriginal}_o.{ext}`) so the downloader builds real Flickr URLs and
only the host differs. `FlickrServer` is the HTTP machinery: the demo's behaviours
(`BEHAVIOURS`), the per-client rate limit, `/_stats` (what was served and the highest request
rate seen per client, so tests can assert politeness) and, when asked, a log of every request.
`DemoServer` serves a built demo world: each photo's fault is a pure function of (world seed,
photo id), so a test can predict exactly which photos fail and how; transient faults (429,
500/503) clear after a fixed number of attempts, so a polite retry succeeds. The download
tests and benchmark script a behaviour per photo over generated JPEGs, with more behaviours
than the demo's (fixtures/scripted_server.py, tests/helpers/download_server.py).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import subprocess
import sys
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field, fields
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from PIL import Image, ImageDraw

from mining.files.names import IMAGE_INDEX, WORLD
from mining.stages.demo.handler import Handler, make_handler
from mining.errors import UserError
from mining.photos.flickr import yfcc_hash

# The demo mirror's faults unless world.json says otherwise (`mirror_faults`): a share of photos
# it lacks (404; gone on Flickr too for some), and too-small copies.
DEFAULT_MIRROR_FAULTS = {"not_found": 0.1, "small": 0.03}


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


def fault_for(seed: int, photo_id: int, faults: Faults, salt: str = "") -> str | None:
    """The fault a photo always gets (None = served correctly): a hash picks a point in [0, 1).
    `salt` draws another, independent fault mix (the mirror's: "mirror:")."""
    h = hashlib.sha256(f"{seed}:{salt}{photo_id}".encode()).digest()
    u = int.from_bytes(h[:8], "big") / 2**64
    acc = 0.0
    for name in Faults.ORDER:
        acc += getattr(faults, name)
        if u < acc:
            return name
    return None


# Every behaviour `Handler` answers; the demo's fault mix (`Faults`) draws the first eleven, a
# scripted server (a behaviour map, as in the download tests) may use any, and adds its own
# (fixtures/scripted_server.py). No behaviour: served.
BEHAVIOURS = {
    "not_found": "404",
    "gone": "410",
    "forbidden": "403",
    "placeholder": "302 to this server's placeholder PNG, like a deleted Flickr photo",
    "throttle": "429 + Retry-After for the first `transient_attempts` attempts, then served",
    "server_error": "500 (even id) or 503 + Retry-After (odd id) for the first `transient_attempts` attempts, "
                    "then served",
    "slow": "served after `slow_s`",
    "stall": "half the body, then nothing for `stall_s`",
    "truncated": "half the image, with a consistent Content-Length",
    "wrong_type": "200 with `png` (odd id) or `html` (even id)",
    "small": "a valid JPEG at most 640 px",
    "placeholder_hash": "200 with the placeholder as a JPEG (`placeholder_jpeg`: known bytes)",
    "png": "200 with the placeholder PNG",
    "html": "200 with an HTML page",
}
assert set(Faults.ORDER) <= set(BEHAVIOURS)


def _placeholder_png() -> bytes:
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
    log: list[tuple[float, str, int]] | None = None  # (arrival time, path, status) of each request, if kept

    def record(self, client: str, path: str, kind: str, status: int, now: float, arrived: float) -> None:
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
            if self.log is not None:
                self.log.append((arrived, path, status))

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
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class FlickrServer:
    """A threaded HTTP/1.1 Flickr-like server; use as a context manager. A subclass says which
    URLs name a photo (`url_problem`), each photo's bytes (`image_bytes`) and its behaviour
    (`behaviour_of`: a `BEHAVIOURS` name, or None to serve it correctly), and may answer more
    behaviours with a `handler` of its own (a subclass of `mining.stages.demo.handler.Handler`).

    `faults` gives the timings (`slow_s`, `stall_s`, `retry_after_s`, `transient_attempts`);
    `keep_log` keeps every request in `stats.log`.
    """

    handler: type[Handler] = Handler

    def __init__(self, port: int = 0, faults: Faults | None = None, rate_limit: float | None = 0.0,
                 burst: float | None = None, host: str = "127.0.0.1", keep_log: bool = False) -> None:
        self.faults = faults if faults is not None else Faults()
        self.stats = _Stats(log=[] if keep_log else None)
        self.bucket = _TokenBucket(rate_limit, burst or max(1.0, 2 * rate_limit)) if rate_limit else None
        self.attempts: dict[int, int] = defaultdict(int)
        self.attempts_lock = threading.Lock()
        self.stopping = threading.Event()
        self.placeholder = _placeholder_png()
        self._httpd = _QuietServer((host, port), make_handler(self, self.handler))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    def url_problem(self, photo_id: int, server: int, secret: str, suffix: str | None, ext: str) -> str | None:
        """None if the URL names a photo, else the stats kind of its 404 (`unknown`, `bad_url`)."""
        raise NotImplementedError

    def image_bytes(self, photo_id: int, max_side: int | None) -> bytes:
        """The photo as a JPEG whose long side is at most `max_side` (None: the original)."""
        raise NotImplementedError

    def behaviour_of(self, photo_id: int) -> str | None:
        raise NotImplementedError

    def mirror_photo(self, photo_hash: str) -> int | None:
        """The photo the mirror keeps under this hash (None: 404, as the mirror answers)."""
        return None

    def mirror_behaviour_of(self, photo_id: int) -> str | None:
        """The photo's behaviour on the mirror (`placeholder` there: 200 with the placeholder JPEG)."""
        return None

    @functools.cached_property
    def placeholder_jpeg(self) -> bytes:
        buf = io.BytesIO()
        Image.open(io.BytesIO(self.placeholder)).convert("RGB").save(buf, format="JPEG", quality=90)
        return buf.getvalue()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FlickrServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # releases stalled responses
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stats_snapshot(self) -> dict[str, Any]:
        return self.stats.snapshot()

    def attempt(self, photo_id: int) -> int:
        """Count one more attempt at a photo with a transient fault; returns how many so far."""
        with self.attempts_lock:
            self.attempts[photo_id] += 1
            return self.attempts[photo_id]


class DemoServer(FlickrServer):
    """The server over a built world, each photo's fault drawn by `fault_for`; it is the
    Multimedia Commons mirror too (`/data/images/...` by the photo hash of the metadata's download
    URL), with its own faults (`mirror_faults`, drawn independently per photo: photos gone
    on Flickr are there unless the mirror lacks them too).

    >>> with DemoServer(world_dir, port=0, faults=Faults(not_found=0.1)) as srv:
    ...     requests.get(srv.url + "/123/456_abcdef0123_b.jpg")
    """

    def __init__(self, world: str | Path, port: int = 0, faults: Faults | None = None,
                 rate_limit: float | None = 0.0, burst: float | None = None, host: str = "127.0.0.1",
                 mirror_faults: Faults | None = None, keep_log: bool = False) -> None:
        self.root = Path(world)
        meta_path = self.root / WORLD
        if not meta_path.is_file():
            raise UserError(f"{self.root}: not a demo world (no {WORLD}; run `mining demo build` first)")
        self.meta = json.loads(meta_path.read_text())
        self.seed = int(self.meta["seed"])
        tab = pq.read_table(self.root / "images" / IMAGE_INDEX).to_pydict()
        self.photos = {int(pid): (int(srv), sec, seco, ext) for pid, srv, sec, seco, ext in zip(
            tab["photo_id"], tab["server"], tab["secret"], tab["secret_original"], tab["extension"])}
        self._small: dict[tuple[int, int], bytes] = {}
        self.mirror_faults = mirror_faults if mirror_faults is not None else Faults.from_rates(
            self.meta.get("mirror_faults", DEFAULT_MIRROR_FAULTS))
        self.by_hash = self._hashes()
        super().__init__(port=port, faults=faults if faults is not None else Faults.from_rates(
            self.meta.get("faults", {})), rate_limit=rate_limit, burst=burst, host=host, keep_log=keep_log)

    def _hashes(self) -> dict[str, int]:
        """{photo hash: photo id} of the world's photos: its images/index.parquet's photo_hash, or
        (a world built before that column) the hashes of the metadata's download URLs."""
        tab = pq.read_table(self.root / "images" / IMAGE_INDEX)
        if "photo_hash" in tab.column_names:
            return {h: int(p) for p, h in zip(tab.column("photo_id").to_pylist(), tab.column("photo_hash").to_pylist())}
        out: dict[str, int] = {}
        meta = self.root / "metadata" / "yfcc100m_dataset"
        if not meta.is_file():
            return out
        with open(meta, encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.rstrip("\n").split("\t")
                if len(fields) == 25 and fields[1].isdigit() and int(fields[1]) in self.photos and fields[16]:
                    out[yfcc_hash(fields[16])] = int(fields[1])
        return out

    def mirror_photo(self, photo_hash: str) -> int | None:
        return self.by_hash.get(photo_hash)

    def mirror_fault_of(self, photo_id: int) -> str | None:
        return fault_for(self.seed, photo_id, self.mirror_faults, salt="mirror:")

    mirror_behaviour_of = mirror_fault_of

    def url_problem(self, photo_id: int, server: int, secret: str, suffix: str | None, ext: str) -> str | None:
        photo = self.photos.get(photo_id)
        if photo is None:
            return "unknown"
        server_id, secret_b, secret_o, ext_o = photo
        want_secret, want_ext = (secret_o, ext_o) if suffix == "o" else (secret_b, "jpg")
        return None if (server, secret, ext) == (server_id, want_secret, want_ext) else "bad_url"

    def fault_of(self, photo_id: int) -> str | None:
        return fault_for(self.seed, photo_id, self.faults)

    behaviour_of = fault_of

    def image_bytes(self, photo_id: int, max_side: int | None) -> bytes:
        """The stored JPEG, or a downscaled copy whose long side is `max_side` (cached)."""
        raw = (self.root / "images" / f"{photo_id}.jpg").read_bytes()
        if max_side is None:
            return raw
        key = (photo_id, max_side)
        if key not in self._small:
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


def serve_forever(world: str | Path, port: int = 8765, fault_overrides: dict[str, float] | None = None,
                  no_faults: bool = False, rate_limit: float | None = None,
                  command: list[str] | None = None) -> int:
    """CLI entry: serve until Ctrl-C; or, given a command, serve only while it runs.

    With a command, `{host}` in its arguments becomes the server's base URL and its exit
    code is returned: that is how the workflow downloads from the demo world (the server's
    life is tied to the download's, and its /_stats summary lands in the same log).
    """
    root = Path(world)
    meta = json.loads((root / WORLD).read_text()) if (root / WORLD).is_file() else {}
    rates = {} if no_faults else {**meta.get("faults", {}), **(fault_overrides or {})}
    try:
        faults = Faults.from_rates(rates)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    srv = DemoServer(root, port=port, faults=faults, mirror_faults=Faults() if no_faults else None,
                     rate_limit=meta.get("rate_limit_rps", 0.0) if rate_limit is None else rate_limit)
    print(f"serving {root} at {srv.url} (stats at {srv.url}/_stats)" + ("" if command else "; Ctrl-C to stop"),
          flush=True)
    srv.start()
    try:
        if command:
            argv = [a.replace("{host}", srv.url) for a in command]
            code = subprocess.call(argv)
            stats = {k: v for k, v in srv.stats_snapshot().items() if k != "by_path"}  # per path: at /_stats
            print("demo server stats: " + json.dumps(stats, sort_keys=True), flush=True)
            return code
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 130
    finally:
        srv.stop()
