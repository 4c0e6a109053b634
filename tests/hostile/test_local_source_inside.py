"""A `local` download source adopts only regular files whose real path is inside its folder:
a symbolic link (to a file, or a folder linked in) that leads out of it is not a photo of the
folder, and its bytes never reach `images/` (from where a release would publish them). A
broken img2dataset Parquet in the folder is an error naming it, not its images silently
`not_found`."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scripted_server import download_url, jpeg, unique

from mining.settings import options
from mining.cli import main
from mining.compute.cluster import Cluster
from mining.settings.layout import image_relpath
from mining.stages.download import stage as download
from mining.stages.download.sources import LocalFolder, Source

DOWNLOAD = options.defaults("download")
KW = dict(cluster=Cluster(workers=1, processes=False), progress=False)
IDS = [11, 12, 13]


def _candidates(path: Path) -> Path:
    n = len(IDS)
    pq.write_table(pa.table({"photo_id": IDS, "server_id": [7] * n, "secret": ["5ec4e7"] * n,
                             "secret_original": ["0a1b"] * n, "extension": ["jpg"] * n,
                             "download_url": [download_url(i) for i in IDS]}), path)
    return path


def _run(tmp_path, folder):
    """Download from the local folder alone; {photo_id: source or status}."""
    out = tmp_path / "out"
    download.run(candidates=_candidates(tmp_path / "c.parquet"), out=out,
                 options=replace(DOWNLOAD, threads=2, shard_size=5, min_ok_fraction=0),
                 sources=[Source("local", "mine", path=str(folder))], **KW)
    rows = pq.read_table(out / "index.parquet").to_pylist()
    return {r["photo_id"]: r["source"] if r["status"] == "ok" else r["status"] for r in rows}, out


def _ours(folder: Path, pid: int) -> Path:
    p = folder / image_relpath(pid, download_url(pid))
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def test_a_file_link_out_of_the_folder_is_not_adopted(tmp_path):
    folder, outside = tmp_path / "mine", tmp_path / "secret.jpg"
    outside.write_bytes(unique(jpeg(), 12))
    _ours(folder, 11).write_bytes(unique(jpeg(), 11))
    os.symlink(outside, _ours(folder, 12))
    found, out = _run(tmp_path, folder)
    assert found == {11: "mine", 12: "not_found", 13: "not_found"}
    assert not any(p.read_bytes() == outside.read_bytes() for p in out.rglob("*.jpg"))


def test_a_folder_linked_in_from_outside_is_not_adopted(tmp_path):
    folder, elsewhere = tmp_path / "mine", tmp_path / "elsewhere"
    target = _ours(folder, 13)
    shard = target.parent  # jpg/<3 hex>/: replaced by a link to a folder outside
    (elsewhere / shard.name).mkdir(parents=True)
    (elsewhere / shard.name / target.name).write_bytes(unique(jpeg(), 13))
    shard.rmdir()
    os.symlink(elsewhere / shard.name, shard)
    found, _ = _run(tmp_path, folder)
    assert found[13] == "not_found"


def test_a_link_that_stays_inside_is_adopted(tmp_path):
    folder = tmp_path / "mine"
    (folder / "store").mkdir(parents=True)
    (folder / "store/a.jpg").write_bytes(unique(jpeg(), 11))
    os.symlink(folder / "store", folder / "linked")
    target = _ours(folder, 11)
    target.parent.rmdir()
    os.symlink(Path("..") / "linked", target.parent)  # jpg/<3 hex>/ → ../linked (inside)
    (folder / "store" / target.name).write_bytes(unique(jpeg(), 11))
    assert LocalFolder(folder).find(11, "", download_url(11)) is not None


def _img2dataset(folder: Path, broken: bool) -> None:
    (folder / "00000").mkdir(parents=True)
    keys = ["000000000", "000000001", "000000002"]
    for pid, key in zip(IDS, keys):
        (folder / "00000" / f"{key}.jpg").write_bytes(unique(jpeg(), pid))
    pq.write_table(pa.table({"url": [download_url(i) for i in IDS], "key": keys, "status": ["success"] * 3}),
                   folder / "00000.parquet")
    if broken:
        data = (folder / "00000.parquet").read_bytes()
        (folder / "00000.parquet").write_bytes(data[: len(data) // 2])


def test_a_broken_img2dataset_parquet_is_one_line_naming_it(tmp_path, capsys):
    folder = tmp_path / "i2d"
    _img2dataset(folder, broken=False)
    found, _ = _run(tmp_path, folder)
    assert found == {11: "mine", 12: "mine", 13: "mine"}
    bad = tmp_path / "bad"
    _img2dataset(bad, broken=True)
    cand = _candidates(tmp_path / "c2.parquet")
    rc = main(["download", "--candidates", str(cand), "--out", str(tmp_path / "out2"), "--workers", "1", "--no-progress",
               "--source", f"kind=local,path={bad}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "Traceback" not in err, err
    assert f"{bad / '00000.parquet'} is not a readable Parquet file" in err, err
    assert not (tmp_path / "out2/index.parquet").exists()


@pytest.mark.parametrize("linked", ["file", "folder"])
def test_an_img2dataset_shard_linked_out_is_not_adopted(tmp_path, linked):
    folder, elsewhere = tmp_path / "i2d", tmp_path / "elsewhere"
    _img2dataset(folder, broken=False)
    if linked == "file":
        jpg = folder / "00000" / "000000001.jpg"
        elsewhere.mkdir()
        os.replace(jpg, elsewhere / jpg.name)
        os.symlink(elsewhere / jpg.name, jpg)
    else:
        os.replace(folder / "00000", elsewhere)
        os.symlink(elsewhere, folder / "00000")
    found, _ = _run(tmp_path, folder)
    assert found == ({11: "mine", 12: "not_found", 13: "mine"} if linked == "file"
                     else {11: "not_found", 12: "not_found", 13: "not_found"})


def test_a_file_swapped_for_a_link_after_the_plan_is_not_read(tmp_path):
    """The plan found a regular file; a link put in its place before the read is not followed."""
    from mining.stages.download.downloader import read_local
    from mining.stages.download.stage import fetch_config

    folder, outside = tmp_path / "mine", tmp_path / "secret.jpg"
    _ours(folder, 11).write_bytes(unique(jpeg(), 11))
    outside.write_bytes(unique(jpeg(), 12))
    uri = LocalFolder(folder).find(11, "", download_url(11))
    cfg = fetch_config(DOWNLOAD)
    assert read_local(11, uri, cfg)[0]["status"] == "ok"
    _ours(folder, 11).unlink()
    os.symlink(outside, _ours(folder, 11))
    row, body = read_local(11, uri, cfg)
    assert row["status"] == "not_found" and body is None
