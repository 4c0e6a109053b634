"""`.bz2` input through each parallel decoder (lbzip2 as a process, indexed_bzip2 in-process):
the same bytes as Python's bz2 module, the same ingest output, and a damaged stream is one
line naming the file and the line reached, whichever decoder read it."""

from __future__ import annotations

import bz2
import json
import random
import re
import shutil
from pathlib import Path

import pytest

from mining.errors import UserError
from mining.stages.ingest import stage as ingest
from mining.stages.ingest.output import read_quarantine
from mining.stages.ingest import decompress
from paths import DATA

SAMPLE = DATA / "yfcc100m_sample" / \
    "yfcc100m_webscope23_dongwookim-ml_flickr-photo.tsv"
DECODERS = ["lbzip2", "indexed_bzip2"]


def test_lbzip2_is_installed():
    """`make test` installs it (Makefile: ingest-deps); without it `auto` falls back silently
    to indexed_bzip2 and the lbzip2 cases below would not run the process path."""
    assert shutil.which("lbzip2"), "lbzip2 is not on PATH: `make ingest-deps` (apt-get install lbzip2)"


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> tuple[Path, bytes]:
    """~2.4 MB of the real 23-field rows under fresh photo ids, with a few broken lines, as a
    two-stream .bz2 (the cut in the middle of a line), level 1 (100 kB bzip2 blocks)."""
    real = SAMPLE.read_bytes().splitlines()
    rng = random.Random(3)
    lines = []
    for i in range(4400):
        fields = real[i % len(real)].split(b"\t")
        fields[0] = b"%d" % (10**9 + i)
        line = b"\t".join(fields)
        if rng.random() < 0.01:
            line = line.rsplit(b"\t", 1)[0]  # a field short: wrong_field_count
        lines.append(line)
    data = b"\n".join(lines) + b"\n"
    cut = len(data) // 3 + 5
    path = tmp_path_factory.mktemp("bz2") / "yfcc100m_dataset-0.bz2"
    path.write_bytes(bz2.compress(data[:cut], 1) + bz2.compress(data[cut:], 1))
    assert len(data) > 20 * 100_000
    return path, data


@pytest.mark.parametrize("decoder", DECODERS)
def test_decoder_gives_the_bytes_python_does(rows, decoder, monkeypatch):
    path, data = rows
    monkeypatch.setenv("MINING_BZ2_DECODER", decoder)
    assert decompress.bz2_decoder() == decoder
    rng = random.Random(7)
    for threads in (1, 3):
        stream, raw = decompress.open_stream(path, threads)
        assert isinstance(stream, decompress._Lbzip2Stream) == (decoder == "lbzip2")
        got, last = [], 0
        try:
            while piece := stream.read(rng.randint(1, 400_000)):
                got.append(piece)
                pos = raw.tell()
                assert last <= pos <= path.stat().st_size
                last = pos
        finally:
            stream.close()
            raw.close()
        assert b"".join(got) == bz2.decompress(path.read_bytes()) == data
        assert last == path.stat().st_size or decoder == "indexed_bzip2"  # (its position lags: progress only)


def _output(out: Path) -> tuple:
    stats = json.loads((out / "stats.json").read_text())
    for key in ("elapsed_s", "fingerprint"):
        stats.pop(key)
    return ({p.name: p.read_bytes() for p in sorted(out.glob("part-*.parquet"))},
            [row[1:] for row in read_quarantine(out)], stats)


def test_ingest_output_is_the_same_through_every_decoder(rows, tmp_path, monkeypatch):
    path, data = rows
    monkeypatch.setenv("MINING_BZ2_DECODER", "indexed_bzip2")
    reference = _output_of(path, tmp_path / "ref", 1)
    assert reference[2]["rows_in"] == data.count(b"\n") and reference[2]["rejected"]["wrong_field_count"] > 10
    for decoder in DECODERS:
        monkeypatch.setenv("MINING_BZ2_DECODER", decoder)
        for workers in (1, 2, 3):
            assert _output_of(path, tmp_path / f"{decoder}-{workers}", workers) == reference, (decoder, workers)


def _output_of(path: Path, out: Path, workers: int) -> tuple:
    ingest.run(paths=[path], out=out, options=ingest.IngestOptions(rows_per_part=1500, block_size=256 << 10),
               workers=workers, progress=False)
    return _output(out)


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
@pytest.mark.parametrize("decoder", DECODERS)
def test_damaged_stream_is_one_line_naming_file_and_line(rows, tmp_path, decoder, damage, monkeypatch, capsys):
    path, data = rows
    packed = bytearray(path.read_bytes())
    if damage == "truncated":
        packed = packed[: len(packed) * 2 // 3]
    else:
        packed[len(packed) // 2: len(packed) // 2 + 64] = b"x" * 64
    bad = tmp_path / f"yfcc100m_dataset-{damage}.bz2"
    bad.write_bytes(bytes(packed))
    monkeypatch.setenv("MINING_BZ2_DECODER", decoder)
    with pytest.raises(UserError) as err:
        ingest.run(paths=[bad], out=tmp_path / "out", options=ingest.IngestOptions(block_size=256 << 10),
                   progress=False, workers=2)
    m = re.fullmatch(re.escape(str(bad)) + r": the bz2 stream is truncated or corrupt after line (\d+) \(.+\)",
                     str(err.value))
    assert m, str(err.value)
    assert 0 < int(m.group(1)) < data.count(b"\n")
    assert not (tmp_path / "out").exists()
    from mining.cli import main

    assert main(["ingest", str(bad), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_a_stream_closed_early_leaves_no_lbzip2_process(rows, monkeypatch):
    path, _ = rows
    monkeypatch.setenv("MINING_BZ2_DECODER", "lbzip2")
    stream, raw = decompress.open_stream(path, 2)
    assert stream.read(1000)
    proc = stream._proc
    stream.close()
    raw.close()
    assert proc.returncode is not None  # killed and reaped, not left running or as a zombie


def test_decoder_setting_errors_are_one_line(rows, monkeypatch, tmp_path, capsys):
    path, _ = rows
    monkeypatch.setenv("MINING_BZ2_DECODER", "pbzip2")
    with pytest.raises(UserError, match="MINING_BZ2_DECODER must be one of auto, lbzip2, indexed_bzip2"):
        decompress.open_stream(path, 2)
    monkeypatch.setenv("MINING_BZ2_DECODER", "lbzip2")
    monkeypatch.setenv("PATH", str(tmp_path))  # no lbzip2 there
    with pytest.raises(UserError, match="lbzip2 is not on PATH"):
        decompress.open_stream(path, 2)
    monkeypatch.setenv("MINING_BZ2_DECODER", "auto")
    assert decompress.bz2_decoder() == "indexed_bzip2"  # auto falls back


def test_several_files_give_the_rows_of_one_and_a_bad_one_stops_the_run(rows, tmp_path, monkeypatch):
    """Three .bz2 files, each through its own lbzip2 process: the same rows, in order, as one
    file holding the same lines; a damaged second file stops the run naming that file, no
    thread or lbzip2 process is left behind, and nothing is written."""
    import threading

    path, data = rows
    monkeypatch.setenv("MINING_BZ2_DECODER", "lbzip2")
    lines = data.splitlines(keepends=True)
    thirds = [b"".join(lines[i::3]) for i in range(3)]  # interleaved: each file differs
    files = []
    for i, part in enumerate(thirds):
        f = tmp_path / f"yfcc100m_dataset-{i}.bz2"
        f.write_bytes(bz2.compress(part, 1))
        files.append(f)
    joined = tmp_path / "all.bz2"
    joined.write_bytes(bz2.compress(b"".join(thirds), 1))
    threads_before = set(threading.enumerate())
    several = ingest.run(paths=files, out=tmp_path / "several",
                         options=ingest.IngestOptions(rows_per_part=1000, block_size=128 << 10), workers=2,
                         progress=False)
    one = ingest.run(paths=[joined], out=tmp_path / "one",
                     options=ingest.IngestOptions(rows_per_part=1000, block_size=128 << 10), workers=2, progress=False)
    assert [f["rows_in"] for f in several["files"]] == [p.count(b"\n") for p in thirds]
    a, b = _output(tmp_path / "several"), _output(tmp_path / "one")
    import pyarrow.parquet as pq

    assert list(a[0]) == list(b[0])  # the same parts holding the same rows (row groups follow blocks)
    for name in a[0]:
        assert pq.read_table(tmp_path / "several" / name).equals(pq.read_table(tmp_path / "one" / name))
    assert [(reason, raw) for _, reason, raw in a[1]] == [(reason, raw) for _, reason, raw in b[1]]

    broken = tmp_path / "broken" / "yfcc100m_dataset-1.bz2"
    broken.parent.mkdir()
    broken.write_bytes(files[1].read_bytes()[: files[1].stat().st_size // 2])
    with pytest.raises(UserError, match=re.escape(str(broken)) + r": the bz2 stream is truncated"):
        ingest.run(paths=[files[0], broken, files[2]], out=tmp_path / "bad",
                   options=ingest.IngestOptions(block_size=128 << 10), workers=2, progress=False)
    assert not (tmp_path / "bad").exists()
    assert set(threading.enumerate()) - threads_before == set()  # no thread of ours left running
    import os

    children = [p for p in os.listdir("/proc") if p.isdigit()
                and Path(f"/proc/{p}/stat").read_text().split(") ")[1].split()[1] == str(os.getpid())
                and "lbzip2" in Path(f"/proc/{p}/comm").read_text()]
    assert children == []
