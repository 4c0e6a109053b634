"""`mining download` with several sources tried in order: Flickr, the Multimedia
Commons mirror, local folders; index.parquet; per-source summary; defaults from the schema.
All against the real local server (tests/helpers/download_server.py), no mocked HTTP."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mining.settings import options
from mining.cli import build_parser, main
from mining.compute.cluster import Cluster
from mining.stages.download import stage as download
from mining.stages.download.sources import Source
from mining.stages.download.sources import section_defaults, section_entries
from mining.errors import UserError
from mining.photos.flickr import mirror_relpath, photo_url, yfcc_hash
from mining.settings.layout import image_key, image_relpath
from download_server import FaultServer
from scripted_server import download_url, jpeg, unique

KW = dict(cluster=Cluster(workers=1, processes=False), progress=False)
DOWNLOAD = options.defaults("download")  # the schema's settings


def candidates(path: Path, ids: list[int]) -> Path:
    n = len(ids)
    pq.write_table(pa.table({"photo_id": ids, "server_id": [7] * n, "secret": ["5ec4e7"] * n,
                             "secret_original": ["0a1b"] * n, "extension": ["jpg"] * n,
                             "download_url": [download_url(i) for i in ids]}), path)
    return path


def two(url: str, **mirror) -> list[Source]:
    return [Source("flickr", "flickr", host=url, threads=4),
            Source("multimedia-commons", "mirror", host=url, threads=4, min_size=256, low_res=True, **mirror)]


def index(out: Path) -> dict[int, dict]:
    return {r["photo_id"]: r for r in pq.read_table(out / "index.parquet").to_pylist()}


def asked(log, pid: int) -> list[str]:
    h = yfcc_hash(download_url(pid))
    return [p for _, p, _ in log if f"/{pid}_" in p or h in p]


def test_a_photo_gone_on_flickr_comes_from_the_mirror_marked_low_res_and_one_alive_is_asked_once(tmp_path):
    flickr = {1: "not_found", 2: "placeholder_offsite", 4: "gone", 5: "forbidden"}
    mirror = {1: "ok", 2: "ok", 3: "ok", 4: "not_found"}  # 5: the mirror lacks it (404 as S3 answers)
    cand = candidates(tmp_path / "c.parquet", [1, 2, 3, 4, 5, 6])
    out = tmp_path / "out"
    with FaultServer(flickr, mirror=mirror) as s:
        summary = download.run(candidates=cand, out=out,
                               options=replace(DOWNLOAD, threads=4, retries=1, shard_size=4, min_ok_fraction=0),
                               sources=two(s.url), **KW)
        log = list(s.log)
    idx = index(out)
    assert {p: (r["status"], r["source"], r["low_res"]) for p, r in idx.items()} == {
        1: ("ok", "mirror", True), 2: ("ok", "mirror", True), 3: ("ok", "flickr", False),
        4: ("not_found", None, None), 5: ("not_found", None, None), 6: ("ok", "flickr", False)}
    mirror_url = f"{s.url}/{mirror_relpath(yfcc_hash(download_url(1)))}"
    assert idx[1]["urls"] == [f"{s.url}/7/1_5ec4e7_b.jpg", mirror_url]
    assert (idx[1]["width"], idx[1]["height"]) == (500, 375) and idx[3]["width"] == 1024
    assert idx[1]["path"] == image_relpath(1, download_url(1)) and idx[1]["photo_hash"] == image_key(1, download_url(1))
    data = (out / idx[1]["path"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == idx[1]["sha256"] and data == unique(jpeg(500, 375), 1)
    # alive on Flickr: asked there once, never on the mirror
    assert asked(log, 3) == ["/7/3_5ec4e7_b.jpg"] and asked(log, 6) == ["/7/6_5ec4e7_b.jpg"]
    assert len(asked(log, 1)) == 2 and len(log) == 6 + 4
    assert (summary["alive_full_res"], summary["alive_low_res_only"], summary["gone_everywhere"]) == (2, 2, 2)
    assert summary["sources"] == {
        "flickr": {"asked": 6, "served": 2, "failed": {"forbidden": 1, "gone": 1, "not_found": 1,
                                                        "unavailable_placeholder": 1}},
        "mirror": {"asked": 4, "served": 2, "failed": {"not_found": 2}}}
    assert json.loads((out / "summary.json").read_text())["sources"] == summary["sources"]


def test_a_throttled_photo_never_goes_to_the_mirror_and_is_asked_again_on_a_rerun(tmp_path):
    cand = candidates(tmp_path / "c.parquet", [1, 2])
    out = tmp_path / "out"
    cfg = replace(DOWNLOAD, threads=2, retries=1, max_throttle_wait=1.5)
    with FaultServer({1: "throttle_forever"}, mirror={1: "ok", 2: "ok"}, retry_after="1") as s:
        summary = download.run(candidates=cand, out=out, options=replace(cfg, shard_size=5, min_ok_fraction=0),
                               sources=two(s.url), **KW)
        assert not [p for _, p, _ in s.log if p.startswith("/data/")]
        assert index(out)[1]["status"] == "throttled_gave_up" and index(out)[1]["source"] is None
        assert summary["gone_everywhere"] == 0 and summary["sources"]["mirror"]["asked"] == 0
        s.behaviour[1] = "ok"
        n = len(s.log)
        download.run(candidates=cand, out=out, options=replace(cfg, shard_size=5), sources=two(s.url), **KW)
        assert [p for _, p, _ in s.log[n:]] == ["/7/1_5ec4e7_b.jpg"]  # transient: asked again, at Flickr
    assert index(out)[1]["source"] == "flickr"


def test_the_mirrors_placeholder_and_too_small_images_are_final_failures_like_flickrs(tmp_path):
    cand = candidates(tmp_path / "c.parquet", [1, 2, 3, 4])
    out = tmp_path / "out"
    with FaultServer({i: "gone" for i in (1, 2, 3, 4)},
                     mirror={1: "placeholder", 2: "small", 3: "truncated", 4: "html"}) as s:
        cfg = replace(DOWNLOAD, threads=2, retries=1)
        placeholders = tmp_path / "placeholders.txt"
        placeholders.write_text(hashlib.sha256(s.placeholder_jpeg).hexdigest() + "\n")
        inputs = dict(candidates=cand, placeholders=placeholders)
        summary = download.run(**inputs, out=out, options=replace(cfg, shard_size=5, min_ok_fraction=0),
                               sources=two(s.url), **KW)
        again = download.run(**inputs, out=out, options=replace(cfg, shard_size=5, min_ok_fraction=0),
                             sources=two(s.url), **KW)
        assert len(s.log) == 8  # all final at both: nothing asked again
    idx = index(out)
    assert {p: r["status"] for p, r in idx.items()} == {1: "unavailable_placeholder", 2: "too_small", 3: "corrupt",
                                                        4: "not_jpeg"}
    assert not (out / "jpg").exists() and summary["gone_everywhere"] == 4 and again["this_run"]["shards"] == 0


def _local_folders(root: Path, ids: list[int]) -> tuple[Path, Path, Path]:
    """The same photos (1024 px, bytes per id) in the mirror's layout, ours, and img2dataset's."""
    mirror, ours, i2d = root / "mirror", root / "ours", root / "i2d"
    for pid in ids:
        data = unique(jpeg(), pid)
        for p in (mirror / mirror_relpath(yfcc_hash(download_url(pid))), ours / image_relpath(pid, download_url(pid))):
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
    # img2dataset: 00000.parquet (url, key, status) beside 00000/{key}.jpg; one row by the
    # download URL, one by the Flickr URL, a failed row, and a row of a photo we do not want
    urls = [download_url(ids[0]), photo_url("https://live.staticflickr.com", "b", 7, ids[1], "5ec4e7", None, None)]
    (i2d / "00000").mkdir(parents=True)
    keys = ["000000000", "000000001"]
    for pid, key in zip(ids[:2], keys):
        (i2d / "00000" / f"{key}.jpg").write_bytes(unique(jpeg(), pid))
    pq.write_table(pa.table({"url": urls + [download_url(ids[2]), "http://x/1.jpg"],
                             "key": keys + ["000000002", "000000003"],
                             "status": ["success", "success", "failed_to_download", "success"]}),
                   i2d / "00000.parquet")
    return mirror, ours, i2d


def test_local_folders_in_three_layouts_are_used_without_a_request(tmp_path):
    ids = [11, 12, 13]
    folders = _local_folders(tmp_path, ids)
    cand = candidates(tmp_path / "c.parquet", ids)
    with FaultServer() as s:
        for i, folder in enumerate(folders):
            out = tmp_path / f"out{i}"
            srcs = [Source("local", "mine", path=str(folder)), Source("flickr", "flickr", host=s.url, threads=2)]
            summary = download.run(candidates=cand, out=out, options=replace(DOWNLOAD, threads=2, shard_size=5),
                                   sources=srcs, **KW)
            idx = index(out)
            local_ids = ids if i < 2 else ids[:2]  # img2dataset's third row failed: Flickr has it
            assert [p for p, r in idx.items() if r["source"] == "mine"] == local_ids, folder.name
            for pid in local_ids:
                assert (out / idx[pid]["path"]).read_bytes() == unique(jpeg(), pid)
                assert idx[pid]["urls"][0].startswith("file://") and idx[pid]["low_res"] is False
            assert summary["sources"]["mine"]["served"] == len(local_ids)
            if i < 2:
                assert s.log == [], folder.name
            else:
                assert [p for _, p, _ in s.log] == ["/7/13_5ec4e7_b.jpg"]


def _cli(cand: Path, out: Path, url: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "mining", "download", "--candidates", str(cand), "--out", str(out), "--workers", "1",
         "--shard-size", "10", "--threads", "4", "--no-progress", "--retries", "1", "--per-host-rps", "0",
         "--source", f"kind=flickr,host={url}", "--source", f"kind=multimedia-commons,host={url},name=mirror"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, PYTHONUNBUFFERED="1"),
        start_new_session=True)


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "jpg").rglob("*.jpg"))}


@pytest.mark.slow
def test_kill_and_resume_with_two_sources_gives_the_same_bytes(tmp_path):
    ids = list(range(1, 41))
    flickr = {i: "not_found" for i in range(1, 41, 3)} | {5: "truncated", 20: "gone"}
    mirror = {i: "ok" for i in ids} | {4: "not_found", 7: "small"}
    cand = candidates(tmp_path / "c.parquet", ids)
    with FaultServer(flickr, mirror=mirror, delay=0.05) as s:
        ref = _cli(cand, tmp_path / "ref", s.url)
        _, err = ref.communicate(timeout=120)
        assert ref.returncode == 0, err.decode()[-2000:]
        out = tmp_path / "out"
        proc = _cli(cand, out, s.url)
        deadline = time.monotonic() + 60
        while len(_files(out) if (out / "jpg").exists() else {}) < 12 and time.monotonic() < deadline \
                and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, "run ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc = _cli(cand, out, s.url)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-2000:]
    assert (out / "index.parquet").read_bytes() == (tmp_path / "ref" / "index.parquet").read_bytes()
    assert _files(out) == _files(tmp_path / "ref")
    idx = index(out)
    assert idx[1]["source"] == "mirror" and idx[2]["source"] == "flickr" and idx[4]["status"] == "not_found"
    assert idx[7]["status"] == "too_small" and not list((out / "status").glob("*.journal"))


def test_cli_defaults_are_the_schemas():
    d = section_defaults()
    args = build_parser().parse_args(["download", "--candidates", "c.parquet", "--out", "o"])
    settings = options.from_args(args, "download")
    for key in ("size", "per_host_rps", "threads", "shard_size", "min_size", "timeout", "connect_timeout",
                "retries", "max_throttle_wait", "min_ok_fraction", "tar"):
        assert getattr(settings, key) == d[key], key
    assert d["per_host_rps"] == 20 and d["shard_size"] == 5000
    assert getattr(args, options.dest("download", "host")) is None  # None = the schema's host (one flickr source)
    help_text = build_parser()._subparsers._group_actions[0].choices["download"].format_help()
    assert "default 20;" in " ".join(help_text.split()) and "(default 5000;" in help_text


@pytest.mark.parametrize("argv, msg", [
    (["--source", "kind=multimedia-commons,host=ftp://mirror.example"], "http:// or https://"),
    (["--host", "file:///etc"], "http:// or https://"),
    (["--source", "kind=flickr", "--host", "http://a.example"], "--host and --source"),
    (["--source", "kind=ftp"], "kind"),
    (["--source", "kind=local"], "needs `path`"),
    (["--source", "kind=flickr,colour=red"], "unknown key 'colour'"),
    (["--sources-json", "[{\"kind\": \"flickr\"}, {\"kind\": \"flickr\"}]"], "two sources are named 'flickr'"),
    (["--sources-json", "{"], "not JSON"),
])
def test_bad_sources_are_one_line_errors_before_any_request(tmp_path, capsys, argv, msg):
    cand = candidates(tmp_path / "c.parquet", [1])
    assert main(["download", "--candidates", str(cand), "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1, err


def test_manifest_sources_supersede_host_and_contradictions_are_refused():
    d = section_defaults()
    assert section_entries(dict(d)) == [{"kind": "flickr", "host": d["host"]}]
    assert section_entries({**d, "host": "http://a.example"}) == [{"kind": "flickr", "host": "http://a.example"}]
    srcs = [{"kind": "flickr", "host": "http://a.example"}, {"kind": "multimedia-commons"}]
    assert section_entries({**d, "sources": srcs}) == srcs
    assert section_entries({**d, "host": "http://a.example", "sources": srcs}) == srcs  # the same host: fine
    with pytest.raises(UserError, match="disagree"):
        section_entries({**d, "host": "http://b.example", "sources": srcs})
    # a flickr entry without a host takes download.host (the mirror keeps its own default)
    assert section_entries({**d, "host": "http://b.example", "sources": [{"kind": "flickr"}, srcs[1]]}) == \
        [{"kind": "flickr", "host": "http://b.example"}, srcs[1]]
    with pytest.raises(UserError, match="disagree"):
        section_entries({**d, "host": "http://b.example", "sources": [srcs[1]]})


def test_adding_the_mirror_later_asks_it_only_for_what_flickr_lost(tmp_path):
    """A download made from Flickr alone, rerun with the mirror added: the same plan; the
    photos Flickr served stay, those it lost (final failures) go to the mirror only."""
    cand = candidates(tmp_path / "c.parquet", [1, 2, 3, 4])
    out = tmp_path / "out"
    with FaultServer({2: "not_found", 3: "gone"}, mirror={2: "ok"}) as s:
        first = download.run(candidates=cand, out=out,
                             options=replace(DOWNLOAD, threads=2, shard_size=2, min_ok_fraction=0),
                             sources=two(s.url)[:1], **KW)
        n = len(s.log)
        second = download.run(candidates=cand, out=out, options=replace(DOWNLOAD, threads=2, shard_size=2),
                              sources=two(s.url), **KW)
        later = [p for _, p, _ in s.log[n:]]
    assert first["alive_full_res"] == 2 and first["gone_everywhere"] == 2
    assert sorted(later) == sorted(f"/{mirror_relpath(yfcc_hash(download_url(i)))}" for i in (2, 3))
    idx = index(out)
    assert [idx[i]["source"] for i in (1, 2, 3, 4)] == ["flickr", "mirror", None, "flickr"]
    assert idx[3]["urls"] == [f"{s.url}/7/3_5ec4e7_b.jpg", f"{s.url}/{mirror_relpath(yfcc_hash(download_url(3)))}"]
    assert (second["alive_full_res"], second["alive_low_res_only"], second["gone_everywhere"]) == (2, 1, 1)


def test_index_is_the_same_bytes_whatever_the_shard_size_and_workers(tmp_path):
    ids = list(range(1, 13))
    cand = candidates(tmp_path / "c.parquet", ids)
    with FaultServer({i: "not_found" for i in (2, 5, 9)} | {7: "small"}, mirror={i: "ok" for i in (2, 5, 7)}) as s:
        a = download.run(candidates=cand, out=tmp_path / "a", options=replace(DOWNLOAD, threads=4, shard_size=12),
                         sources=two(s.url), **KW)
        b = download.run(candidates=cand, out=tmp_path / "b", options=replace(DOWNLOAD, threads=2, shard_size=5),
                         cluster=Cluster(workers=2, processes=True), sources=two(s.url), progress=False)
    assert (tmp_path / "a" / "index.parquet").read_bytes() == (tmp_path / "b" / "index.parquet").read_bytes()
    assert a["sources"] == b["sources"] and a["alive_low_res_only"] == 3 and a["gone_everywhere"] == 1


def test_the_cli_downloads_from_two_sources_and_prints_what_is_alive(tmp_path, capsys):
    cand = candidates(tmp_path / "c.parquet", [1, 2, 3])
    with FaultServer({1: "gone", 2: "gone"}, mirror={1: "ok"}) as s:
        code = main(["download", "--candidates", str(cand), "--out", str(tmp_path / "o"), "--workers", "1", "--no-progress",
                     "--min-ok-fraction", "0", "--source", f"kind=flickr,host={s.url},threads=2",
                     "--source", f"kind=multimedia-commons,name=mc,host={s.url},per_host_rps=50"])
    out = capsys.readouterr().out
    assert code == 0
    assert "alive: 1 full-res, 1 low-res only, 1 gone everywhere" in out
    assert "flickr: 1/3 served (gone 2); mc: 1/2 served (not_found 1)" in out


def test_a_download_url_naming_another_photo_is_never_used_to_find_this_one(tmp_path):
    """The mirror is keyed by the download URL's hash: a row whose download URL is another
    photo's (broken or hostile metadata) must not fetch that photo's image as its own."""
    cand = tmp_path / "c.parquet"
    pq.write_table(pa.table({"photo_id": [1, 2], "server_id": [7, 7], "secret": ["5ec4e7"] * 2,
                             "secret_original": ["0a1b"] * 2, "extension": ["jpg"] * 2,
                             "download_url": [download_url(2), download_url(2)]}), cand)
    with FaultServer({1: "gone", 2: "gone"}, mirror={2: "ok"}) as s:
        download.run(candidates=cand, out=tmp_path / "out",
                     options=replace(DOWNLOAD, threads=2, shard_size=5, min_ok_fraction=0), sources=two(s.url), **KW)
        mirror_asked = [p for _, p, _ in s.log if p.startswith("/data/")]
    idx = index(tmp_path / "out")
    assert idx[1]["status"] == "no_download_url" and idx[2]["source"] == "mirror"
    assert mirror_asked == [f"/{mirror_relpath(yfcc_hash(download_url(2)))}"]
    # its image key is the photo id's MD5 (as without a download URL), never photo 2's hash
    assert idx[1]["photo_hash"] == image_key(1) and idx[2]["photo_hash"] == image_key(2, download_url(2))
    # two photos whose (naming) download URLs are one: refused before any request
    pq.write_table(pa.table({"photo_id": [1, 2], "server_id": [7, 7], "secret": ["5ec4e7"] * 2,
                             "secret_original": ["0a1b"] * 2, "extension": ["jpg"] * 2,
                             "download_url": ["http://x/1_5ec4e7./2_5ec4e7.jpg"] * 2}), cand)
    with pytest.raises(UserError, match="photos 1, 2 have the same image key"):
        download.run(candidates=cand, out=tmp_path / "out2", options=replace(DOWNLOAD, shard_size=5),
                     sources=two("http://127.0.0.1:9"), **KW)
