"""`mining download` against a fault-injecting local server: statuses, politeness, resume."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mining.cli import main
from mining.compute.cluster import Cluster
from mining.settings.options import defaults
from mining.stages.download import stage as download
from mining.stages.download.downloader import FetchConfig, download_shard, verify
from mining.stages.download.ratelimit import HostSchedule, parse_retry_after
from mining.stages.download.reader import Shard
from mining.errors import UserError
from mining.settings.layout import image_key, image_relpath
from download_server import FaultServer, ServerProcess
from scripted_server import download_url, jpeg, unique

KINDS = {
    "ok": "ok", "not_found": "not_found", "gone": "gone", "forbidden": "forbidden",
    "placeholder_offsite": "unavailable_placeholder", "placeholder": "unavailable_placeholder",
    "placeholder_hash": "unavailable_placeholder", "small": "too_small", "truncated": "corrupt",
    "missing_eoi": "corrupt", "png": "not_jpeg", "html": "not_jpeg", "error500": "error", "cut": "error",
    "stall": "timeout", "trickle": "timeout", "throttle": "ok", "flaky503": "ok",
    "throttle_forever": "throttled_gave_up",
}
DOWNLOAD = defaults("download")  # the schema's settings; each test gives its host and shard size


def durl(pid: int) -> str:
    """The candidates' download URL of a photo (YFCC's form; its MD5 is the photo hash)."""
    return download_url(pid)


def key_of(pid: int) -> str:
    return image_key(pid, durl(pid))


def path_of(pid: int) -> str:
    return image_relpath(pid, durl(pid))


def candidates(path: Path, ids: list[int], drop: str | None = None) -> Path:
    cols = {"photo_id": ids, "server_id": [7] * len(ids), "secret": ["5ec4e7"] * len(ids),
            "secret_original": ["0a1b"] * len(ids), "extension": ["jpg"] * len(ids), "title": ["t"] * len(ids),
            "download_url": [durl(i) for i in ids]}
    if drop:
        cols.pop(drop)
    pq.write_table(pa.table(cols), path)
    return path


def status_rows(out: Path) -> dict[int, dict]:
    rows = {}
    for f in sorted((out / "status").glob("shard-*.parquet")):
        for r in pq.read_table(f).to_pylist():
            rows[r["photo_id"]] = r
    return rows


def stored(out: Path) -> set[str]:
    return {p.name for p in (out / "jpg").rglob("*") if p.is_file()} if (out / "jpg").exists() else set()


def test_every_status_and_never_retrying_final_answers(tmp_path):
    behaviour = {i + 1: k for i, k in enumerate(KINDS)}
    behaviour[100] = behaviour[101] = "dup"
    with FaultServer(behaviour) as s:
        ids = sorted(behaviour)
        urls = [f"{s.url}/7/{i}_5ec4e7_b.jpg" for i in ids]
        cfg = FetchConfig(timeout=4.0, max_throttle_wait=2.5, threads=8, max_retries=2,
                          placeholder_sha256=frozenset({hashlib.sha256(s.placeholder_jpeg).hexdigest()}))
        result = download_shard(Shard(0, ids, urls), tmp_path, cfg, HostSchedule(0))
        log = list(s.log)
    rows = status_rows(tmp_path)
    assert set(rows) == set(ids)
    for pid, kind in behaviour.items():
        want = "ok" if kind == "dup" else KINDS[kind]
        assert rows[pid]["status"] == want, kind
        assert (tmp_path / image_relpath(pid)).exists() == (want == "ok"), kind
    assert sum(result["counts"].values()) == len(ids)
    # final HTTP answers are asked once; transient ones are retried
    by_kind = {k: rows[p] for p, k in behaviour.items()}
    for k in ("not_found", "gone", "forbidden", "placeholder_offsite"):
        assert by_kind[k]["attempts"] == 1, (k, by_kind[k])
        assert len([1 for _, p, _ in log if f"/{[i for i, v in behaviour.items() if v == k][0]}_" in p]) == 1
    assert by_kind["error500"]["attempts"] == 2 and by_kind["error500"]["http_code"] == 500
    assert by_kind["flaky503"]["attempts"] == 3 and by_kind["throttle"]["attempts"] == 2
    assert by_kind["ok"]["width"] == 1024 and by_kind["ok"]["height"] == 768
    assert by_kind["ok"]["sha256"] == hashlib.sha256((tmp_path / image_relpath(1)).read_bytes()).hexdigest()
    assert by_kind["small"]["width"] == 640
    # a redirect is never followed to the other host
    assert not any("photo_unavailable" in p and "/images/" not in p for _, p, _ in log)
    assert not list(tmp_path.rglob(".*.tmp"))


def test_retry_after_cools_the_whole_host(tmp_path):
    behaviour = {1: "throttle"}
    with FaultServer(behaviour, default="ok", delay=0.02, retry_after="1") as s:
        ids = list(range(1, 41))
        urls = [f"{s.url}/7/{i}_5ec4e7_b.jpg" for i in ids]
        download_shard(Shard(0, ids, urls), tmp_path, FetchConfig(threads=4, rps=0), HostSchedule(0))
        log = sorted(s.log)
    t429 = next(t for t, _, c in log if c == 429)
    # requests already in flight may land just after; then nothing until Retry-After has passed
    quiet = [t for t, _, _ in log if t429 + 0.15 < t < t429 + 0.95]
    assert quiet == []
    retried = [t for t, p, c in log if "/1_" in p and c == 200]
    assert retried and retried[0] - t429 >= 0.95
    assert all(r["status"] == "ok" for r in status_rows(tmp_path).values())


def test_parse_retry_after():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert 0 <= parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") < 1


def test_verify_decodes_fully(tmp_path):
    cfg = FetchConfig()
    good = unique(jpeg(), 5)
    assert verify(good, cfg) == ("ok", 1024, 768)
    assert verify(good[: len(good) // 2], cfg)[0] == "corrupt"
    assert verify(good[:-2], cfg)[0] == "corrupt"
    assert verify(b"GIF89a....", cfg)[0] == "not_jpeg"
    assert verify(good, FetchConfig(min_size=2000))[0] == "too_small"
    assert verify(good, FetchConfig(placeholder_sha256=frozenset({hashlib.sha256(good).hexdigest()})))[0] == \
        "unavailable_placeholder"


def _full_decode_ok(data: bytes) -> bool:
    """The verdict of a full-size Pillow decode (what verify did before its 1/8 draft)."""
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
    except (OSError, SyntaxError, ValueError):
        return False
    return data.rstrip(b"\x00\r\n ").endswith(b"\xff\xd9")


def test_verify_at_one_eighth_scale_rejects_what_a_full_decode_rejects():
    """verify decodes a draft (1/8 scale, grey); cut or damaged streams of baseline, progressive,
    CMYK, grey and restart-marker JPEGs get the same verdict as from a full decode."""
    import io
    import random

    from PIL import Image

    rng = random.Random(1)
    base = Image.open(io.BytesIO(jpeg(1024, 768, seed=3)))
    cfg, cases, rejected = FetchConfig(), 0, 0
    for mode, kw in [("RGB", {}), ("RGB", {"progressive": True}), ("CMYK", {}), ("L", {}),
                     ("RGB", {"restart_marker_blocks": 4})]:
        buf = io.BytesIO()
        base.convert(mode).save(buf, "JPEG", quality=85, **kw)
        good = buf.getvalue()
        assert verify(good, cfg) == ("ok", 1024, 768) and _full_decode_ok(good)
        for _ in range(25):
            k = rng.randrange(4, len(good) - 1)
            bad = good[:k] if rng.random() < 0.5 else good[:k] + bytes([good[k] ^ 0xFF]) + good[k + 1:]
            ours = verify(bad, cfg)[0] == "ok"
            assert ours == _full_decode_ok(bad), (mode, kw, k)
            cases, rejected = cases + 1, rejected + (not ours)
    assert cases == 125 and rejected > 50  # every cut is caught; a flipped byte often still decodes


def test_cluster_wide_rate_limit_with_two_workers(tmp_path):
    cand = candidates(tmp_path / "c.parquet", list(range(1, 41)))
    with ServerProcess() as s:
        summary = download.run(candidates=cand, out=tmp_path / "out",
                               options=replace(DOWNLOAD, per_host_rps=10, threads=8, host=s.url, shard_size=10),
                               cluster=Cluster(workers=2, processes=False), progress=False)
        seen = s.max_per_window(1.0)
        n_requests = len(s.fetch_log())
    assert summary["counts"]["ok"] == 40 and n_requests == 40
    # never exceeded across both workers; and not far below it (the lower bound allows for a
    # loaded 2-core machine: 8 failed once there while the CI suite ran beside other work)
    assert 6 <= seen <= 10


def test_download_joins_a_running_scheduler_and_leaves_it_running(tmp_path):
    """`--scheduler ADDRESS`: the shards run on that cluster's worker processes (the same
    path as a SLURM deployment's scheduler), and the cluster is not ours to close."""
    from distributed import Client, LocalCluster

    cand = candidates(tmp_path / "c.parquet", list(range(1, 25)))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            ServerProcess() as s:
        before = cluster.scheduler.transition_counter
        summary = download.run(candidates=cand, out=tmp_path / "out",
                               options=replace(DOWNLOAD, per_host_rps=100, threads=4, host=s.url, shard_size=6),
                               cluster=Cluster(scheduler=cluster.scheduler_address), progress=False)
        assert cluster.scheduler.transition_counter - before >= 4 * 3  # 4 shards went through it
        with Client(cluster) as c:
            assert c.submit(lambda: 41 + 1).result(timeout=30) == 42  # still up
        n_requests = len(s.fetch_log())
    assert summary["counts"]["ok"] == 24 and n_requests == 24
    assert stored(tmp_path / "out") == {Path(path_of(i)).name for i in range(1, 25)}


def test_end_to_end_summary_duplicates_and_resume(tmp_path):
    behaviour = {2: "not_found", 3: "placeholder_offsite", 4: "dup", 5: "dup", 6: "error500", 7: "truncated"}
    cand = candidates(tmp_path / "c.parquet", list(range(1, 13)))
    out = tmp_path / "out"
    cfg = replace(DOWNLOAD, threads=4, retries=1)
    with FaultServer(behaviour) as s:
        first = download.run(candidates=cand, out=out, options=replace(cfg, host=s.url, shard_size=5),
                             cluster=Cluster(workers=1, processes=False), progress=False)
        n1 = len(s.log)
        s.behaviour[6] = "ok"  # the server recovered
        second = download.run(candidates=cand, out=out, options=replace(cfg, host=s.url, shard_size=5),
                              cluster=Cluster(workers=1, processes=False), progress=False)
        n2 = len(s.log) - n1
        third = download.run(candidates=cand, out=out, options=replace(cfg, host=s.url, shard_size=5),
                             cluster=Cluster(workers=1, processes=False), progress=False)
        n3 = len(s.log) - n1 - n2
    assert first["counts"]["ok"] == 8 and first["counts"]["error"] == 1 and first["counts"]["corrupt"] == 1
    assert first["duplicate_sha256_groups"] == 1 and first["duplicates"] == [[4, 5]]
    assert n2 == 1 and second["counts"]["ok"] == 9 and second["counts"]["error"] == 0  # only the transient one
    assert n3 == 0 and third["this_run"]["shards"] == 0
    assert json.loads((out / "summary.json").read_text())["counts"]["ok"] == 9
    assert len(stored(out)) == 9
    with pytest.raises(UserError, match="another plan"):
        download.run(candidates=cand, out=out, options=replace(cfg, host=s.url, shard_size=4),
                     cluster=Cluster(workers=1, processes=False), progress=False)


def test_tar_shards(tmp_path):
    cand = candidates(tmp_path / "c.parquet", list(range(1, 9)))
    out = tmp_path / "out"
    with FaultServer({3: "gone"}) as s:
        summary = download.run(candidates=cand, out=out,
                               options=replace(DOWNLOAD, threads=4, host=s.url, shard_size=5, tar=True),
                               cluster=Cluster(workers=1, processes=False), progress=False)
    assert summary["counts"]["ok"] == 7 and not (out / "jpg").exists()
    names = set()
    for t in sorted((out / "tar").glob("shard-*.tar")):
        with tarfile.open(t) as tf:
            names |= set(tf.getnames())
    assert names == {f"{key_of(i)}.jpg" for i in range(1, 9) if i != 3}
    index = pq.read_table(out / "index.parquet").to_pylist()
    assert [r["tar"] for r in index] == ["tar/shard-00000.tar"] * 2 + [None] + ["tar/shard-00000.tar"] * 2 + \
        ["tar/shard-00001.tar"] * 3 and all(r["path"] is None for r in index)


def test_bad_input_fails_before_any_request(tmp_path, capsys):
    with FaultServer() as s:
        bad_cols = candidates(tmp_path / "nocol.parquet", [1, 2], drop="secret")
        assert main(["download", "--candidates", str(bad_cols), "--out", str(tmp_path / "o"), "--host", s.url]) == 2
        assert "secret" in capsys.readouterr().err
        (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
        assert main(["download", "--candidates", str(tmp_path / "junk.parquet"), "--out", str(tmp_path / "o"), "--host", s.url]) == 2
        assert "cannot read" in capsys.readouterr().err
        assert main(["download", "--candidates", str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "o"), "--host", s.url]) == 2
        assert "not found" in capsys.readouterr().err
        good = candidates(tmp_path / "c.parquet", [1, 2])
        (tmp_path / "file").write_text("x")
        assert main(["download", "--candidates", str(good), "--out", str(tmp_path / "file" / "o"), "--host", s.url]) == 2
        err = capsys.readouterr().err
        assert "not writable" in err and len(err.strip().splitlines()) == 1
        assert s.log == []


def _run_cli(cand: Path, out: Path, host: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "mining", "download", "--candidates", str(cand), "--out", str(out), "--host", host, "--workers", "1",
         "--shard-size", "15", "--threads", "4", "--no-progress", "--retries", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_gives_the_same_ok_files(tmp_path):
    ids = list(range(1, 61))
    behaviour = {5: "not_found", 17: "truncated", 33: "placeholder_offsite", 48: "small"}
    cand = candidates(tmp_path / "c.parquet", ids)
    with FaultServer(behaviour, delay=0.05) as s:
        ref = download.run(candidates=cand, out=tmp_path / "ref",
                           options=replace(DOWNLOAD, threads=4, retries=1, host=s.url, shard_size=15),
                           cluster=Cluster(workers=1, processes=False), progress=False)
        out = tmp_path / "out"
        proc = _run_cli(cand, out, s.url)
        deadline = time.monotonic() + 60
        while len(stored(out)) < 20 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, "run ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = len(stored(out))
        assert 0 < killed_at < 56
        proc = _run_cli(cand, out, s.url)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-2000:]
    assert stored(out) == stored(tmp_path / "ref") and len(stored(out)) == ref["counts"]["ok"] == 56
    rows, ref_rows = status_rows(out), status_rows(tmp_path / "ref")
    assert {p: r["status"] for p, r in rows.items()} == {p: r["status"] for p, r in ref_rows.items()}
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    for p, r in rows.items():
        if r["status"] == "ok":
            assert hashlib.sha256((out / path_of(p)).read_bytes()).hexdigest() == r["sha256"]
    assert (out / "index.parquet").read_bytes() == (tmp_path / "ref" / "index.parquet").read_bytes()


def test_resuming_from_another_host_is_the_same_plan():
    from mining.stages.download.reader import plan_fingerprint

    ids = [1, 2, 3]
    keys = [key_of(i) for i in ids]
    # hosts are not part of the plan: the fingerprint has the ids, keys, flickr sizes and shard size
    a = plan_fingerprint(ids, keys, 100, "b")
    assert a == plan_fingerprint(ids, list(keys), 100, "b")
    assert a != plan_fingerprint(ids, keys, 100, "o") and a != plan_fingerprint(ids, keys, 50, "b")
    assert a != plan_fingerprint(ids, [image_key(i) for i in ids], 100, "b")


def closed_port_url() -> str:
    """The URL of a localhost port nobody listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_unreachable_host_fails_naming_host_failure_and_key_then_resumes(tmp_path, capsys):
    cand = candidates(tmp_path / "c.parquet", list(range(1, 31)))
    out = tmp_path / "out"
    host = closed_port_url()
    args = ["download", "--candidates", str(cand), "--out", str(out), "--workers", "1", "--shard-size", "10", "--threads", "8",
            "--retries", "1", "--no-progress"]
    assert main([*args, "--host", host]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "only 0 of 30 photos (0.0%)" in err and host in err and "download.host" in err
    assert "most common failure: error (no HTTP answer: connection refused" in err and "for 30 photos" in err
    # the statuses stay (transient failures), so the same command with the right host resumes
    assert {r["status"] for r in status_rows(out).values()} == {"error"} and len(status_rows(out)) == 30
    assert json.loads((out / "summary.json").read_text())["failure"] == err.split("error: ", 1)[1]
    with FaultServer() as s:
        download.run(candidates=cand, out=out, options=replace(DOWNLOAD, threads=8, host=s.url, shard_size=10),
                     cluster=Cluster(workers=1, processes=False), progress=False)
        assert len(s.log) == 30
    assert {r["status"] for r in status_rows(out).values()} == {"ok"} and len(stored(out)) == 30
    assert json.loads((out / "summary.json").read_text())["failure"] is None


def test_a_wrong_host_answering_404_fails_and_the_right_host_asks_again(tmp_path):
    cand = candidates(tmp_path / "c.parquet", list(range(1, 13)))
    out = tmp_path / "out"
    cfg = replace(DOWNLOAD, threads=4, retries=1, shard_size=5)
    kw = dict(cluster=Cluster(workers=1, processes=False), progress=False)
    with FaultServer(default="not_found") as wrong:
        with pytest.raises(UserError, match=r"only 0 of 12 photos .* most common failure: not_found \(HTTP 404\) "
                                            r"for 12 photos\. .*`download.host`") as exc:
            download.run(candidates=cand, out=out, options=replace(cfg, host=wrong.url), **kw)
        assert wrong.url in str(exc.value)
        with pytest.raises(UserError, match="only 0 of 12"):  # the same host: final answers are not asked again
            download.run(candidates=cand, out=out, options=replace(cfg, host=wrong.url), **kw)
        assert len(wrong.log) == 12
    with FaultServer({3: "not_found"}) as right:  # a final failure is final for the host that gave it
        summary = download.run(candidates=cand, out=out, options=replace(cfg, host=right.url), **kw)
        assert len(right.log) == 12
    assert summary["counts"]["ok"] == 11 and summary["counts"]["not_found"] == 1 and summary["failure"] is None


def test_the_ok_share_threshold_is_configurable(tmp_path):
    behaviour = {i: "gone" for i in range(1, 8)}  # 7 of 12 gone: 5 ok = 41.7 %
    cand = candidates(tmp_path / "c.parquet", list(range(1, 13)))
    kw = dict(cluster=Cluster(workers=1, processes=False), progress=False)
    with FaultServer(behaviour) as s:
        with pytest.raises(UserError, match=r"only 5 of 12 photos \(41.7%\) .* below download.min_ok_fraction = "
                                            r"0.5 .* gone \(HTTP 410\) for 7 photos"):
            download.run(candidates=cand, out=tmp_path / "a",
                         options=replace(DOWNLOAD, threads=4, host=s.url, shard_size=6), **kw)
        lenient = replace(DOWNLOAD, threads=4, host=s.url, min_ok_fraction=0.4, shard_size=6)
        assert download.run(candidates=cand, out=tmp_path / "b", options=lenient, **kw)["counts"]["ok"] == 5
        with pytest.raises(UserError, match="between 0 and 1"):
            download.run(candidates=cand, out=tmp_path / "c",
                         options=replace(DOWNLOAD, host=s.url, min_ok_fraction=1.5, shard_size=6), **kw)


def test_a_hopeless_download_stops_before_the_remaining_shards(tmp_path):
    cand = candidates(tmp_path / "c.parquet", list(range(1, 201)))
    host = closed_port_url()
    cfg = replace(DOWNLOAD, threads=10, retries=1, shard_size=10)
    kw = dict(cluster=Cluster(workers=1, processes=False), progress=False)
    with pytest.raises(UserError, match=r"download stopped: none of the \d+ photos tried in this run could be "
                                        rf"downloaded from {host}; most common failure: error"):
        download.run(candidates=cand, out=tmp_path / "out", options=replace(cfg, host=host), give_up_after=20, **kw)
    done = len(list((tmp_path / "out" / "status").glob("shard-*.parquet")))
    assert 2 <= done < 20
    # index.parquet is written by every run, a failed one too: the photos not reached are not_tried
    statuses = pq.read_table(tmp_path / "out" / "index.parquet").column("status").to_pylist()
    assert len(statuses) == 200 and statuses.count("error") == 10 * done and statuses.count("not_tried") == 200 - 10 * done
    # with the checks off the same download runs to its end and reports its errors
    summary = download.run(candidates=cand, out=tmp_path / "out", options=replace(cfg, host=host, min_ok_fraction=0),
                           give_up_after=20, **kw)
    assert summary["counts"]["error"] == 200 and summary["failure"] is None


def test_size_o_skips_photos_without_an_original_secret_and_goes_on(tmp_path):
    """`--size o`: a photo whose secret_original is empty (or null) gets `no_original`, without a
    request, and the others are downloaded; only a column empty for every photo is refused."""
    ids = list(range(1, 9))
    seco = ["0a1b", "", "0a1b", None, "0a1b", "0a1b", "", "0a1b"]
    cand = tmp_path / "c.parquet"
    pq.write_table(pa.table({"photo_id": ids, "server_id": [7] * 8, "secret": ["5ec4e7"] * 8,
                             "secret_original": pa.array(seco, pa.string()), "extension": ["jpg"] * 8}), cand)
    out = tmp_path / "out"
    kw = dict(cluster=Cluster(workers=1, processes=False), progress=False)
    with FaultServer() as s:
        summary = download.run(candidates=cand, out=out,
                               options=replace(DOWNLOAD, threads=4, host=s.url, size="o", shard_size=3), **kw)
        asked = sorted(int(p.split("/")[2].split("_")[0]) for _, p, _ in s.log)
        again = download.run(candidates=cand, out=out,
                             options=replace(DOWNLOAD, threads=4, host=s.url, size="o", shard_size=3), **kw)
        assert len(s.log) == len(asked)
    assert asked == [1, 3, 5, 6, 8] and all("_0a1b_o.jpg" in p for _, p, _ in s.log)
    assert summary["counts"]["ok"] == 5 and summary["counts"]["no_original"] == 3 and summary["failure"] is None
    rows = status_rows(out)
    assert {p for p, r in rows.items() if r["status"] == "no_original"} == {2, 4, 7}
    assert all(rows[p]["url"] is None and rows[p]["attempts"] == 0 for p in (2, 4, 7))
    assert stored(out) == {Path(image_relpath(i)).name for i in (1, 3, 5, 6, 8)}  # no download_url: MD5 keys
    assert again["this_run"]["shards"] == 0 and again["counts"] == summary["counts"]
    # every photo without one: the whole download is refused (wrong candidates), before any request
    pq.write_table(pa.table({"photo_id": [1, 2], "server_id": [7, 7], "secret": ["5ec4e7"] * 2,
                             "secret_original": pa.array([None, None], pa.string()), "extension": ["jpg"] * 2}),
                   tmp_path / "none.parquet")
    with pytest.raises(UserError, match="--size o needs secret_original"):
        download.run(candidates=tmp_path / "none.parquet", out=tmp_path / "out2",
                     options=replace(DOWNLOAD, host="http://127.0.0.1:9", size="o", shard_size=3), **kw)


def test_requests_go_through_the_environment_proxy_unless_no_proxy_exempts_the_host(tmp_path, monkeypatch):
    """urllib3 is used directly, but like requests it honours http_proxy / no_proxy."""
    from mining.stages.download.downloader import Pools

    with FaultServer() as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.setenv("no_proxy", "direct.example")
        import urllib3

        pools = Pools(FetchConfig())
        assert type(pools.for_url("http://direct.example/x")) is urllib3.PoolManager
        assert isinstance(pools.for_url("http://photos.example/x"), urllib3.ProxyManager)
        urls = [f"http://photos.example/7/{i}_5ec4e7_b.jpg" for i in (1, 2)]
        download_shard(Shard(0, [1, 2], urls), tmp_path, FetchConfig(threads=2, max_retries=1), HostSchedule(0))
        # the proxy got the absolute URLs (it answers 404: it is no real proxy)
        assert sorted(p for _, p, _ in proxy.log) == urls
    assert {r["status"] for r in status_rows(tmp_path).values()} == {"not_found"}


def test_the_failure_summary_counts_the_current_hosts_failures_as_resume_does():
    """One "same host?" for the download stage (reader.origin): scheme, host and port, case
    folded. The summary counts only this host's failures when it has any."""
    import pyarrow as pa

    from mining.stages.download.logger import most_common_failure
    from mining.stages.download.reader import origin

    urls = (["HTTP://Mirror.example:8000/1/%d_a_b.jpg" % i for i in range(3)]
            + ["http://old.example/1/%d_a_b.jpg" % i for i in range(5)])
    status = pa.table({"url": urls, "status": ["not_found"] * 3 + ["timeout"] * 5, "http_code": [404] * 3 + [None] * 5})
    assert origin(urls[0]) == origin("http://mirror.example:8000") == "http://mirror.example:8000"
    assert origin("https://mirror.example:8000/x") != origin(urls[0])  # another scheme is another origin
    assert most_common_failure(status, "http://mirror.example:8000") == "not_found (HTTP 404) for 3 photos"
    # no failure from this host: the summary falls back to all failures
    assert most_common_failure(status, "http://new.example") == "timeout (no answer within --timeout) for 5 photos"


def test_no_workers_is_refused_by_the_stage_before_anything_is_read(tmp_path, capsys):
    """The stage checks its cluster (the CLI only parses): no worker is one line, exit 2, before
    the candidates are read or OUT is made."""
    with pytest.raises(UserError, match="--workers must be at least 1"):
        download.run(candidates=tmp_path / "missing.parquet", out=tmp_path / "out", options=defaults("download"),
                     cluster=Cluster(workers=0), progress=False)
    assert main(["download", "--candidates", str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "out"),
                 "--workers", "0", "--no-progress"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
