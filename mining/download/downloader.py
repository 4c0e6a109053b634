"""One shard: a thread pool over keep-alive sessions, deadlines, retries, verification.

Every request goes through `Politeness` (cluster-wide slot + cooldown), never follows a
redirect blindly, and reads its body with a wall-clock deadline so a stalling or trickling
server cannot hang the shard. Only images that fully decode as JPEG of the minimum size and
are not placeholders are stored, and they are stored atomically.
"""

from __future__ import annotations

import hashlib
import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from PIL import Image

from mining.download.ratelimit import Politeness, backoff, parse_retry_after
from mining.download.reader import Shard, status_path
from mining.download.writer import ShardSink, write_status

REDIRECTS = {301, 302, 303, 307, 308}
FINAL_HTTP = {403: "forbidden", 404: "not_found", 410: "gone"}
THROTTLE_HTTP = {429, 503}


@dataclass(frozen=True)
class FetchConfig:
    """How one request behaves; the defaults suit staticflickr at 1024 px."""

    min_size: int = 1024
    connect_timeout: float = 5.0
    timeout: float = 30.0  # total wall-clock per attempt, body included
    max_retries: int = 3  # attempts for timeouts / 5xx / broken connections
    max_throttle_wait: float = 600.0  # total cooldown one photo may wait before giving up
    threads: int = 32
    rps: float = 0.0  # per host, cluster-wide; 0 = unlimited (cooldowns still apply)
    placeholder_sha256: frozenset[str] = field(default_factory=frozenset)
    user_agent: str = "distractor-mining/0.1 (+research; polite bulk download)"


class _Deadline(Exception):
    """The body did not arrive before the attempt's wall-clock deadline."""


def verify(body: bytes, cfg: FetchConfig, sha256: str | None = None) -> tuple[str, int | None, int | None]:
    """Status, width, height of downloaded bytes: a full Pillow decode (no `draft`)."""
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


def _read_body(resp: requests.Response, deadline: float) -> bytes:
    """Read the body in whatever pieces arrive, checking the wall clock between pieces."""
    chunks, raw = [], resp.raw
    while True:
        if time.monotonic() > deadline:
            raise _Deadline()
        piece = raw.read1(1 << 16)
        if not piece:
            break
        chunks.append(piece)
    body = b"".join(chunks)
    expected = resp.headers.get("Content-Length")
    if expected is not None and expected.isdigit() and int(expected) != len(body):
        raise requests.exceptions.ChunkedEncodingError(f"body {len(body)} of {expected} bytes")
    return body


def fetch(session: requests.Session, photo_id: int, url: str, cfg: FetchConfig, polite: Politeness) -> tuple[dict, bytes | None]:
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
        target, status, hops = url, None, 0
        try:
            while True:
                deadline = time.monotonic() + cfg.timeout
                read_to = max(0.5, min(cfg.timeout, 10.0))
                with session.get(target, stream=True, allow_redirects=False, timeout=(cfg.connect_timeout, read_to)) as resp:
                    row["http_code"] = resp.status_code
                    code = resp.status_code
                    if code in REDIRECTS:
                        loc = resp.headers.get("Location", "")
                        if not loc or is_placeholder_redirect(target, loc) or hops >= 3:
                            status = "unavailable_placeholder"
                            break
                        target, hops = urljoin(target, loc), hops + 1
                        continue
                    if code in FINAL_HTTP:
                        status = FINAL_HTTP[code]
                        break
                    if code in THROTTLE_HTTP:
                        left = polite.throttled(host, parse_retry_after(resp.headers.get("Retry-After")), row["attempts"])
                        status = "throttled_gave_up" if throttled + left > cfg.max_throttle_wait else "retry"
                        break
                    if code != 200:
                        status = "retry_failure"
                        break
                    body = _read_body(resp, deadline)
                    row["bytes"] = len(body)
                    row["sha256"] = hashlib.sha256(body).hexdigest()
                    status, row["width"], row["height"] = verify(body, cfg, row["sha256"])
                    if status == "ok":
                        data = body
                    break
        except (_Deadline, requests.exceptions.Timeout, urllib3.exceptions.TimeoutError, TimeoutError):
            status, row["_fail"] = "retry_failure", "timeout"
        except requests.exceptions.ConnectionError as exc:
            if not stale_retried and "aborted" in str(exc) and row["http_code"] is None:
                # a keep-alive connection the server had already closed: not the photo's fault
                stale_retried = True
                row["attempts"] -= 1
                continue
            status, row["_fail"] = "retry_failure", "error"
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError):
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


def adopt(photo_id: int, url: str, data: bytes, cfg: FetchConfig) -> dict | None:
    """Row for an image an earlier (killed) run stored but had not yet recorded."""
    sha = hashlib.sha256(data).hexdigest()
    status, w, h = verify(data, cfg, sha)
    if status != "ok":
        return None
    return {"photo_id": photo_id, "url": url, "status": "ok", "http_code": None, "attempts": 0, "bytes": len(data),
            "width": w, "height": h, "sha256": sha, "elapsed": 0.0}


def download_shard(shard: Shard, out: Path, cfg: FetchConfig, schedule: Any, tar: bool = False,
                   tick: Callable[[int], None] | None = None) -> dict:
    """Download one shard, write its images and then its status file; returns its tallies."""
    out = Path(out)
    polite = Politeness(schedule, cfg.rps)
    local = threading.local()
    sink = ShardSink(out, shard.index, tar)

    def session() -> requests.Session:
        s = getattr(local, "s", None)
        if s is None:
            s = local.s = requests.Session()
            s.mount("http://", requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=2, max_retries=0))
            s.mount("https://", requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=2, max_retries=0))
            s.headers["User-Agent"] = cfg.user_agent
        return s

    def work(job: tuple[int, str]) -> dict:
        pid, url = job
        old = sink.existing(pid)
        row = adopt(pid, url, old, cfg) if old is not None else None
        if row is None:
            row, data = fetch(session(), pid, url, cfg, polite)
            if data is not None:
                sink.put(pid, data)
        if tick is not None:
            tick(1)
        return row

    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(max(1, cfg.threads), thread_name_prefix=f"dl{shard.index}") as pool:
            rows = list(pool.map(work, zip(shard.photo_ids, shard.urls)))
    except BaseException:
        sink.close(ok=False)
        raise
    sink.close(ok=True)  # images first, then the status file that vouches for them
    write_status(status_path(out, shard.index), shard.done + rows)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return {"shard": shard.index, "counts": counts, "bytes": sum(r["bytes"] or 0 for r in rows if r["status"] == "ok"),
            "requests": sum(r["attempts"] for r in rows), "seconds": time.monotonic() - t0}
