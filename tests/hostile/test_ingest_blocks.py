"""Ingest is the same bytes for every `--block-size-mb` and worker count, for every row.

A row's fate used to depend on its neighbours: a block whose ids all cast took a 19-digit id,
a block holding one bad id checked every id against an 18-digit regex, so the same 19-digit id
was kept or quarantined as bad_photo_id by where the blocks were cut (the same for `1e0001`
coordinates, `0x10` accuracies). Here a hostile file (ids of every length, hex, signs, leading
zeros; odd numbers; empty lines, lone CRs, invalid UTF-8, NUL bytes, wrong field counts) is
ingested at block sizes from 2 KiB to 1 MiB with 1 to 3 workers, as TSV and as SQLite: the
Parquet bytes, the quarantine and the stats are equal every time.
"""

from __future__ import annotations

import pytest
from ingested import ingested
from yfcc_rows import iter_lines, write_sqlite

from mining.stages.ingest import stage as ingest

IDS = ["9223372036854775807", "1234567890123456789", "9223372036854775808", "12345678901234567890",
       "00000000000000000000012", "0x1F", "+5", "-0", "-7", "5-3", "", "\uff15", " 8", "8 ", "1e3"]
COORDS = [("1e0001", "2"), ("inf", "1"), ("nan", "1"), ("1.", ".5"), ("+1", "-1"), ("1e400", "1"),
          ("0x1p3", "1"), ("-", "1"), ("1e", "2"), ("12.5e-1", "-3E+1")]
NUMBERS = ["0x10", "010", "+1", "99999999999999999999", "-1", "1.0", "", "7"]
ODD = [b"", b"a\tb", b"\xff\xfe\tbroken", "caf\u00e9 %00 nul".encode(), b"lone\rcr"]


def _lines(nfields: int) -> list[bytes]:
    """Well-formed rows (demo world), every other one made hostile; some odd lines between."""
    base = [line for line, _ in iter_lines(700, seed=11, nfields=nfields, malformed=0.0)]
    shift = 0 if nfields == 23 else 2  # the 25-field layout has line number and hash in front
    pid, lon, acc, up, title = 0 + (1 if shift else 0), 10 + shift, 12 + shift, 4 + shift, 6 + shift
    out = []
    for i, line in enumerate(base):
        f = line.split("\t")
        k, j = i % 6, i // 6
        if k == 0:
            f[pid] = IDS[j % len(IDS)]
        elif k == 1:
            f[lon], f[lon + 1] = COORDS[j % len(COORDS)]
        elif k == 2:
            f[acc], f[up] = NUMBERS[j % len(NUMBERS)], NUMBERS[(j + 3) % len(NUMBERS)]
        elif k == 3 and j % 4 == 0:
            f[title] = "x" * (3000 + j)  # long lines: blocks are cut at different rows
        raw = "\t".join(f).encode()
        if k == 4 and j % 3 == 0:
            raw = raw.replace(b"\t", b"\t" + ODD[j % len(ODD)], 1) if j % 2 else ODD[j % len(ODD)]
        out.append(raw)
    return out


def _run(src, out, block_size, workers):
    ingest.run(paths=[src], out=out, options=ingest.IngestOptions(rows_per_part=250, block_size=block_size),
               workers=workers, progress=False)
    return ingested(out)


SIZES = [(1 << 20, 1), (2048, 1), (2048, 3), (8192, 2), (64 << 10, 3)]


@pytest.mark.parametrize("nfields", [25, 23])
def test_a_hostile_file_gives_the_same_bytes_at_every_block_size_and_worker_count(tmp_path, nfields):
    src = tmp_path / "hostile.tsv"
    src.write_bytes(b"\n".join(_lines(nfields)) + b"\n")
    reference = _run(src, tmp_path / "ref", *SIZES[0])
    parts, quarantine, stats = reference
    assert stats["rows_rejected"] == len(quarantine) and stats["rows_out"] > 300 and len(parts) >= 2
    reasons = {r for _, r, _ in quarantine}
    assert {"bad_photo_id", "bad_coordinates", "bad_number", "wrong_field_count", "out_of_domain"} <= reasons
    for size, workers in SIZES[1:]:
        assert _run(src, tmp_path / f"o-{size}-{workers}", size, workers) == reference, (size, workers)
    # what each hostile id became, the same everywhere: decimal integers up to 2^63 - 1 (19 digits)
    # are kept, leading zeros and all; anything else is quarantined as bad_photo_id
    kept = set(ingest.open_dataset(tmp_path / "ref").to_table(columns=["photo_id"]).column("photo_id").to_pylist())
    assert {9223372036854775807, 1234567890123456789, 12} <= kept and 31 not in kept and 5 not in kept
    bad_ids = {raw.split(b"\t")[1 if nfields == 25 else 0] for _, r, raw in quarantine if r == "bad_photo_id"}
    assert {b"9223372036854775808", b"12345678901234567890", b"0x1F", b"+5", b"-0", b"5-3", b" 8"} <= bad_ids


def test_sqlite_input_gives_the_same_bytes_at_every_block_size_and_worker_count(tmp_path):
    lines = [line for line in _lines(23) if line.count(b"\t") == 22 and b"\r" not in line]
    src = tmp_path / "hostile.tsv"
    src.write_bytes(b"\n".join(lines) + b"\n")
    db = tmp_path / "hostile.sql"
    write_sqlite(db, [line.split(b"\t") for line in lines])
    reference = _run(src, tmp_path / "tsv", 1 << 20, 1)
    assert reference[2]["rows_out"] > 300 and reference[2]["rejected"]["bad_photo_id"] > 20
    for size, workers in SIZES:
        assert _run(db, tmp_path / f"db-{size}-{workers}", size, workers) == reference, (size, workers)


@pytest.mark.parametrize("mb", ["0", "-1"])
def test_a_block_size_below_one_is_refused_not_an_empty_dataset(tmp_path, capsys, mb):
    """`--block-size-mb 0` (or -1) read no block: "0 rows in, 0 out", an empty dataset, exit 0."""
    from mining.cli import main

    src = tmp_path / "rows.tsv"
    src.write_bytes(b"\n".join(_lines(23)[:50]) + b"\n")
    assert main(["ingest", str(src), "--out", str(tmp_path / "out"), "--block-size-mb", mb, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "--block-size-mb at least 1" in err, err
    assert not (tmp_path / "out").exists()
