"""`mining ingest` of the SQLite yfcc100m_dataset file: the TSV's output for the same rows;
files whose rows are all rejected; the `--hash` join and the photo_hash counts."""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from ingested import ingested
from yfcc_rows import SQLITE_COLUMNS, iter_lines, write_sqlite, write_synthetic

from mining.errors import UserError
from mining.photos.flickr import yfcc_hash
from mining.stages.ingest import stage as ingest
from mining.stages.ingest.output import read_quarantine
from mining.stages.ingest.stage import open_dataset
from mining.stages.ingest import output, sqlite

URL = SQLITE_COLUMNS.index("downloadurl")


def demo_rows(n: int, seed: int, malformed: float = 0.1) -> list[list[str]]:
    """The demo world's 23-field rows (malformed ones included) that a SQLite table can hold:
    wrong_field_count rows have no 23 values, so they are left out."""
    return [line.split("\t") for line, _ in iter_lines(n, seed, nfields=23, malformed=malformed)
            if line.count("\t") == 22]


def write_tsv(path: Path, rows: list[list[str]]) -> Path:
    path.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def rows() -> list[list[str]]:
    return demo_rows(3000, seed=31)


def test_sqlite_gives_the_tsvs_bytes_quarantine_and_stats(tmp_path, rows, monkeypatch):
    monkeypatch.setattr(output, "ROW_GROUP_ROWS", 400)  # several row groups per part
    tsv = write_tsv(tmp_path / "rows.tsv", rows)
    text_db, typed_db = tmp_path / "text.sql", tmp_path / "typed.sql"
    write_sqlite(text_db, rows)
    write_sqlite(typed_db, rows, typed=True)
    kinds = dict(sqlite3.connect(typed_db).execute(
        "SELECT typeof(latitude), count(*) FROM yfcc100m_dataset GROUP BY 1").fetchall())
    assert kinds["real"] > 1000 and kinds["text"] > 1000  # numbers; empty and malformed values stay text

    def run(src: Path, name: str, block_size: int, workers: int) -> tuple:
        ingest.run(paths=[src], out=tmp_path / name,
                   options=ingest.IngestOptions(rows_per_part=1100, block_size=block_size), workers=workers,
                   progress=False)
        return ingested(tmp_path / name)

    reference = run(tsv, "tsv", 256 << 10, 2)
    parts, q, stats = reference
    assert stats["rows_in"] == len(rows) and stats["rows_rejected"] == len(q) > 100
    assert len(parts) == 3 and len({r for _, r, _ in q}) >= 5  # many reasons planted
    assert pq.ParquetFile(tmp_path / "tsv" / "part-00000.parquet").metadata.num_row_groups == 3
    for block_size, workers in [(64 << 10, 1), (64 << 10, 3), (1 << 20, 2), (4096, 2)]:
        assert run(text_db, f"text-{block_size}-{workers}", block_size, workers) == reference
        assert run(tsv, f"tsv-{block_size}-{workers}", block_size, workers) == reference  # TSV: block-size free
    # numbers stored as numbers give the same rows; a quarantined line shows them as SQLite
    # gives them back (10.0 -> 10)
    typed = run(typed_db, "typed", 64 << 10, 2)
    assert typed[0] == parts and typed[2] == stats
    assert [(n, r) for n, r, _ in typed[1]] == [(n, r) for n, r, _ in q]
    stats_json = json.loads((tmp_path / "text-4096-2" / "stats.json").read_text())
    assert stats_json["files"][0]["format"] == "sqlite" and stats_json["files"][0]["table"] == "yfcc100m_dataset"


def test_values_of_every_type_and_control_characters(tmp_path):
    good = [r for r in demo_rows(60, seed=9, malformed=0.0) if r[10]][:7]
    assert len(good) == 7
    db_rows: list[list[object]] = [list(r) for r in good]
    db_rows[0][6] = "a\ttitle"  # TAB, LF, CR: not a TSV field
    db_rows[2][7] = "two\nlines"
    db_rows[3][8] = "tag\r"
    db_rows[1][0] = int(good[1][0])  # numbers, NULLs and blobs where the TSV has text
    db_rows[1][10], db_rows[1][11] = float(good[1][10]), float(good[1][11])
    db_rows[1][17], db_rows[1][12] = int(good[1][17]), None
    db_rows[4][19] = good[4][19].encode()
    db_rows[5][0] = float(good[5][0])  # 7088065.0 (a REAL column) is the id 7088065
    db_rows[5][12] = 12.0
    db_rows[6][6] = b"caf\xe9"  # not UTF-8 (a blob): bad_encoding, as in the TSV
    write_sqlite(tmp_path / "t.sql", db_rows, untyped=True)  # values stay as given: int, float, blob
    assert sqlite3.connect(tmp_path / "t.sql").execute(
        "SELECT typeof(photoid), typeof(longitude), typeof(accuracy), typeof(secret) FROM yfcc100m_dataset "
        "WHERE rowid = 2").fetchone() == ("integer", "real", "null", "text")
    stats = ingest.run(paths=[tmp_path / "t.sql"], out=tmp_path / "out", progress=False)
    q = read_quarantine(tmp_path / "out")
    assert [(n, r) for _, n, r, _ in q] == [(1, "control_character"), (3, "control_character"),
                                           (4, "control_character"), (7, "bad_encoding")]
    assert q[0][3] == b"\t".join(v.encode() for v in db_rows[0])  # type: ignore[union-attr]
    assert q[0][0] == str(tmp_path / "t.sql") and q[3][3].split(b"\t")[6] == b"caf\xe9"
    assert stats["rejected"]["control_character"] == 3 and stats["rows_out"] == 3
    kept = open_dataset(tmp_path / "out").to_table().to_pylist()
    assert [r["photo_id"] for r in kept] == [int(good[i][0]) for i in (1, 4, 5)]
    assert kept[0]["longitude"] == float(good[1][10]) and kept[0]["accuracy"] is None
    assert kept[0]["server_id"] == int(good[1][17])
    assert kept[1]["secret"] == good[4][19] and kept[2]["accuracy"] == 12


def test_rows_come_in_rowid_order_numbered_by_position(tmp_path, rows):
    """Gaps in the rowids and rows inserted out of order: line = position in rowid order."""
    sample = rows[:200]
    write_sqlite(tmp_path / "t.sql", sample)
    conn = sqlite3.connect(tmp_path / "t.sql")
    conn.execute("UPDATE yfcc100m_dataset SET rowid = rowid * 1000 + 7")  # sparse rowids
    conn.execute("UPDATE yfcc100m_dataset SET rowid = -rowid WHERE rowid > 150000")  # some first, reversed
    conn.commit()
    order = [r[0] for r in conn.execute("SELECT photoid FROM yfcc100m_dataset ORDER BY rowid")]
    conn.close()
    by_id = {r[0]: r for r in sample}
    write_tsv(tmp_path / "same.tsv", [by_id[i] for i in order])
    ingest.run(paths=[tmp_path / "t.sql"], out=tmp_path / "a", options=ingest.IngestOptions(block_size=8 << 10),
               progress=False)
    ingest.run(paths=[tmp_path / "same.tsv"], out=tmp_path / "b", progress=False)
    assert ingested(tmp_path / "a") == ingested(tmp_path / "b")


def test_a_sqlite_file_without_the_table_or_a_column_is_one_line(tmp_path, rows, capsys):
    from mining.cli import main

    write_sqlite(tmp_path / "other.sql", rows[:5], table="photos")
    with pytest.raises(UserError, match=r"other.sql: a SQLite database without table yfcc100m_dataset "
                                        r"\(tables: photos\)"):
        ingest.run(paths=[tmp_path / "other.sql"], out=tmp_path / "out", progress=False)
    cols = [c for c in SQLITE_COLUMNS if c != "latitude"]
    write_sqlite(tmp_path / "short.sql", [r[:11] + r[12:] for r in rows[:5]], columns=cols)
    with pytest.raises(UserError, match=r"table yfcc100m_dataset lacks column\(s\) latitude \(columns: photoid, "):
        ingest.run(paths=[tmp_path / "short.sql"], out=tmp_path / "out", progress=False)
    rc = main(["ingest", str(tmp_path / "short.sql"), "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc != 0 and err.count("\n") == 1 and "lacks column(s) latitude" in err
    (tmp_path / "broken.sql").write_bytes(sqlite.HEADER + b"\x00" * 200)
    with pytest.raises(UserError, match="broken.sql: cannot be read as a SQLite database"):
        ingest.run(paths=[tmp_path / "broken.sql"], out=tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_a_damaged_page_is_one_line_naming_the_rowids_and_the_check_reads_no_rows(tmp_path, rows, capsys):
    """A leaf page in the middle damaged: the file's check (table, columns, first and last
    rowid: b-tree seeks, not a scan) passes, the read of that range stops the run in one line."""
    from mining.cli import main

    db = tmp_path / "d.sql"
    write_sqlite(db, rows)
    data = bytearray(db.read_bytes())
    page = len(data) // 4096 // 2
    data[page * 4096:page * 4096 + 8] = b"\x0d\x00\x00\xff\xff\x00\x00\x00"  # a leaf claiming 65535 cells
    db.write_bytes(bytes(data))
    assert sqlite.inspect(db).last == len(rows)
    with pytest.raises(UserError, match=r"d.sql: SQLite read error in rowids \d+-\d+: database disk image is malformed"):
        ingest.run(paths=[db], out=tmp_path / "out", options=ingest.IngestOptions(block_size=64 << 10), progress=False)
    assert main(["ingest", str(db), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_extra_columns_are_ignored_and_logged(tmp_path, rows, caplog):
    cols = ("rownum", *SQLITE_COLUMNS[:5], "extra", *SQLITE_COLUMNS[5:])
    write_sqlite(tmp_path / "x.sql", [[i, *r[:5], "junk\tvalue", *r[5:]] for i, r in enumerate(rows[:300])],
                 columns=cols)
    write_sqlite(tmp_path / "plain.sql", rows[:300])
    with caplog.at_level("INFO", logger="mining.stages.ingest"):
        stats = ingest.run(paths=[tmp_path / "x.sql"], out=tmp_path / "a", progress=False)
    assert stats["files"][0]["extra_columns"] == ["rownum", "extra"]
    assert any("beyond YFCC's 23, ignored: rownum, extra" in r.getMessage() for r in caplog.records)
    ingest.run(paths=[tmp_path / "plain.sql"], out=tmp_path / "b", progress=False)
    a, b = ingested(tmp_path / "a"), ingested(tmp_path / "b")
    a[2]["files"][0].pop("extra_columns")
    assert a == b


def test_the_sqlite_file_is_recognised_by_its_header_not_its_name(tmp_path, rows):
    odd = tmp_path / "a %41 ?#é folder"  # characters a SQLite URI must escape
    odd.mkdir()
    write_sqlite(odd / "yfcc100m_dataset-0", rows[:50])  # no suffix
    stats = ingest.run(paths=[odd / "yfcc100m_dataset-0"], out=tmp_path / "out", progress=False)
    assert stats["files"][0]["format"] == "sqlite" and stats["rows_in"] == 50
    empty = tmp_path / "empty.sql"
    write_sqlite(empty, [])
    stats = ingest.run(paths=[empty, odd / "yfcc100m_dataset-0"], out=tmp_path / "out2", progress=False)
    assert stats["files"][0]["rows_in"] == 0 and stats["rows_in"] == 50  # an empty table warns, as a file


# Every row rejected ------------------------------------------------------------

def test_a_file_whose_rows_are_all_rejected_is_an_error_saying_what_it_looks_like(tmp_path, capsys):
    from mining.cli import main

    path = tmp_path / "x.tsv"
    path.write_text("".join("\t".join(["a"] * 7) + "\n" for _ in range(78)))
    with pytest.raises(UserError) as err:
        ingest.run(paths=[path], out=tmp_path / "out", progress=False)
    assert str(err.value) == (f"{path}: all 78 rows rejected (wrong_field_count=78): lines have 7 tab-separated "
                              "fields, a YFCC100M dataset file has 23 or 25; is this the yfcc100m_dataset file?")
    assert not (tmp_path / "out").exists()
    # a complete earlier output is left as it was; the CLI says it in one line, exit 1
    good = tmp_path / "good.tsv"
    write_synthetic(good, 50, seed=1, nfields=23, malformed=0.0)
    assert main(["ingest", str(good), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    capsys.readouterr()
    assert main(["ingest", str(good), str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err_text = capsys.readouterr().err
    assert err_text.count("\n") == 1 and "all 78 rows rejected" in err_text
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before


def test_all_rejected_names_mixed_field_counts_other_reasons_and_a_packed_sqlite(tmp_path, rows):
    mixed = tmp_path / "m.tsv"
    mixed.write_text("a\tb\nc\td\te\nf\tg\n")
    with pytest.raises(UserError, match=r"lines have 2 \(2 lines\), 3 \(1 lines\) tab-separated fields"):
        ingest.run(paths=[mixed], out=tmp_path / "out", progress=False)
    bad_ids = [["x" + r[0], *r[1:]] for r in rows[:20]]
    write_sqlite(tmp_path / "bad.sql", bad_ids)
    with pytest.raises(UserError, match=r"bad.sql: all 20 rows rejected \(bad_photo_id=20\); the first: b'x"):
        ingest.run(paths=[tmp_path / "bad.sql"], out=tmp_path / "out", progress=False)
    write_sqlite(tmp_path / "db.sql", rows[:20])
    packed = tmp_path / "db.sql.gz"
    packed.write_bytes(gzip.compress((tmp_path / "db.sql").read_bytes()))
    with pytest.raises(UserError, match="it is a SQLite database inside gzip compression; decompress it first"):
        ingest.run(paths=[packed], out=tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


# Photo hashes ------------------------------------------------------------------

def _hash_counts(hashes: dict[str, str], urls: dict[str, str]) -> dict[str, int]:
    """What stats.json's photo_hash section must say, computed here the plain way."""
    counts = {"same": 0, "same_zero_padded": 0, "different": 0, "missing": 0}
    for pid, url in urls.items():
        h = hashes.get(pid)
        digest = hashlib.md5(url.encode()).digest()
        if h is None:
            counts["missing"] += 1
        elif h == "".join(f"{b:x}" for b in digest):
            counts["same"] += 1
        elif h == digest.hex():
            counts["same_zero_padded"] += 1
        else:
            counts["different"] += 1
    return counts


def test_hash_file_fills_photo_hash_and_stats_compare_it_with_the_mirror_key(tmp_path):
    rows = demo_rows(2000, seed=41, malformed=0.0)
    urls = {r[0]: r[URL] for r in rows}
    hashes: dict[str, str] = {}
    lines = []
    for i, r in enumerate(rows):
        digest = hashlib.md5(r[URL].encode()).digest()
        kind = i % 5
        if kind == 4:
            continue  # not in the hash file
        h = {0: yfcc_hash(r[URL]), 1: digest.hex(), 2: "%032x" % i, 3: yfcc_hash(r[URL])}[kind]
        hashes[r[0]] = h
        lines.append(f"{r[0]}\t{h}\n")
    lines.insert(10, "not-an-id\tabc\n")
    hash_file = tmp_path / "yfcc100m_hash.gz"
    hash_file.write_bytes(gzip.compress("".join(lines).encode()))
    write_sqlite(tmp_path / "d.sql", rows)
    write_tsv(tmp_path / "d.tsv", rows)
    want = _hash_counts(hashes, urls)
    assert min(want.values()) > 100  # zero-padded ones where a byte is < 0x10, and the others
    for src in ("d.sql", "d.tsv"):
        stats = ingest.run(paths=[tmp_path / src], hash_file=hash_file, out=tmp_path / src.replace(".", "-"),
                           options=ingest.IngestOptions(block_size=16 << 10), progress=False)
        assert stats["photo_hash"] == want
        assert stats["hash"]["rows_matched"] == len(hashes) and stats["hash"]["lines_skipped"] == 1
        got = open_dataset(tmp_path / src.replace(".", "-")).to_table(columns=["photo_id", "photo_hash"])
        assert dict(zip(map(str, got.column("photo_id").to_pylist()), got.column("photo_hash").to_pylist())) == \
            {pid: hashes.get(pid) for pid in urls}
    # without --hash: every kept row is missing its hash
    stats = ingest.run(paths=[tmp_path / "d.sql"], out=tmp_path / "none", progress=False)
    assert stats["photo_hash"] == {"same": 0, "same_zero_padded": 0, "different": 0, "missing": len(rows)}


def test_the_25_field_files_own_hash_is_kept_and_counted(tmp_path):
    src = tmp_path / "d25.tsv"
    write_synthetic(src, 500, seed=3, nfields=25, malformed=0.0)
    lines = src.read_bytes().decode().splitlines()
    fields = [line.split("\t") for line in lines]
    fields[0][2] = yfcc_hash(fields[0][16])  # the first row carries the mirror's key
    fields[1][2] = fields[2][2] = ""  # two rows without a hash: the hash file has the first
    src.write_text("".join("\t".join(f) + "\n" for f in fields))
    hash_file = tmp_path / "h.tsv"  # the hash file does not override a file's own hash
    hash_file.write_text("".join(f"{f[1]}\t{'0' * 32}\n" for i, f in enumerate(fields) if i != 2))
    stats = ingest.run(paths=[src], hash_file=hash_file, out=tmp_path / "out", progress=False)
    assert stats["photo_hash"] == {"same": 1, "same_zero_padded": 0, "different": 498, "missing": 1}
    got = open_dataset(tmp_path / "out").to_table(columns=["photo_hash"]).column(0).to_pylist()
    assert got == [fields[0][2], "0" * 32, ""] + [f[2] for f in fields[3:]]
    stats = ingest.run(paths=[src], out=tmp_path / "alone", progress=False)  # without it: as the file gives them
    assert stats["photo_hash"] == {"same": 1, "same_zero_padded": 0, "different": 497, "missing": 2}


def test_a_hash_file_out_of_the_datasets_order_is_refused(tmp_path, capsys):
    from mining.cli import main

    rows = demo_rows(300, seed=5, malformed=0.0)
    write_tsv(tmp_path / "d.tsv", rows)
    hash_file = tmp_path / "h.tsv"
    hash_file.write_text("".join(f"{r[0]}\t{yfcc_hash(r[URL])}\n" for r in reversed(rows)))
    with pytest.raises(UserError, match=r"h.tsv: the hash file is not in the dataset's row order"):
        ingest.run(paths=[tmp_path / "d.tsv"], hash_file=hash_file, out=tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
    rc = main(["ingest", str(tmp_path / "d.tsv"), "--hash", str(hash_file), "--out", str(tmp_path / "out"),
               "--no-progress"])
    assert rc == 2 and capsys.readouterr().err.count("\n") == 1
    rc = main(["ingest", str(tmp_path / "d.tsv"), "--hash", str(tmp_path / "nope"), "--out", str(tmp_path / "out"),
               "--no-progress"])
    assert rc != 0 and "hash file not found" in capsys.readouterr().err


def test_cli_help_mentions_sqlite_and_hash():
    r = subprocess.run([sys.executable, "-m", "mining", "ingest", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "SQLite" in r.stdout and "--hash FILE" in r.stdout


def test_hash_counts_match_the_plain_rule_on_every_kind_of_near_miss():
    """hashes.compare (one MD5 per row, column-wise) against the plain per-row rule, on the
    mirror key, the zero-padded MD5, a key with its last digit changed, another row's key of
    the same length, random 32-digit hex, upper case, nulls and empty values."""
    import pyarrow as pa

    from mining.stages.ingest.hashes import compare

    rows = demo_rows(3000, seed=8, malformed=0.0)
    urls = [r[URL] for r in rows]
    kinds = [
        lambda i, u: yfcc_hash(u), lambda i, u: hashlib.md5(u.encode()).hexdigest(), lambda i, u: None,
        lambda i, u: yfcc_hash(u)[:-1] + "z", lambda i, u: yfcc_hash(urls[i - 1]), lambda i, u: "%032x" % i,
        lambda i, u: hashlib.md5(u.encode()).hexdigest().upper(), lambda i, u: "",
    ]
    given = [kinds[i % len(kinds)](i, u) for i, u in enumerate(urls)]
    got = compare(pa.array(given, pa.string()), pa.array(urls))
    assert got == _hash_counts({str(i): h for i, h in enumerate(given) if h},  # "": no hash
                               {str(i): u for i, u in enumerate(urls)})
    assert got["same"] > 500 and got["same_zero_padded"] > 200 and got["different"] > 1200
