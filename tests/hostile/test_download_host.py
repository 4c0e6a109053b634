"""A host never chooses the download's memory, and a same-host redirect works.

Against the tests' real Flickr server (tests/helpers/download_server.py, in its own process) with
scripted photos:
- `huge_length`: 200 declaring Content-Length 10^12 and streaming as fast as the socket goes
  (it drove the download to 3.8 GB for 2 photos in 5 s): refused before reading, `too_large`;
- `endless`: no Content-Length, streamed until the client hangs up: cut at the cap, `too_large`;
- `redirect_same_host`: 302 to the photo elsewhere on the same host (absolute or relative
  Location), which serves a valid JPEG: `ok` (it ended `error` after 3 attempts on a reused
  connection); a redirect to itself forever ends after MAX_REDIRECTS hops; a redirect to
  another host or to photo_unavailable stays `unavailable_placeholder`.
"""

from __future__ import annotations

import hashlib
import time
import tracemalloc

import pyarrow.parquet as pq
import pytest
from download_server import ServerProcess
from scripted_server import jpeg, unique

from mining.stages.download.downloader import FetchConfig
from mining.stages.download.downloader import MAX_BODY, MAX_REDIRECTS, download_shard
from mining.stages.download.logger import EXPLAIN
from mining.stages.download.ratelimit import HostSchedule
from mining.stages.download.reader import STATUSES, TRANSIENT, Shard
from mining.settings.layout import image_relpath


def _rows(out) -> dict[int, dict]:
    return {r["photo_id"]: r for f in sorted((out / "status").glob("shard-*.parquet")) for r in pq.read_table(f).to_pylist()}


def _run(tmp_path, behaviour: dict[int, str], **cfg) -> tuple[dict[int, dict], list, float, int]:
    """Download the scripted photos; (status rows, server log, seconds, peak bytes traced in
    this process: the server runs in its own)."""
    with ServerProcess(behaviour) as s:
        ids = sorted(behaviour)
        urls = [f"{s.url}/7/{i}_5ec4e7_b.jpg" for i in ids]
        config = FetchConfig(**{"timeout": 5.0, "threads": 4, "max_retries": 3, **cfg})
        tracemalloc.start()
        t0 = time.monotonic()
        try:
            download_shard(Shard(0, ids, urls), tmp_path, config, HostSchedule(0))
            seconds = time.monotonic() - t0
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        log = s.fetch_log()
    return _rows(tmp_path), log, seconds, peak


def test_too_large_is_a_status_of_its_own():
    assert "too_large" in STATUSES and "too_large" not in TRANSIENT and "too_large" in EXPLAIN
    assert MAX_BODY["b"] >= 4 * 5 << 20 > len(jpeg())  # a few times the largest 1024 px JPEG


def test_a_host_never_chooses_the_downloads_memory(tmp_path):
    rows, log, seconds, peak = _run(tmp_path, {1: "huge_length", 2: "endless", 3: "ok", 4: "huge_length"})
    assert rows[3]["status"] == "ok"
    for pid in (1, 2, 4):
        assert rows[pid]["status"] == "too_large", rows[pid]
        assert rows[pid]["attempts"] == 1, rows[pid]  # final: not asked again, not retried on a rerun
        assert not (tmp_path / image_relpath(pid)).exists()
    # the declared 10^12 is refused before the body is read; the endless one is cut at the cap
    assert peak < 4 * MAX_BODY["b"], f"peak {peak / 2**20:.0f} MiB"
    assert seconds < 5.0
    assert [p for _, p, _ in log].count("/7/1_5ec4e7_b.jpg") == 1


def test_a_same_host_redirect_is_followed(tmp_path):
    behaviour = {11: "redirect_same_host", 12: "redirect_same_host", 13: "ok", 14: "redirect_loop",
                 15: "placeholder_offsite", 16: "placeholder", 17: "redirect_same_host", 18: "redirect_same_host"}
    rows, log, _, _ = _run(tmp_path, behaviour, threads=1)  # one connection: each redirect reuses it
    for pid in (11, 12, 17, 18):  # odd ids: absolute Location; even: relative
        r = rows[pid]
        assert (r["status"], r["attempts"], r["http_code"]) == ("ok", 1, 200), r
        stored = (tmp_path / image_relpath(pid)).read_bytes()
        assert stored == unique(jpeg(), pid) and r["sha256"] == hashlib.sha256(stored).hexdigest()
        assert [p for _, p, _ in log if f"/{pid}_" in p] == [f"/7/{pid}_5ec4e7_b.jpg", f"/moved/7/{pid}_5ec4e7_b.jpg"]
    assert rows[14]["status"] == "unavailable_placeholder" and rows[14]["attempts"] == 1
    assert len([1 for _, p, _ in log if "/14_" in p]) == MAX_REDIRECTS + 1  # bounded, then given up
    assert rows[15]["status"] == rows[16]["status"] == "unavailable_placeholder"
    assert not any("photo_unavailable" in p for _, p, _ in log)  # a placeholder is never fetched


@pytest.mark.parametrize("threads", [1, 8])
def test_redirects_and_plain_photos_share_connections_without_errors(tmp_path, threads):
    behaviour = {i: ("redirect_same_host" if i % 3 == 0 else "ok") for i in range(100, 160)}
    rows, _, _, _ = _run(tmp_path, behaviour, threads=threads)
    assert {r["status"] for r in rows.values()} == {"ok"}
    assert {r["attempts"] for r in rows.values()} == {1}


