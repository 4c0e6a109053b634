"""A damaged compressed input says where the damage is.

The docs promise that a truncated `.gz`/`.bz2` stops the ingest with one line naming the file
and the line reached. Here real dataset files of a few thousand generated rows are compressed,
cut, and ingested with every decoder; the line the message names must be exactly the number of
whole lines the standard library's zlib/bz2 decode from the cut file (checked to be a prefix of
the original) (the fast
decoders used to say "after line 0" for a small .gz, and the .bz2 messages named no line).
"""

from __future__ import annotations

import bz2
import gzip
import re
import zlib

import pytest
from yfcc_rows import write_synthetic

from mining.cli import main
from mining.errors import UserError
from mining.stages.ingest import stage as ingest


def _decodable(cut: bytes, kind: str) -> bytes:
    """Everything the standard library's one-shot decompressor gets out of a cut stream (a cut
    stream is incomplete, not an error, to zlib and bz2: they return what decodes)."""
    d = zlib.decompressobj(31) if kind == "gzip" else bz2.BZ2Decompressor()
    return d.decompress(cut)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> bytes:
    src = tmp_path_factory.mktemp("rows") / "yfcc100m_dataset.tsv"
    write_synthetic(src, 3000, seed=5, nfields=25, malformed=0.0)
    return src.read_bytes()


CASES = [  # (suffix, compress, keep, decoder); level-1 bz2 has 100 kB blocks, level 9 900 kB
    ("gz", gzip.compress, 0.2, None),
    ("gz", gzip.compress, 0.6, None),
    ("gz", gzip.compress, 0.95, None),
    ("bz2", lambda b: bz2.compress(b, 1), 0.5, "lbzip2"),
    ("bz2", lambda b: bz2.compress(b, 1), 0.5, "indexed_bzip2"),
    ("bz2", lambda b: bz2.compress(b, 9), 0.9, "lbzip2"),
    ("bz2", lambda b: bz2.compress(b, 9), 0.9, "indexed_bzip2"),
    ("bz2", lambda b: bz2.compress(b, 9), 0.3, "indexed_bzip2"),  # inside the first block: nothing decodes
]


@pytest.mark.parametrize("suffix,compress,keep,decoder", CASES)
def test_a_truncated_input_names_the_line_reached(dataset, tmp_path, capsys, monkeypatch, suffix, compress, keep,
                                                  decoder):
    if decoder:
        monkeypatch.setenv("MINING_BZ2_DECODER", decoder)
    packed = compress(dataset)
    path = tmp_path / f"yfcc100m_dataset.{suffix}"
    path.write_bytes(packed[: int(len(packed) * keep)])
    kind = "gzip" if suffix == "gz" else "bz2"
    good = _decodable(path.read_bytes(), kind)
    assert dataset.startswith(good) and len(good) < len(dataset)
    want = good.count(b"\n")
    if keep > 0.3:
        assert want > 0  # the premise: part of the file decodes
    with pytest.raises(UserError) as err:
        ingest.run(paths=[path], out=tmp_path / "out", options=ingest.IngestOptions(block_size=256 << 10),
                   progress=False, workers=2)
    m = re.fullmatch(re.escape(str(path)) + rf": the {kind} stream is truncated or corrupt after line (\d+) \(.+\)",
                     str(err.value))
    assert m, str(err.value)
    assert int(m.group(1)) == want
    assert not (tmp_path / "out").exists()
    assert main(["ingest", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"after line {want} (" in lines[0], lines
