"""The Flickr-like demo server: URL patterns, deterministic fault mix, stats, rate limit."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import requests
from PIL import Image

from mining.settings import options
from mining.stages.demo.handler import MIRROR_SMALL_SIDE, PLACEHOLDER_PATH
from mining.stages.demo.fake_flickr import DemoServer, Faults, fault_for
from mining.stages.demo.stage import run_build


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("srvworld")
    run_build(out=root, options=replace(options.defaults("demo"), preset="micro", seed=5))
    return root


def _photos(world: Path) -> list[dict]:
    return pq.read_table(world / "images" / "index.parquet").to_pylist()


def _url(base: str, p: dict, size: str = "b") -> str:
    if size == "o":
        return f"{base}/{p['server']}/{p['photo_id']}_{p['secret_original']}_o.{p['extension']}"
    suffix = "" if size == "m" else f"_{size}"
    return f"{base}/{p['server']}/{p['photo_id']}_{p['secret']}{suffix}.jpg"


def test_flickr_urls_serve_the_right_sizes(world):
    photos = _photos(world)
    with DemoServer(world, port=0, faults=Faults()) as srv, requests.Session() as s:
        for p in photos[:4]:
            big = s.get(_url(srv.url, p, "b"))
            assert big.status_code == 200 and big.headers["Content-Type"] == "image/jpeg"
            assert max(Image.open(io.BytesIO(big.content)).size) <= 1024
            med = s.get(_url(srv.url, p, "m"))
            assert max(Image.open(io.BytesIO(med.content)).size) == 500
            assert s.get(_url(srv.url, p, "o")).status_code == 200
        wrong = dict(photos[0], secret="0000000000")
        assert s.get(_url(srv.url, wrong, "b")).status_code == 404
        stats = s.get(srv.url + "/_stats").json()
    assert stats["requests"] == 13
    assert stats["by_status"] == {"200": 12, "404": 1}
    assert sum(stats["by_path"][_url("", photos[0], "b")].values()) == 1


def test_fault_mix_matches_configuration():
    rates = Faults(not_found=0.1, gone=0.05, placeholder=0.1, throttle=0.1, truncated=0.05)
    got = [fault_for(7, pid, rates) for pid in range(20_000)]
    for name in ("not_found", "gone", "placeholder", "throttle", "truncated"):
        share = got.count(name) / len(got)
        assert abs(share - getattr(rates, name)) < 0.01, (name, share)
    assert got == [fault_for(7, pid, rates) for pid in range(20_000)]  # deterministic
    with pytest.raises(ValueError):
        Faults(not_found=0.7, gone=0.5)


def test_each_fault_behaves_like_flickr(world):
    photos = _photos(world)
    faults = Faults(not_found=0.12, gone=0.08, forbidden=0.08, placeholder=0.12, throttle=0.12, server_error=0.12,
                    truncated=0.12, wrong_type=0.12, small=0.12, retry_after_s=2)
    with DemoServer(world, port=0, faults=faults) as srv, requests.Session() as s:
        seen = set()
        for p in photos:
            fault = srv.fault_of(p["photo_id"])
            r = s.get(_url(srv.url, p, "b"), allow_redirects=False)
            seen.add(fault)
            if fault in ("not_found", "gone", "forbidden"):
                assert r.status_code == {"not_found": 404, "gone": 410, "forbidden": 403}[fault]
            elif fault == "placeholder":
                assert r.status_code == 302 and r.headers["Location"].endswith(PLACEHOLDER_PATH)
                ph = s.get(r.headers["Location"])
                assert ph.status_code == 200 and ph.headers["Content-Type"] == "image/png"
            elif fault in ("throttle", "server_error"):
                assert r.status_code in (429, 500, 503)
                if r.status_code == 429:
                    assert r.headers["Retry-After"] == "2"
                again = s.get(_url(srv.url, p, "b"))
                assert again.status_code == 200  # transient: a retry succeeds
            elif fault == "truncated":
                assert r.status_code == 200 and int(r.headers["Content-Length"]) == len(r.content)
                with pytest.raises(OSError):
                    Image.open(io.BytesIO(r.content)).load()
            elif fault == "wrong_type":
                assert r.status_code == 200 and r.headers["Content-Type"] != "image/jpeg"
            elif fault == "small":
                assert max(Image.open(io.BytesIO(r.content)).size) < 1024
            else:
                assert r.status_code == 200
                Image.open(io.BytesIO(r.content)).load()
        stats = s.get(srv.url + "/_stats").json()
    assert len(seen) >= 5
    assert stats["faults_served"]  # counted per fault kind


def test_rate_limit_answers_429_and_stats_show_the_rate(world):
    p = _photos(world)[0]
    with DemoServer(world, port=0, faults=Faults(), rate_limit=5, burst=5) as srv, requests.Session() as s:
        codes = [s.get(_url(srv.url, p, "m")).status_code for _ in range(12)]
        stats = s.get(srv.url + "/_stats").json()
    assert codes[:5] == [200] * 5 and 429 in codes
    assert stats["rate_limited"] == codes.count(429)
    assert stats["max_requests_per_second"]["127.0.0.1"] >= 6


def _hash_of(world: Path) -> dict[int, str]:
    """{photo id: photo hash} from the world's metadata download URLs (what ingest reads)."""
    from mining.photos.flickr import yfcc_hash

    out = {}
    for line in (world / "metadata" / "yfcc100m_dataset").read_text().splitlines():
        f = line.split("\t")
        if len(f) == 25 and f[1].isdigit():
            out[int(f[1])] = yfcc_hash(f[16])
    return out


def test_the_server_is_the_multimedia_commons_mirror_too_with_its_own_faults(world):
    from mining.photos.flickr import mirror_relpath

    photos = _photos(world)
    hashes = _hash_of(world)
    mirror = Faults(not_found=0.3, small=0.2)
    with DemoServer(world, port=0, faults=Faults(not_found=0.5), mirror_faults=mirror, keep_log=True) as srv, \
            requests.Session() as s:
        seen = {}
        for p in photos:
            pid = p["photo_id"]
            fault = srv.mirror_fault_of(pid)
            assert fault == fault_for(5, pid, mirror, salt="mirror:")  # deterministic per (seed, photo)
            r = s.get(f"{srv.url}/{mirror_relpath(hashes[pid])}")
            if fault == "not_found":
                assert r.status_code == 404
            else:
                side = max(Image.open(io.BytesIO(r.content)).size)
                assert r.status_code == 200 and side == (MIRROR_SMALL_SIDE if fault == "small" else 500)
            seen[(srv.fault_of(pid) == "not_found", fault == "not_found")] = True
        # gone on Flickr but on the mirror, gone on both, and alive on Flickr but not on the mirror
        assert {(True, False), (True, True), (False, True)} <= set(seen)
        assert s.get(f"{srv.url}/data/images/000/000/000000000000000000.jpg").status_code == 404
        assert s.get(f"{srv.url}/{mirror_relpath(hashes[photos[0]['photo_id']])}/../x").status_code == 404
        stats = s.get(srv.url + "/_stats").json()
    assert stats["by_kind"]["mirror"]["404"] >= 1
    assert [p for _, p, _ in srv.stats.log][:1] == [f"/{mirror_relpath(hashes[photos[0]['photo_id']])}"]
