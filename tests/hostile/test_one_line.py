"""Bad input is one line and a non-zero exit, not a traceback.

- a decompression bomb (a 30000×30000 PNG saved as `.jpg`, a few dozen bytes) among the
  selected images is recorded as undecodable and left out, on every rerun — `release` used to
  crash on it each time;
- `release --margin -1/nan/inf` and `evaluate --random-seeds -1` are refused in one line;
- two `release` runs into the same `--out` at once: the second refuses with a lock message and
  the first finishes whole (the second used to die, leaving `.OUT.partial`);
- `download --host` with a file:, ftp: or javascript: URL is refused before any request.
- a full disk during the download (a 3 MB tmpfs, mounted in a private user and mount
  namespace: `unshare -r -m`, seen by nobody else) is one line, not a traceback per shard and
  per call to the rate-limit Actor after the cluster went down.
"""

from __future__ import annotations

import os
import shlex
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from download_server import ServerProcess
from scripted_server import download_url, jpeg, unique

from mining.cli import main
from mining.photos.imagedecode import open_upright
from mining.settings.layout import image_relpath

from paths import ROOT as REPO

BY = ("Attribution License", "http://creativecommons.org/licenses/by/2.0/")


def bomb_png(width: int = 30000, height: int = 30000) -> bytes:
    """A PNG header declaring width × height (grey): Pillow refuses it as a decompression bomb at open."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def _world(root: Path, ids: list[int], bombs: set[int] = frozenset()) -> Path:
    """A selection of `ids` (CC BY) and their images; the `bombs` are decompression bombs."""
    for pid in ids:
        path = root / "images" / image_relpath(pid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bomb_png() if pid in bombs else unique(jpeg(), pid))
    sel = root / "selected"
    sel.mkdir(parents=True)
    frame = pd.DataFrame([{"rank": r, "photo_id": pid, "path": image_relpath(pid), "license_name": BY[0],
                           "license_url": BY[1], "user_nsid": f"{pid}@N00", "user_nickname": f"owner {pid}"}
                          for r, pid in enumerate(ids, 1)])
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sel / "distractors.parquet")
    return sel


def _release_argv(root: Path, out: str, *extra: str) -> list[str]:
    return ["release", "--selected", str(root / "selected"), "--images", str(root / "images"),
            "--out", str(root / out), "--no-progress", "--no-kit", *extra]


def _one_error_line(capsys, verb: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mining {verb}: error: "), err
    return err[0]


def test_the_bomb_is_what_the_test_says():
    from PIL import Image

    with pytest.raises(Image.DecompressionBombError):
        Image.open(__import__("io").BytesIO(bomb_png()))
    with pytest.raises(ValueError, match="decompression bomb"):  # the one decode helper: a failure like any other
        with open_upright(bomb_png(), "RGB"):
            pass


def test_a_decompression_bomb_is_left_out_on_every_run(tmp_path, capsys):
    _world(tmp_path, [1, 2, 3, 4], bombs={3})
    for out in ("rel", "rel"):  # the rerun too
        assert main(_release_argv(tmp_path, out)) == 0, capsys.readouterr().err
        capsys.readouterr()
        table = pq.read_table(tmp_path / out / "release.parquet").to_pandas().set_index("photo_id")
        assert table.status.to_dict() == {1: "released", 2: "released", 3: "undecodable", 4: "released"}
        assert not (tmp_path / out / image_relpath(3)).exists()
        assert (tmp_path / out / "distractors.txt").read_text().splitlines() == [image_relpath(p) for p in (1, 2, 4)]


@pytest.mark.parametrize("margin", ["-1", "nan", "inf", "-0.5"])
def test_release_refuses_a_margin_out_of_range_in_one_line(tmp_path, capsys, margin):
    _world(tmp_path, [1])
    assert main(_release_argv(tmp_path, "rel", "--margin", margin)) == 2
    assert "--margin must be a number from 0 to 5" in _one_error_line(capsys, "release")
    assert not (tmp_path / "rel").exists() and not list(tmp_path.glob(".rel*"))


@pytest.mark.parametrize("seeds", [["-1"], ["0", "-3"]])
def test_evaluate_refuses_negative_seeds_in_one_line(tmp_path, capsys, seeds):
    rc = main(["evaluate", "--landmarks", str(tmp_path / "gnd_x.pkl"), "--descriptors", str(tmp_path / "d"),
               "--scores", str(tmp_path / "s"), "--selected", str(tmp_path / "sel"), "--out", str(tmp_path / "ev"),
               "--random-seeds", *seeds])
    assert rc == 2
    assert "--random-seeds: give whole numbers ≥ 0" in _one_error_line(capsys, "evaluate")
    assert not (tmp_path / "ev").exists()


@pytest.mark.parametrize("host", ["file:///etc", "ftp://example.com", "javascript:alert(1)", "FILE:///etc/passwd"])
def test_download_refuses_a_host_that_is_not_http_before_anything(tmp_path, capsys, host):
    cand = tmp_path / "candidates.parquet"
    pq.write_table(pa.table({"photo_id": [1], "server_id": [7], "secret": ["ab"], "secret_original": ["cd"],
                             "extension": ["jpg"]}), cand)
    assert main(["download", "--candidates", str(cand), "--out", str(tmp_path / "img"), "--host", host,
                 "--no-progress"]) == 2
    assert "http://" in _one_error_line(capsys, "download")
    assert not (tmp_path / "img").exists()


def test_a_second_release_into_the_same_out_refuses_and_the_first_finishes(tmp_path, capsys):
    ids = list(range(1, 41))
    _world(tmp_path, ids)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    first = subprocess.Popen([sys.executable, "-m", "mining", *_release_argv(tmp_path, "rel", "--workers", "1")],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        journal = tmp_path / ".rel.partial" / ".journal.jsonl"  # written after the first image
        t0 = time.monotonic()
        while not (journal.exists() and journal.stat().st_size) and first.poll() is None:
            assert time.monotonic() - t0 < 120, "the first release never started"
            time.sleep(0.05)
        assert first.poll() is None, "the first release ended before the second could start: make it longer"
        assert main(_release_argv(tmp_path, "rel", "--workers", "1")) == 2
        line = _one_error_line(capsys, "release")
        assert "another `mining release` is writing this release now" in line and str(tmp_path / "rel") in line
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err[-2000:]
    table = pq.read_table(tmp_path / "rel" / "release.parquet").to_pandas()
    assert (table.status == "released").sum() == len(ids)
    assert not list(tmp_path.glob(".rel*"))  # no staging folder, no lock file left
    # and once it is done, the next run goes ahead
    assert main(_release_argv(tmp_path, "rel")) == 0


def _can_mount_privately() -> bool:
    if shutil.which("unshare") is None:
        return False
    r = subprocess.run(["unshare", "-r", "-m", "sh", "-c", "mount -t tmpfs -o size=1m none /mnt"],
                       capture_output=True, timeout=30)
    return r.returncode == 0


@pytest.mark.skipif(not _can_mount_privately(), reason="no private mount namespace (unshare -r -m) here")
def test_a_full_disk_during_the_download_is_one_line(tmp_path):
    ids = list(range(1, 81))
    cand = tmp_path / "candidates.parquet"
    pq.write_table(pa.table({"photo_id": ids, "server_id": [7] * 80, "secret": ["5ec4e7"] * 80,
                             "secret_original": ["ab"] * 80, "extension": ["jpg"] * 80,
                             "download_url": [download_url(i) for i in ids]}), cand)
    disk = tmp_path / "disk"
    disk.mkdir()
    with ServerProcess({}) as s:  # 80 photos of ~200 kB: 16 MB for a 3 MB disk
        script = (f"mount -t tmpfs -o size=3m none {shlex.quote(str(disk))} && exec {shlex.quote(sys.executable)} "
                  f"-m mining download --candidates {shlex.quote(str(cand))} --out {shlex.quote(str(disk / 'img'))} "
                  f"--host {s.url} --workers 2 --shard-size 20 --no-progress")
        r = subprocess.run(["unshare", "-r", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 1, r.stderr[-3000:]
    assert "Traceback" not in r.stderr and "Compute Failed" not in r.stderr, r.stderr[-3000:]
    errors = [line for line in r.stderr.splitlines() if " ERROR " in line or line.startswith("mining download: error")]
    assert errors == [f"mining download: error: {disk / 'img'}: No space left on device"], r.stderr[-3000:]
