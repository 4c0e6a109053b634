"""One shard: a thread pool over one keep-alive connection pool, deadlines, retries, verification.

Every request goes through `Politeness` (cluster-wide slot + cooldown), never follows a
redirect blindly, and reads its body with a wall-clock deadline so a stalling or trickling
server cannot hang the shard. Only images that fully decode as JPEG of the minimum size and
are not placeholders are stored, and they are stored atomically.

Requests go through urllib3 directly (requests' per-call machinery cost 1.1-1.4 ms of CPU
per image here, urllib3's 0.4 ms), with what requests took from the environment kept:
`http(s)_proxy` / `no_proxy`, and `REQUESTS_CA_BUNDLE` / `CURL_CA_BUNDLE` (else certifi's
bundle) for HTTPS.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urljoin, urlsplit

import certifi
import urllib3
from PIL import Image

from mining.stages.download.ratelimit import Politeness, backoff, parse_retry_after
from mining.stages.download.reader import Shard, status_path
from mining.stages.download.sources import NO_ADDRESS, Source, local_path
from mining.stages.download.writer import Journal, ShardSink, write_status
from mining.settings.layout import image_key
from mining.settings.options import defaults

REDIRECTS = {301, 302, 303, 307, 308}
MAX_REDIRECTS = 3  # same-host hops followed; more is a loop (unavailable_placeholder)
# The most bytes one answer may have (`too_large` beyond, refused before reading when the
# Content-Length says so): a few times the largest file a source serves. A 1024 px JPEG (size
# b, the mirror's 500 px) is well under 5 MB; Flickr takes originals up to 200 MB.
MAX_BODY = {"b": 20 << 20, "o": 256 << 20}
_SCHEMA = defaults("download")
_SMALL_BODY = 64 << 10  # a redirect's or error's body this small is read off, so its connection is reused
FINAL_HTTP = {403: "forbidden", 404: "not_found", 410: "gone"}
THROTTLE_HTTP = {429, 503}


@dataclass(frozen=True)
class FetchConfig:
    """How one request behaves; the defaults suit staticflickr at 1024 px."""

    # the manifest schema's defaults (download section)
    min_size: int = _SCHEMA.min_size
    connect_timeout: float = _SCHEMA.connect_timeout
    timeout: float = _SCHEMA.timeout  # total wall-clock per attempt, body included
    max_retries: int = _SCHEMA.retries  # attempts for timeouts / 5xx / broken connections
    max_throttle_wait: float = _SCHEMA.max_throttle_wait  # total cooldown one photo may wait before giving up
    threads: int = _SCHEMA.threads  # concurrent requests per shard: slow hosts and stalls do not hold the rest up
    rps: float = _SCHEMA.per_host_rps  # per host, cluster-wide; 0 = unlimited (cooldowns still apply)
    placeholder_sha256: frozenset[str] = field(default_factory=frozenset)
    max_bytes: int = MAX_BODY["b"]  # larger answers are `too_large` (see MAX_BODY)
    user_agent: str = "distractor-mining/0.1 (+research; polite bulk download)"


class _Deadline(Exception):
    """The body did not arrive before the attempt's wall-clock deadline."""


class _ShortBody(Exception):
    """The body ended before its Content-Length."""


class _TooLarge(Exception):
    """The answer is (or says it is) larger than `FetchConfig.max_bytes`."""


class Pools:
    """The shard's connection pools (thread-safe): direct, or through the proxy the environment
    names for a URL's scheme unless `no_proxy` exempts its host (as requests does)."""

    def __init__(self, cfg: FetchConfig) -> None:
        self.kw: dict[str, Any] = {
            "num_pools": 16, "maxsize": max(1, cfg.threads), "block": False, "retries": False,
            "headers": {"User-Agent": cfg.user_agent, "Accept": "*/*", "Accept-Encoding": "identity"},
            "ca_certs": os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or certifi.where(),
        }
        self.proxies = urllib.request.getproxies()
        self._bypass = urllib.request.proxy_bypass
        self._direct: urllib3.PoolManager | None = None
        self._by_origin: dict[tuple[str, str], urllib3.PoolManager] = {}
        self._lock = threading.Lock()

    def for_url(self, url: str) -> urllib3.PoolManager:
        parts = urlsplit(url)
        key = (parts.scheme, parts.netloc)
        pm = self._by_origin.get(key)
        if pm is None:
            with self._lock:
                pm = self._by_origin.get(key)
                if pm is None:
                    proxy = self.proxies.get(parts.scheme)
                    if proxy and not self._bypass(parts.hostname or ""):
                        pm = urllib3.ProxyManager(proxy, **self.kw)
                    else:
                        if self._direct is None:
                            self._direct = urllib3.PoolManager(**self.kw)
                        pm = self._direct
                    self._by_origin[key] = pm
        return pm

    def clear(self) -> None:
        for pm in {id(p): p for p in self._by_origin.values()}.values():
            pm.clear()


def verify(body: bytes, cfg: FetchConfig, sha256: str | None = None) -> tuple[str, int | None, int | None]:
    """Status, width, height of downloaded bytes: the whole stream decoded by libjpeg.

    The decode is a `draft` at 1/8 scale in grey: libjpeg still reads and Huffman-decodes
    every scan to the end (a truncated or cut stream raises as in a full decode), but skips
    the full-size inverse DCT, chroma upsampling and colour conversion (2.8 vs 4.8 ms for a
    220 kB 1024 px JPEG here). Width and height are the stored image's, read before the draft.
    """
    if (sha256 or hashlib.sha256(body).hexdigest()) in cfg.placeholder_sha256:
        return "unavailable_placeholder", None, None
    if not body.startswith(b"\xff\xd8\xff"):
        return "not_jpeg", None, None
    try:
        with Image.open(io.BytesIO(body)) as im:
            if im.format != "JPEG":
                return "not_jpeg", None, None
            w, h = im.size
            if max(w, h) < cfg.min_size:
                return "too_small", w, h
            im.draft("L", (max(1, w // 8), max(1, h // 8)))
            im.load()  # raises on a truncated/corrupt stream (LOAD_TRUNCATED_IMAGES is off)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return "corrupt", None, None
    # libjpeg silently pads a stream cut right before its end marker; we do not accept that.
    if not body.rstrip(b"\x00\r\n ").endswith(b"\xff\xd9"):
        return "corrupt", w, h
    return "ok", w, h


def is_placeholder_redirect(url: str, location: str) -> bool:
    """Flickr answers a deleted photo with a redirect to `photo_unavailable` on another host."""
    target = urljoin(url, location)
    return "photo_unavailable" in target or urlsplit(target).netloc != urlsplit(url).netloc


def _read_body(resp: urllib3.BaseHTTPResponse, deadline: float, limit: int) -> bytes:
    """Read the body in whatever pieces arrive, checking the wall clock between pieces, and
    never more than `limit` bytes (a declared length above it is refused before reading)."""
    expected = resp.headers.get("Content-Length")
    if expected is not None and expected.isdigit() and int(expected) > limit:
        raise _TooLarge()
    chunks = []
    got = 0
    while True:
        if time.monotonic() > deadline:
            raise _Deadline()
        piece = resp.read1(1 << 16)
        if not piece:
            break
        got += len(piece)
        if got > limit:
            raise _TooLarge()
        chunks.append(piece)
    body = b"".join(chunks)
    if expected is not None and expected.isdigit() and int(expected) != len(body):
        raise _ShortBody(f"body {len(body)} of {expected} bytes")
    return body


def _done_with(resp: urllib3.BaseHTTPResponse, clean: bool) -> None:
    """Give the connection back for reuse after a whole body, or after reading off a small
    declared one that was never started (a redirect's, an error page's: the connection cannot
    take the next request before its answer is read, even an empty one); otherwise (a large or
    unknown-length body, a deadline, a broken body) close it."""
    if not clean and (resp.status == 200 or resp.tell() > 0):
        resp.close()
    elif not clean:
        size = resp.headers.get("Content-Length")
        try:
            if size is None or not size.isdigit() or int(size) > _SMALL_BODY or \
                    len(resp.read(_SMALL_BODY + 1, decode_content=False)) != int(size):
                resp.close()
        except (urllib3.exceptions.HTTPError, OSError):
            resp.close()
    resp.release_conn()


def _get(pools: Pools, url: str, cfg: FetchConfig, polite: Politeness, row: dict[str, Any],
         throttled: float) -> tuple[str | None, bytes | None]:
    """One attempt: GET the URL, following its redirects; (the attempt's status, None) or
    (None, the body of a 200). A redirect to a placeholder, or too many: unavailable. A
    throttle gives up once this photo's cooldown (`throttled` so far) would pass
    max_throttle_wait. `row["http_code"]`: the last response's code."""
    host = urlsplit(url).netloc
    target, hops = url, 0
    while True:
        deadline = time.monotonic() + cfg.timeout
        read_to = max(0.5, min(cfg.timeout, 10.0))
        resp = pools.for_url(target).request(
            "GET", target, preload_content=False, decode_content=False, redirect=False, retries=False,
            timeout=urllib3.Timeout(connect=cfg.connect_timeout, read=read_to))
        clean = False
        try:
            row["http_code"] = code = resp.status
            if code in REDIRECTS:
                loc = resp.headers.get("Location", "")
                if not loc or is_placeholder_redirect(target, loc) or hops >= MAX_REDIRECTS:
                    return "unavailable_placeholder", None
                target, hops = urljoin(target, loc), hops + 1
                continue
            if code in FINAL_HTTP:
                return FINAL_HTTP[code], None
            if code in THROTTLE_HTTP:
                left = polite.throttled(host, parse_retry_after(resp.headers.get("Retry-After")), row["attempts"])
                return ("throttled_gave_up" if throttled + left > cfg.max_throttle_wait else "retry"), None
            if code != 200:
                return "retry_failure", None
            body = _read_body(resp, deadline, cfg.max_bytes)
            clean = True
            return None, body
        finally:
            _done_with(resp, clean)


def fetch(pools: Pools, photo_id: int, url: str, cfg: FetchConfig, polite: Politeness) -> tuple[dict, bytes | None]:
    """Download and classify one photo; returns its status row and the bytes when `ok`."""
    t0 = time.monotonic()
    host = urlsplit(url).netloc
    row: dict[str, Any] = {"photo_id": photo_id, "url": url, "status": "error", "http_code": None, "attempts": 0,
                           "bytes": None, "width": None, "height": None, "sha256": None, "elapsed": 0.0}
    failures = 0  # timeouts, 5xx, broken connections: retried up to max_retries
    throttled = 0.0
    data: bytes | None = None
    after_throttle = stale_retried = False
    while True:
        waited = polite.wait(host)
        if after_throttle:  # only cooldown this photo really sat out counts towards giving up
            throttled += waited
        row["attempts"] += 1
        row["http_code"] = None  # the code of the last attempt is what the status row reports
        try:
            status, body = _get(pools, url, cfg, polite, row, throttled)
            if body is not None:  # verified after the connection went back to the pool
                row["bytes"] = len(body)
                row["sha256"] = hashlib.sha256(body).hexdigest()
                status, row["width"], row["height"] = verify(body, cfg, row["sha256"])
                if status == "ok":
                    data = body
        except _TooLarge:  # the connection was closed: the rest is never read
            status, row["bytes"] = "too_large", None
        except urllib3.exceptions.NewConnectionError:  # refused, unknown host (a ConnectTimeoutError subclass)
            status, row["_fail"] = "retry_failure", "error"
        except (_Deadline, urllib3.exceptions.TimeoutError, TimeoutError):
            status, row["_fail"] = "retry_failure", "timeout"
        except urllib3.exceptions.ProtocolError as exc:
            if not stale_retried and "aborted" in str(exc) and row["http_code"] is None:
                # a keep-alive connection the server had already closed: not the photo's fault
                stale_retried = True
                row["attempts"] -= 1
                continue
            status, row["_fail"] = "retry_failure", "error"
        except (_ShortBody, urllib3.exceptions.HTTPError, OSError, ValueError):
            status, row["_fail"] = "retry_failure", "error"
        after_throttle = status == "retry"
        if status == "retry":
            continue
        if status == "retry_failure":
            failures += 1
            if failures < cfg.max_retries:
                time.sleep(backoff(failures, base=0.1, cap=2.0))
                continue
            status = row.get("_fail", "error")
        row["status"] = status
        break
    row.pop("_fail", None)
    row["elapsed"] = round(time.monotonic() - t0, 4)
    return row, data


def _empty_row(photo_id: int, url: str | None, status: str) -> dict[str, Any]:
    return {"photo_id": photo_id, "url": url, "status": status, "http_code": None, "attempts": 0, "bytes": None,
            "width": None, "height": None, "sha256": None, "elapsed": 0.0}


def read_local(photo_id: int, uri: str, cfg: FetchConfig) -> tuple[dict, bytes | None]:
    """A local source's file, verified like a download (no network)."""
    row = _empty_row(photo_id, uri, "not_found")
    try:  # no link followed: the plan took a regular file inside the folder, and one put there since is not it
        with open(os.open(local_path(uri), os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            body = f.read(cfg.max_bytes + 1)
    except OSError:
        return row, None
    if len(body) > cfg.max_bytes:
        return {**row, "status": "too_large"}, None
    row["bytes"], row["sha256"] = len(body), hashlib.sha256(body).hexdigest()
    row["status"], row["width"], row["height"] = verify(body, cfg, row["sha256"])
    return row, body if row["status"] == "ok" else None


def adopt(old: bytes, journaled: dict | None) -> dict | None:
    """The row of an image an earlier (killed) run stored, when the shard's journal vouches
    for exactly these bytes (so its source is known); else None (asked again)."""
    if journaled is None or journaled.get("sha256") != hashlib.sha256(old).hexdigest():
        return None
    return {**journaled, "attempts": 0, "elapsed": 0.0}


def default_source(cfg: FetchConfig) -> Any:
    """The one source of a download given plain URLs: the flickr behaviour of `cfg`."""
    return Source(kind="flickr", name="flickr", rps=cfg.rps, threads=cfg.threads, min_size=cfg.min_size)


# long: `one` (a photo through the sources) is a closure over the shard's sink, journal, pools and politeness
def download_shard(shard: Shard, out: Path, cfg: FetchConfig, schedule: Any, tar: bool = False,
                   tick: Callable[[int], None] | None = None, sources: tuple = ()) -> dict:
    """Download one shard, write its images and then its status file; returns its tallies.

    Each photo goes through `sources` in order (default: one flickr source from `cfg`) until
    one serves it, or one fails transiently (the photo ends with that status), or all of
    them failed finally. Each source has its own politeness (rps, threads) and `min_size`."""
    from mining.stages.download.reader import TRANSIENT

    out = Path(out)
    sources = tuple(sources) or (default_source(cfg),)
    cfgs = [dataclasses.replace(cfg, min_size=s.min_size, rps=s.rps, threads=s.threads,
                                max_bytes=MAX_BODY["o" if s.local or s.size == "o" else "b"]) for s in sources]
    polite = [Politeness(schedule, s.rps) for s in sources]
    slots = [threading.BoundedSemaphore(max(1, s.threads)) for s in sources]
    pools = Pools(dataclasses.replace(cfg, threads=max(s.threads for s in sources)))
    sink = ShardSink(out, shard.index, tar)
    journal = Journal(out, shard.index)
    keys = shard.keys if shard.keys is not None else [image_key(p) for p in shard.photo_ids]
    prior = shard.prior if shard.prior is not None else [[] for _ in shard.photo_ids]
    addresses = [u if isinstance(u, tuple) else (u,) for u in shard.urls]

    def one(pid: int, key: str, addr: tuple, done: list[dict]) -> dict:
        old = sink.existing(key)
        row = adopt(old, journal.old.get(pid)) if old is not None else None
        if row is not None:
            return row
        tried = list(done)
        row = _empty_row(pid, done[-1]["url"] if done else None, done[-1]["status"] if done else "error")
        requests, seconds = 0, 0.0  # over all the sources asked: the row reports the photo's totals
        for k in range(len(done), len(sources)):
            src, url = sources[k], addr[k]
            data = None
            if url is None:
                row = _empty_row(pid, None, NO_ADDRESS[src.kind])
            elif src.local:
                row, data = read_local(pid, url, cfgs[k])
            else:
                with slots[k]:
                    row, data = fetch(pools, pid, url, cfgs[k], polite[k])
            tried.append({"source": src.name, "url": url, "status": row["status"]})
            requests, seconds = requests + row["attempts"], seconds + row["elapsed"]
            row.update(attempts=requests, elapsed=round(seconds, 4))
            if data is not None:
                sink.put(key, data)
                row.update(photo_hash=key, source=src.name, low_res=src.low_res, tried=tried)
                journal.add(row)
                return row
            if row["status"] in TRANSIENT:
                break
        row.update(photo_hash=key, source=None, low_res=None, tried=tried)
        return row

    def work(job: tuple[int, str, tuple, list[dict]]) -> dict:
        row = one(*job)
        if tick is not None:
            tick(1)
        return row

    t0 = time.monotonic()
    pool = ThreadPoolExecutor(max(1, max(s.threads for s in sources)), thread_name_prefix=f"dl{shard.index}")
    try:
        rows = list(pool.map(work, zip(shard.photo_ids, keys, addresses, prior)))
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # a full disk: the photos not started are not asked
        sink.close(ok=False)
        journal.close(remove=False)
        raise
    finally:
        pool.shutdown(wait=True)
        pools.clear()
    sink.close(ok=True)  # images first, then the status file that vouches for them
    write_status(status_path(out, shard.index), shard.done + rows)
    journal.close(remove=True)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return {"shard": shard.index, "counts": counts, "bytes": sum(r["bytes"] or 0 for r in rows if r["status"] == "ok"),
            "requests": sum(r["attempts"] for r in rows), "seconds": time.monotonic() - t0}
