"""The download tests' (tests/unit/test_download.py) and benchmark's (benchmarks/download.py)
Flickr server: the demo server's machinery (mining/demo/server.py: every behaviour, the rate
limit, the stats, the request log) with a scripted behaviour per photo id and generated JPEGs
instead of a world folder.

`FaultServer({id: behaviour})` answers `/{server}/{id}_{secret}_b.jpg` (any server and secret)
with that photo's behaviour (`ok` or a name in `mining.stages.demo.server.BEHAVIOURS`: `not_found`,
`placeholder_offsite`, `truncated`, `throttle`, `stall`, ...) and records every request
(arrival time, path, code) in `log`, so tests can check politeness from its side. With
`mirror={id: behaviour}` it is also the Multimedia Commons mirror of those photos:
`/data/images/<h[0:3]>/<h[3:6]>/<h>.jpg`, h the photo hash of `download_url(id)`, 500 px.
"""

from __future__ import annotations

import io
from functools import lru_cache

import numpy as np
from PIL import Image

from mining.stages.demo.server import BEHAVIOURS, FLICKR_PLACEHOLDER_URL, FlickrServer, Faults


def download_url(photo_id: int) -> str:
    """The download URL the tests' candidates give a photo (YFCC's form; its hash is the key)."""
    return f"http://farm1.staticflickr.com/7/{photo_id}_5ec4e7.jpg"


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


def max_per_window(log: list[tuple[float, str, int]], window: float = 1.0) -> int:
    """Most requests a log shows in any half-open window of `window` seconds."""
    t = sorted(x for x, _, _ in log)
    best, j = 0, 0
    for i in range(len(t)):
        while t[i] - t[j] >= window:
            j += 1
        best = max(best, i - j + 1)
    return best


class FaultServer(FlickrServer):
    """Context manager: `with FaultServer({id: behaviour}) as s: s.url ...`; `s.log` has requests.

    Photo `id` is `unique(jpeg(), id)` (1024 x 768; 640 or 500 px wide when smaller sizes are
    asked). `delay` delays every photo answer; `slow_s`, `stall_s` and `retry_after` time the
    `slow`, `stall` and 429 answers; `rate_limit` is the demo server's per-client token bucket.
    `behaviour` may be changed while the server runs.
    """

    def __init__(self, behaviour: dict[int, str] | None = None, default: str = "ok", delay: float = 0.0,
                 rate_limit: float | None = None, retry_after: str = "1",
                 placeholder_url: str = FLICKR_PLACEHOLDER_URL, port: int = 0, slow_s: float = 1.0,
                 stall_s: float = 20.0, mirror: dict[int, str] | None = None) -> None:
        from mining.flickr import yfcc_hash

        self.behaviour = dict(behaviour or {})
        self.default = default
        self.mirror = dict(mirror or {})
        self.by_hash = {yfcc_hash(download_url(pid)): pid for pid in self.mirror}
        unknown = {default, *self.behaviour.values(), *self.mirror.values()} - set(BEHAVIOURS) - {"ok"}
        if unknown:
            raise ValueError(f"unknown behaviour(s): {', '.join(sorted(unknown))}")
        super().__init__(port=port, faults=Faults(retry_after_s=int(retry_after), slow_s=slow_s, stall_s=stall_s),
                         rate_limit=rate_limit, latency_s=delay, placeholder_url=placeholder_url, keep_log=True)
        jpeg(), jpeg(640, 480), jpeg(500, 375), jpeg(200, 150), self.placeholder_jpeg  # no request pays for rendering

    @property
    def log(self) -> list[tuple[float, str, int]]:
        return self.stats.log

    def url_problem(self, photo_id: int, server: int, secret: str, suffix: str | None, ext: str) -> str | None:
        return None  # any server and secret name the photo

    def behaviour_of(self, photo_id: int) -> str | None:
        kind = self.behaviour.get(photo_id, self.default)
        return None if kind == "ok" else kind

    def mirror_photo(self, photo_hash: str) -> int | None:
        return self.by_hash.get(photo_hash)

    def mirror_behaviour_of(self, photo_id: int) -> str | None:
        kind = self.mirror.get(photo_id, "ok")
        return None if kind == "ok" else kind

    def image_bytes(self, photo_id: int, max_side: int | None) -> bytes:
        width = 1024 if max_side is None else min(1024, max_side)
        return unique(jpeg(width, width * 3 // 4), photo_id)

    def max_per_window(self, window: float = 1.0) -> int:
        return max_per_window(self.log, window)


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
