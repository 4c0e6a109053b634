"""`mining ingest --hash FILE`: a bad hash file is one line, and a good one is read whole.

- a binary file, or one with a NUL byte, and a truncated `.gz` used to end in a pyarrow
  traceback; now one line naming the file (and the lines), exit 2, nothing written;
- valid lines of 19-digit photo ids were skipped (an 18-digit regex), so their rows got no hash
  and the warning said they were "not in the hash file … or beyond its window";
- two different hashes for one photo id were resolved silently (the first won, nothing
  counted): refused, naming the photo and both hashes. The same line twice is harmless.
"""

from __future__ import annotations

import gzip
import logging

import pytest
from yfcc_rows import iter_lines

from mining.cli import main
from mining.stages.ingest import stage as ingest

HASH = "0123456789abcdef" * 2


@pytest.fixture()
def dataset(tmp_path):
    """300 well-formed 23-field rows (no hash of their own); every third has a 19-digit id."""
    rows = [line.split("\t") for line, _ in iter_lines(300, seed=2, nfields=23, malformed=0.0)]
    for i in range(0, len(rows), 3):
        rows[i][0] = str(9_000_000_000_000_000_000 + i)
    path = tmp_path / "d.tsv"
    path.write_text("".join("\t".join(r) + "\n" for r in rows))
    return path, [r[0] for r in rows]


def _ingest(capsys, tmp_path, src, hash_file):
    rc = main(["ingest", str(src), "--hash", str(hash_file), "--out", str(tmp_path / "out"), "--no-progress"])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("content,words", [
    (bytes(range(256)) * 40, "not text lines of photoid<TAB>value (NUL or bytes that are not UTF-8 in lines 1-"),
    (b"1000001\t" + b"\x00" * 32 + b"\n", "not text lines of photoid<TAB>value (NUL or bytes that are not UTF-8 in lines 1-1)"),
    (b"1000001\tabc\n\xff\xfe\xfd\tx\ty\n", "not text lines of photoid<TAB>value"),
])
def test_a_binary_hash_file_is_one_line(tmp_path, capsys, dataset, content, words):
    bad = tmp_path / "hash.bin"
    bad.write_bytes(content)
    rc, err = _ingest(capsys, tmp_path, dataset[0], bad)
    assert rc == 2 and f"{bad}: the hash file is {words}" in err
    assert "Traceback" not in err and "Exception ignored" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_truncated_gz_hash_file_is_one_line(tmp_path, capsys, dataset):
    src, ids = dataset
    whole = gzip.compress("".join(f"{i}\t{HASH}\n" for i in ids).encode())
    cut = tmp_path / "hash.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    rc, err = _ingest(capsys, tmp_path, src, cut)
    assert rc == 2 and f"{cut}: the hash file cannot be read after line 0: its gzip stream is truncated" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_19_digit_ids_get_their_hash(tmp_path, dataset, caplog):
    src, ids = dataset
    good = tmp_path / "hash.tsv"
    good.write_text("".join(f"{i}\t{HASH}\n" for i in ids))
    with caplog.at_level(logging.WARNING):
        stats = ingest.run(paths=[src], hash_file=good, out=tmp_path / "out", progress=False)
    assert stats["hash"] == {"path": str(good), "rows_matched": 300, "lines_skipped": 0}
    assert stats["photo_hash"]["missing"] == 0 and "no hash" not in caplog.text
    table = ingest.open_dataset(tmp_path / "out").to_table(columns=["photo_id", "photo_hash"])
    by_id = dict(zip(table.column("photo_id").to_pylist(), table.column("photo_hash").to_pylist()))
    assert by_id[9_000_000_000_000_000_000] == HASH and set(by_id.values()) == {HASH}


def test_skipped_lines_are_named_in_the_warning(tmp_path, dataset, caplog):
    src, ids = dataset
    spaced = tmp_path / "hash.tsv"
    spaced.write_text("".join(f"{i}\t{HASH} \n" for i in ids))  # a trailing space: not hex
    with caplog.at_level(logging.WARNING):
        ingest.run(paths=[src], hash_file=spaced, out=tmp_path / "out", progress=False)
    assert "no row matched the hash file" in caplog.text
    assert "300 of its 300 lines were skipped (not photoid<TAB>hash of 1-64 hex digits)" in caplog.text


def test_two_hashes_for_one_photo_are_refused(tmp_path, capsys, dataset):
    src, ids = dataset
    lines = [f"{i}\t{HASH}\n" for i in ids]
    lines.insert(41, f"{ids[40]}\t{'f' * 32}\n")  # photo ids[40] again, another hash
    conflict = tmp_path / "hash.tsv"
    conflict.write_text("".join(lines))
    rc, err = _ingest(capsys, tmp_path, src, conflict)
    assert rc == 2 and f"gives photo {ids[40]} two different values ({HASH!r} and {'f' * 32!r}" in err
    assert "1 photo(s) with two values" in err and not (tmp_path / "out").exists()
    # the same line twice (or the same hash in another case) is one value: accepted
    lines[41] = f"{ids[40]}\t{HASH.upper()}\n"
    conflict.write_text("".join(lines))
    rc, err = _ingest(capsys, tmp_path, src, conflict)
    assert rc == 0 and "two different" not in err
