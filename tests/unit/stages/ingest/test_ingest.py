"""`mining ingest`: real YFCC100M rows round-trip; every reject reason lands in the quarantine."""

from __future__ import annotations

import bz2
import gzip
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote_plus, unquote_to_bytes

import pyarrow as pa
import pytest
from ingested import ingested
from yfcc_rows import write_synthetic

from mining.errors import UserError
from mining.stages.ingest import stage as ingest
from mining.stages.ingest.output import read_quarantine
from mining.stages.ingest.stage import open_dataset, output_schema
from mining.stages.ingest import decompress, yfcc
from mining.stages.ingest.formdecode import binary_buffers, form_decode, split_decode, to_utf8, utf8_bad_rows
from paths import DATA

# real rows, copied into tests/data (provenance: its README.md)
SAMPLE = DATA / "yfcc100m_sample" / \
    "yfcc100m_webscope23_dongwookim-ml_flickr-photo.tsv"


@pytest.fixture(scope="module")
def sample_lines() -> list[bytes]:
    if not SAMPLE.exists():
        pytest.fail(f"real sample rows missing: {SAMPLE}")
    return SAMPLE.read_bytes().splitlines()


def to_25(lines: list[bytes]) -> list[bytes]:
    """The 25-field layout of 23-field rows: line number first, a hash after the photo id."""
    out = []
    for i, line in enumerate(lines):
        f = line.split(b"\t")
        out.append(b"\t".join([str(i).encode(), f[0], b"%032x" % (i + 1), *f[1:]]))
    return out


def read(out: Path) -> list[dict]:
    return open_dataset(out).to_table().to_pylist()


def quarantine(out: Path) -> list[list[bytes]]:
    """quarantine.tsv as [file, line, reason, raw line] bytes, read back the documented way."""
    lines = (out / "quarantine.tsv").read_bytes().split(b"\n")
    assert lines[0] == b"file\tline\treason\traw_line" and lines[-1] == b""
    assert all(line.count(b"\t") == 3 for line in lines[1:-1])  # one record per line, 4 fields
    return [[f.encode("utf-8", "surrogateescape"), str(n).encode(), r.encode(), raw]
            for f, n, r, raw in read_quarantine(out)]


def check_real_rows(rows: list[dict]) -> None:
    assert [r["photo_id"] for r in rows] == [7088065, 343224206, 6325727670, 10642543105]
    gnome, muppet, fog, album = rows
    assert gnome["title"] == "Gnome"
    assert gnome["description"] == "This gnome just appeared three stories up at school one day."
    assert gnome["user_tags"] == ["2005", "bushschool", "gnome", "prank", "washington"]
    assert gnome["machine_tags"] == []
    assert (gnome["longitude"], gnome["latitude"], gnome["accuracy"]) == (-122.288368, 47.622562, 15)
    assert gnome["license_name"] == "Attribution-NonCommercial License"
    assert gnome["license_url"] == "http://creativecommons.org/licenses/by-nc/2.0/"
    assert (gnome["server_id"], gnome["farm_id"], gnome["secret"], gnome["extension"], gnome["marker"]) == \
        (8, 1, "65c9d45e09", "jpg", 0)
    assert gnome["capture_device"] == "SONY CLIE" and gnome["date_uploaded"] == 1111467388
    assert muppet["description"] == "" and muppet["user_tags"] == [] and muppet["title"] == "Team Muppet Show"
    assert fog["user_nickname"] == "Indigo Skies Photography"
    assert fog["description"].startswith("This scene greeted me on the way to work yesterday morning.\n\nI hope")
    assert "power lines!" in fog["description"] and "converted to B&W." in fog["description"]
    assert "b&w" in fog["user_tags"] and "black and white" in fog["user_tags"] and len(fog["user_tags"]) == 20
    assert (fog["secret"], fog["secret_original"]) == ("5192fe3be9", "8ed1387833")
    assert fog["latitude"] == -37.155665 and fog["longitude"] == 144.87957
    assert album["date_taken"] == "4501-01-01 00:00:00.0"  # junk dates are kept as they are
    assert album["capture_device"] == "Couragent, Inc. Flip-Pal 100C"
    assert album["user_tags"] == ["album g", "carte de visite", "gsv", "johnstone o'shannessy & co",
                                  "melbourne", "victoria"]
    assert album["description"].startswith("Photographer: Johnstone O'Shannessy, 3 Bourke St, Melbourne\n\n")
    assert "(86 in all)" in album["description"]


def test_real_23_field_rows_round_trip(tmp_path):
    stats = ingest.run(paths=[SAMPLE], out=tmp_path / "out", progress=False)
    assert stats["rows_in"] == 4 and stats["rows_out"] == 4 and stats["rows_rejected"] == 0
    assert stats["files"][0]["fields"] == 23
    table = open_dataset(tmp_path / "out").to_table()
    assert table.schema.equals(output_schema(False))
    rows = table.to_pylist()
    check_real_rows(rows)
    assert all(r["photo_hash"] is None for r in rows)


@pytest.mark.parametrize("suffix", ["", ".bz2", ".gz", ".gz-without-suffix"])
def test_25_field_layout_and_compression(tmp_path, sample_lines, suffix):
    data = b"\n".join(to_25(sample_lines)) + b"\n"
    if suffix.startswith(".gz"):
        data = gzip.compress(data)
    elif suffix == ".bz2":
        data = bz2.compress(data)
    path = tmp_path / ("yfcc100m_dataset" + (suffix if suffix in (".bz2", ".gz") else ""))
    path.write_bytes(data)
    stats = ingest.run(paths=[path], out=tmp_path / "out", progress=False)
    assert stats["files"][0]["fields"] == 25 and stats["rows_out"] == 4
    rows = read(tmp_path / "out")
    check_real_rows(rows)
    assert [r["photo_hash"] for r in rows] == ["%032x" % (i + 1) for i in range(4)]


def test_every_reject_reason_with_its_line_number(tmp_path, sample_lines):
    good = sample_lines[0].split(b"\t")

    def row(**changes: bytes) -> bytes:
        f = list(good)
        for name, value in changes.items():
            f[yfcc.FIELDS_23.index(name)] = value
        return b"\t".join(f)

    planted = [  # (line, reason, raw)
        (2, "wrong_field_count", b"\t".join(good[:-1])),
        (3, "wrong_field_count", b"\t".join([*good, b"extra"])),
        (4, "bad_photo_id", row(photo_id=b"70880x5")),
        (5, "bad_photo_id", row(photo_id=b"")),
        (6, "latitude_out_of_range", row(latitude=b"91.5")),
        (7, "longitude_out_of_range", row(longitude=b"-180.25")),
        (8, "bad_coordinates", row(latitude=b"47.6N")),
        (9, "bad_coordinates", row(latitude=b"")),
        (10, "bad_coordinates", row(longitude=b"nan")),
        (11, "bad_encoding", row(title=b"bad+%G1+escape")),
        (12, "bad_encoding", row(description=b"caf%C3")),  # a valid escape of invalid UTF-8
        (13, "bad_encoding", row(user_tags=b"ok,%ZZ")),
        (14, "bad_number", row(accuracy=b"street")),
        (15, "bad_number", row(marker=b"1000")),
        (16, "wrong_field_count", b""),
    ]
    lines = [sample_lines[0]] + [raw for _, _, raw in planted] + sample_lines[1:]
    path = tmp_path / "in.tsv"
    path.write_bytes(b"\n".join(lines) + b"\n")
    stats = ingest.run(paths=[path], out=tmp_path / "out", progress=False)
    assert stats["rows_in"] == len(lines) == stats["rows_out"] + stats["rows_rejected"]
    assert stats["rows_out"] == 4
    got = quarantine(tmp_path / "out")
    assert [(int(n), r.decode(), raw) for _, n, r, raw in got] == planted
    assert {f for f, _, _, _ in got} == {str(path).encode()}
    expected = {r: 0 for r in yfcc.REASONS}
    for _, reason, _ in planted:
        expected[reason] += 1
    assert stats["rejected"] == expected
    check_real_rows(read(tmp_path / "out"))


def test_invalid_utf8_and_crlf_take_the_exact_path_with_the_same_answers(tmp_path, sample_lines):
    lines = [sample_lines[0], b"\xff\xfe\tshort", sample_lines[1], sample_lines[2].replace(b"Sunlight", b"Sun\xc3light"),
             sample_lines[3]]
    path = tmp_path / "in.tsv"
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    data = path.read_bytes()
    assert yfcc._fast_split(data, 23) is None
    stats = ingest.run(paths=[path], out=tmp_path / "out", progress=False)
    got = [(int(n), r) for _, n, r, _ in quarantine(tmp_path / "out")]
    assert got == [(2, b"wrong_field_count"), (4, b"bad_encoding")]
    assert stats["rows_out"] == 3 and stats["rows_in"] == 5


def test_fast_and_exact_split_agree(tmp_path):
    path = tmp_path / "s.tsv"
    write_synthetic(path, 3000, seed=3, nfields=25, malformed=0.2)
    data = path.read_bytes()
    fast, exact = yfcc._fast_split(data, 25), yfcc._exact_split(data, 25)
    assert fast is not None
    assert fast[1] == exact[1] and fast[2] == exact[2] == 3000
    for name in yfcc.FIELDS_25:
        assert fast[0][name].cast(pa.binary()).equals(exact[0][name])


@pytest.mark.parametrize("nfields", [25, 23])
def test_every_malformed_kind_is_rejected_for_the_reason_it_is_named_by(tmp_path, nfields):
    """The one malformed-row vocabulary (mining.stages.demo.metadata.MALFORMED, which the demo world
    and the bulk rows plant): each defect, geotagged row or not, gets exactly its reason."""
    import numpy as np
    from yfcc_rows import rows

    from mining.stages.demo import metadata as md

    kinds = [(reason, defect) for reason, defects in md.MALFORMED.items() for defect in defects]
    assert set(md.MALFORMED) <= set(yfcc.REASONS) and set(md.MALFORMED_KINDS) <= set(kinds)
    good = list(rows(np.random.default_rng(7), 40, 0, 5_000))
    with_geo = [f for f in good if f[13]][: len(kinds)]
    without = [f for f in good if not f[13]][: len(kinds)]
    lines, planted = [good[0]], []
    for fields in (with_geo, without):
        for (reason, defect), f in zip(kinds, fields):
            lines.append(md.malform(f, reason, defect, np.random.default_rng(len(lines))))
            planted.append((len(lines), reason))
    if nfields == 23:
        lines = [[f[1], *f[3:]] for f in lines]
    path = tmp_path / "kinds.tsv"
    path.write_text("".join("\t".join(f) + "\n" for f in lines), encoding="utf-8")
    stats = ingest.run(paths=[path], out=tmp_path / "out", progress=False)
    assert stats["files"][0]["fields"] == nfields and stats["rows_out"] == 1
    assert [(int(n), r.decode()) for _, n, r, _ in quarantine(tmp_path / "out")] == planted


def test_many_files_blocks_and_parts_match_what_was_planted(tmp_path):
    a, b, c = tmp_path / "a.tsv", tmp_path / "b.tsv.gz", tmp_path / "c.bz2"
    plants = [write_synthetic(a, 2500, seed=1, nfields=25, malformed=0.1, first_id=10_000),
              write_synthetic(b, 1500, seed=2, nfields=23, malformed=0.1, first_id=20_000),
              write_synthetic(c, 700, seed=4, nfields=23, malformed=0.0, first_id=30_000)]
    # small blocks and parts: many blocks per file, rows split over several parts
    stats = ingest.run(paths=[a, b, c], out=tmp_path / "out",
                       options=ingest.IngestOptions(rows_per_part=1000, block_size=64 << 10), progress=False)
    assert stats["rows_in"] == 4700 == stats["rows_out"] + stats["rows_rejected"]
    for fstats, planted, fields in zip(stats["files"], plants, [25, 23, 23]):
        assert fstats["fields"] == fields
        assert fstats["rows_in"] == fstats["rows_out"] + fstats["rows_rejected"]
        assert {k: v for k, v in fstats["rejected"].items() if v} == planted
    assert len(stats["parts"]) == -(-stats["rows_out"] // 1000)
    assert sorted(p.name for p in (tmp_path / "out").glob("part-*.parquet")) == stats["parts"]
    rows = read(tmp_path / "out")
    ids = [r["photo_id"] for r in rows]
    assert len(ids) == stats["rows_out"] and ids == sorted(ids)  # input order kept
    q = quarantine(tmp_path / "out")
    assert len(q) == stats["rows_rejected"]
    per_file = {f: sorted(int(n) for ff, n, _, _ in q if ff == f) for f in {x[0] for x in q}}
    for name, numbers in per_file.items():  # each rejected line holds its planted row
        text = Path(name.decode()).read_bytes()
        opener = gzip.decompress if name.endswith(b".gz") else (lambda x: x)
        lines = opener(text).splitlines()
        for n, (_, n2, _, raw) in zip(numbers, [x for x in q if x[0] == name]):
            assert lines[int(n2) - 1] == raw


def test_places_join(tmp_path, sample_lines):
    places = tmp_path / "places.tsv"
    places.write_text(
        "7088065\t2347606:Washington:State,2490383:Seattle:Town,23424977:United+States:Country\n"
        "343224206\t\n"  # a row without places
        # 6325727670 missing: the join must skip over the gap
        "10642543105\t1098081:Melbourne:Locality,23424748:Australia:Country\n"
    )
    stats = ingest.run(paths=[SAMPLE], places=places, out=tmp_path / "out", progress=False)
    rows = read(tmp_path / "out")
    assert [(r["place_country"], r["place_locality"]) for r in rows] == [
        ("United States", "Seattle"), (None, None), (None, None), ("Australia", "Melbourne")]
    assert stats["places"]["rows_matched"] == 3
    assert open_dataset(tmp_path / "out").schema.equals(output_schema(True))


def test_rerun_is_a_noop_and_a_changed_run_replaces_everything(tmp_path):
    src = tmp_path / "in.tsv"
    write_synthetic(src, 1200, seed=5, nfields=25, malformed=0.05)
    out = tmp_path / "out"
    first = ingest.run(paths=[src], out=out, options=ingest.IngestOptions(rows_per_part=500), progress=False)
    assert len(first["parts"]) == 3
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert ingest.run(paths=[src], out=out, options=ingest.IngestOptions(rows_per_part=500), progress=False) == first
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    write_synthetic(src, 300, seed=6, nfields=25, malformed=0.0)
    second = ingest.run(paths=[src], out=out, options=ingest.IngestOptions(rows_per_part=500), progress=False)
    assert second["rows_in"] == 300 and second["parts"] == ["part-00000.parquet"]
    assert sorted(p.name for p in out.iterdir()) == ["part-00000.parquet", "quarantine.tsv", "stats.json"]
    assert len(read(out)) == 300
    assert json.loads((out / "stats.json").read_text())["rows_in"] == 300


def test_bad_inputs_fail_before_writing(tmp_path):
    with pytest.raises(UserError, match="not found"):
        ingest.run(paths=[SAMPLE, tmp_path / "missing.bz2"], out=tmp_path / "out", progress=False)
    broken = tmp_path / "broken.bz2"
    broken.write_bytes(b"BZh9" + b"\x00" * 64)
    with pytest.raises(UserError, match=r"broken\.bz2: the bz2 stream is truncated or corrupt after line 0 "):
        ingest.run(paths=[broken], out=tmp_path / "out", progress=False)
    with pytest.raises(UserError, match="places file not found"):
        ingest.run(paths=[SAMPLE], places=tmp_path / "nope", out=tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_cli_missing_file_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mining", "ingest", str(tmp_path / "missing.tsv"),
                        "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "missing.tsv" in r.stderr
    assert not (tmp_path / "out").exists()


def test_cli_runs_and_summarises(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mining", "ingest", str(SAMPLE), "--out", str(tmp_path / "out"),
                        "--no-progress"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "4 rows in, 4 out, 0 rejected" in r.stderr


def test_form_decode_matches_urllib_and_flags_bad_escapes():
    rng = random.Random(0)
    alphabet = ["a", "+", "%41", "%2C", "%25", "%C3%A9", "%0A", "Z", "%2", "%G0", "%"]
    values = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) for _ in range(2000)]
    arr = pa.array([v.encode() for v in values], pa.binary())
    for sliced, vals in ((arr, values), (arr.slice(7, 1500), values[7:1507])):
        decoded, bad = form_decode(sliced)
        text, bad_utf = to_utf8(decoded)
        for v, got, b, bu in zip(vals, text.to_pylist(), bad, bad_utf):
            # a bad escape is a "%" not followed by two hex digits
            broken = any(v[i] == "%" and not all(c in "0123456789abcdefABCDEF" for c in v[i + 1:i + 3])
                         or v[i] == "%" and i + 3 > len(v) for i in range(len(v)))
            assert b == broken, v
            if not broken:
                assert bu == (got is None)
                if got is not None:
                    assert got == unquote_plus(v, errors="strict"), v


def test_split_decode_splits_at_raw_commas_then_decodes():
    arr = pa.array([b"a,b%2Cc,d+e", b"", b"x", b",", b"%zz,q", b"caf%C3%A9,%FF", b"tail%2"], pa.binary())
    for sliced, expected in ((arr, 0), (arr.slice(1), 1)):
        lists, bad = split_decode(sliced)
        want = [["a", "b,c", "d e"], [], ["x"], ["", ""], ["%zz", "q"], ["caf\u00e9", None], ["tail%2"]][expected:]
        assert lists.to_pylist() == want
        assert bad.tolist() == [False, False, False, False, True, True, True][expected:]


def test_split_decode_matches_splitting_then_urllib_on_random_values():
    """The compiled one-pass decoder against the rule written out in Python: split at raw
    commas, then form-decode each piece; a `%` without two hex digits marks the row."""
    rng = random.Random(3)
    alphabet = ["a", "+", ",", "%41", "%2C", "%2c", "%25", "%C3%A9", "%", "%2", "%G0", "%,4", "é", "+%2B"]
    values = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7))) for _ in range(3000)]
    arr = pa.array([v.encode() for v in values], pa.binary())
    lists, bad = split_decode(arr.slice(5))
    assert sum(bad) > 100 and sum(~bad) > 100
    for v, got, b in zip(values[5:], lists.to_pylist(), bad):
        pieces = v.split(",") if v else []
        escape = any(re.search(r"%(?![0-9A-Fa-f]{2})", piece) for piece in pieces)
        raw = [unquote_to_bytes(piece.replace("+", " ")) for piece in pieces]
        try:
            text = [r.decode("utf-8") for r in raw]
        except UnicodeDecodeError:
            text = None
        assert b == (escape or text is None), v
        if not b:
            assert got == text == [unquote_plus(piece) for piece in pieces], v


def test_vectorised_utf8_check_matches_python():
    rng = random.Random(1)
    pieces = [b"a", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\x80", b"\xc3", b"\xe0\x80\x80",
              b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xff", b"\xc1\xbf", b"\xf0\x9f", b"z"]
    values = [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 5))) for _ in range(5000)]

    def invalid(v: bytes) -> bool:
        try:
            v.decode("utf-8")
            return False
        except UnicodeDecodeError:
            return True

    arr = pa.array(values, pa.binary())
    for sliced, vals in ((arr, values), (arr.slice(3, 3000), values[3:3003])):
        assert utf8_bad_rows(*binary_buffers(sliced)).tolist() == [invalid(v) for v in vals]
        text, bad = to_utf8(sliced)
        assert [t is None for t in text.to_pylist()] == [invalid(v) for v in vals] == bad.tolist()


def test_blocks_smaller_than_a_line_still_parse(tmp_path, sample_lines):
    path = tmp_path / "in.tsv"
    path.write_bytes(b"\n".join(sample_lines) + b"\n" + b"short\tline")  # no final newline either
    stats = ingest.run(paths=[path], out=tmp_path / "out", options=ingest.IngestOptions(block_size=100), progress=False)
    assert (stats["rows_in"], stats["rows_out"]) == (5, 4)
    check_real_rows(read(tmp_path / "out"))
    assert [(int(n), raw) for _, n, _, raw in quarantine(tmp_path / "out")] == [(5, b"short\tline")]


def test_places_window_skips_gaps_and_stays_small(tmp_path):
    from mining.stages.ingest.places import PlacesJoin

    rng = random.Random(7)
    ids = list(range(1000, 6000))
    lines = [f"{i}\t1:P{i}:Town,2:C{i % 7}:Country" for i in ids if rng.random() > 0.05]  # 5% missing
    path = tmp_path / "places.tsv"
    path.write_text("\n".join(lines) + "\n")
    have = {int(line.split("\t")[0]) for line in lines}
    join = PlacesJoin(path, block_size=2048, slack=50)
    got: list[tuple[int, str | None]] = []
    kept = [i for i in ids if rng.random() > 0.1]  # rows the dataset side rejected are absent
    for start in range(0, len(kept), 300):
        batch = kept[start:start + 300]
        country, locality = join.lookup(pa.array(batch, pa.int64()))
        got += list(zip(batch, locality.to_pylist()))
        assert len(join._ids) <= 300 + 50 + 100  # a batch + slack + one 2 KiB block at most
    join.close()
    assert got == [(i, f"P{i}" if i in have else None) for i in kept]
    assert join.matched == sum(i in have for i in kept)


def test_empty_input_gives_an_empty_typed_dataset(tmp_path):
    path = tmp_path / "empty.tsv"
    path.write_bytes(b"")
    stats = ingest.run(paths=[path], out=tmp_path / "out", progress=False)
    assert (stats["rows_in"], stats["rows_out"], stats["parts"]) == (0, 0, ["part-00000.parquet"])
    table = open_dataset(tmp_path / "out").to_table()
    assert table.num_rows == 0 and table.schema.equals(output_schema(False))


def test_licence_names_are_form_decoded(tmp_path, sample_lines):
    """YFCC writes licence names form-encoded (`Attribution+License`); they come out as text."""
    good = sample_lines[0].split(b"\t")
    at = yfcc.FIELDS_23.index("license_name")
    rows = []
    for i, name in enumerate([b"Attribution+License", b"Attribution-NonCommercial-ShareAlike+License",
                              b"Attribution-NonCommercial License", b"Public%20Domain+Mark%3A+1.0"]):
        f = list(good)
        f[0], f[at] = str(7088065 + i).encode(), name
        rows.append(b"\t".join(f))
    (tmp_path / "lic.tsv").write_bytes(b"\n".join(rows) + b"\n")
    stats = ingest.run(paths=[tmp_path / "lic.tsv"], out=tmp_path / "out", progress=False)
    assert stats["rows_out"] == 4
    assert [r["license_name"] for r in read(tmp_path / "out")] == [
        "Attribution License", "Attribution-NonCommercial-ShareAlike License", "Attribution-NonCommercial License",
        "Public Domain Mark: 1.0"]


# Input domains and faults --------------------------------------------------------

HOSTILE = [  # (field, value, reason): values a stranger can put in the metadata
    ("secret", b"../../../../etc/passwd", "bad_url_field"),
    ("secret", b"", "bad_url_field"),
    ("secret", b"65c9d45e09?x=1", "bad_url_field"),
    ("secret_original", b"%2E%2E%2F", "bad_url_field"),
    ("server_id", b"-8", "bad_url_field"),
    ("server_id", b"8/../..", "bad_url_field"),
    ("server_id", b"", "bad_url_field"),
    ("farm_id", b"+1", "bad_url_field"),
    ("extension", b"php", "bad_url_field"),
    ("extension", b"jpg/../../x", "bad_url_field"),
    ("photo_id", b"-7088065", "bad_photo_id"),
    ("photo_id", b"0", "bad_photo_id"),
    ("title", b"Gno\x00me", "nul_byte"),
    ("title", b"Gno%00me", "nul_byte"),  # decodes to a NUL
    ("user_tags", b"gnome,pr%00ank", "nul_byte"),
    ("user_nsid", b"30302697@N00\x00", "nul_byte"),
    ("marker", b"2", "out_of_domain"),
    ("marker", b"-1", "out_of_domain"),
    ("accuracy", b"17", "out_of_domain"),
    ("accuracy", b"-1", "out_of_domain"),
    ("date_uploaded", b"+1111467388", "bad_number"),  # Arrow does not cast a "+" sign (was a traceback)
    ("accuracy", b"+3", "bad_number"),
]
FINE = [  # values inside their domains: the row is kept
    ("accuracy", b"0"), ("accuracy", b""), ("accuracy", b"16"), ("extension", b"PNG"), ("extension", b"mp4"),
    ("extension", b""), ("secret_original", b""), ("farm_id", b""), ("marker", b"1"),
]


@pytest.mark.parametrize("path_kind", ["fast", "exact"])
def test_hostile_field_values_are_quarantined_with_a_reason(tmp_path, sample_lines, path_kind):
    good = sample_lines[0].split(b"\t")

    def row(name: str, value: bytes) -> bytes:
        f = list(good)
        f[yfcc.FIELDS_23.index(name)] = value
        return b"\t".join(f)

    lines = [row(n, v) for n, v, _ in HOSTILE] + [row(n, v) for n, v in FINE]
    if path_kind == "exact":  # a line of invalid UTF-8 sends the block to the exact splitter
        lines.append(b"\xff\xfe")
    data = b"\n".join(lines) + b"\n"
    assert (yfcc._fast_split(data, 23) is None) == (path_kind == "exact")
    path = tmp_path / "in.tsv"
    path.write_bytes(data)
    stats = ingest.run(paths=[path], out=tmp_path / "out", progress=False)
    got = [(int(n), r.decode(), raw) for _, n, r, raw in quarantine(tmp_path / "out")]
    want = [(i + 1, reason, lines[i]) for i, (_, _, reason) in enumerate(HOSTILE)]
    if path_kind == "exact":
        want.append((len(lines), "wrong_field_count", b"\xff\xfe"))
    assert got == want
    assert stats["rows_out"] == len(FINE)
    kept = read(tmp_path / "out")
    assert [(r["accuracy"], r["extension"], r["secret_original"], r["farm_id"], r["marker"]) for r in kept] == [
        (0, "jpg", "65c9d45e09", 1, 0), (None, "jpg", "65c9d45e09", 1, 0), (16, "jpg", "65c9d45e09", 1, 0),
        (15, "PNG", "65c9d45e09", 1, 0), (15, "mp4", "65c9d45e09", 1, 0), (15, "", "65c9d45e09", 1, 0),
        (15, "jpg", "", 1, 0), (15, "jpg", "65c9d45e09", None, 0), (15, "jpg", "65c9d45e09", 1, 1)]


def test_photo_url_refuses_values_outside_their_domains():
    from mining.stages.download.reader import build_jobs
    from mining.stages.download.sources import Source
    from mining.photos.flickr import photo_url

    host = "https://live.staticflickr.com"
    assert photo_url(host, "b", 8, 7088065, "65c9d45e09", None, None) == \
        "https://live.staticflickr.com/8/7088065_65c9d45e09_b.jpg"
    assert photo_url(host, "o", 8, 7088065, "65c9d45e09", "8ed1387833", "png").endswith("/8/7088065_8ed1387833_o.png")
    for args in [("b", 8, 7088065, "../../../../etc/passwd", None, None), ("b", -8, 7088065, "65c9d45e09", None, None),
                 ("b", 8, -1, "65c9d45e09", None, None), ("b", 8, 7088065, None, None, None),
                 ("o", 8, 7088065, "65c9d45e09", "../x", "jpg"), ("o", 8, 7088065, "65c9d45e09", None, "jpg"),
                 ("o", 8, 7088065, "65c9d45e09", "8ed1387833", "jpg?x=/../")]:
        with pytest.raises(UserError, match="no URL built"):
            photo_url(host, *args)
    # a candidates table that did not come through ingest is refused before any request
    table = pa.table({"photo_id": [1, 2], "server_id": [8, 8], "secret": ["65c9d45e09", "../../../../etc/passwd"],
                      "secret_original": [None, None], "extension": ["jpg", "jpg"]})
    with pytest.raises(UserError, match="photo 2: secret '../../../../etc/passwd' is not hexadecimal"):
        build_jobs(table, [Source(kind="flickr", name="flickr", host=host, size="b")])


def test_quarantine_survives_tabs_newlines_and_backslashes_in_names_and_lines(tmp_path, sample_lines):
    folder = tmp_path / "odd\tname\nwith\\slash\rcr"
    folder.mkdir()
    path = folder / "in\t1.tsv"
    raw_lines = [b"short\tline\\n\twith a lone \r CR and a \\ backslash", b"two\tfields"]
    path.write_bytes(b"\n".join([sample_lines[0], *raw_lines, sample_lines[1]]) + b"\n")
    stats = ingest.run(paths=[path], out=tmp_path / "out", progress=False)
    assert stats["rows_rejected"] == 2 and stats["rows_out"] == 2
    text = (tmp_path / "out" / "quarantine.tsv").read_bytes()
    assert text.count(b"\n") == 3 and b"\r" not in text  # header + 2 records, one line each
    assert read_quarantine(tmp_path / "out") == [
        (str(path), 2, "wrong_field_count", raw_lines[0]), (str(path), 3, "wrong_field_count", raw_lines[1])]
    # the same with Python's csv module, as a stranger would read it (escape character `\`)
    import csv
    import io
    records = list(csv.reader(io.StringIO(text.decode(), newline=""), delimiter="\t", quoting=csv.QUOTE_NONE,
                              escapechar="\\"))
    assert [len(r) for r in records] == [4, 4, 4]


def _truncated(tmp_path: Path, codec: str, keep: float) -> tuple[Path, int, int]:
    """A real compressed dataset file cut at `keep` of its bytes: (path, whole lines Python's
    own decompressor gets out of it, lines in the full file)."""
    src = tmp_path / "full.tsv"
    write_synthetic(src, 6000, seed=11, nfields=25, malformed=0.0)
    data = src.read_bytes()
    packed = (gzip.compress if codec == "gz" else bz2.compress)(data)
    path = tmp_path / f"yfcc100m_dataset.{codec}"
    path.write_bytes(packed[: int(len(packed) * keep)])
    lines = 0
    try:
        with (gzip.open if codec == "gz" else bz2.open)(path) as f:
            for _ in f:
                lines += 1
    except EOFError:
        pass
    return path, lines, data.count(b"\n")


@pytest.mark.parametrize("codec,keep", [("gz", 0.5), ("gz", 0.01), ("bz2", 0.7)])
def test_truncated_compressed_input_is_one_line_naming_the_file_and_line(tmp_path, codec, keep, capsys):
    path, readable, total = _truncated(tmp_path, codec, keep)
    if codec == "bz2":
        assert readable > 0  # cut past its first block: part of the file does decompress
    with pytest.raises(UserError) as err:
        ingest.run(paths=[path], out=tmp_path / "out", options=ingest.IngestOptions(block_size=4 << 20), progress=False)
    msg = str(err.value)
    m = re.fullmatch(re.escape(str(path)) + r": the (gzip|bz2) stream is truncated or corrupt after line (\d+) .*", msg)
    assert m, msg
    assert readable - 5000 <= int(m.group(2)) <= readable < total  # the line reached, to within a MiB
    assert not (tmp_path / "out").exists()
    from mining.cli import main
    assert main(["ingest", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "truncated" in lines[0]
    assert not (tmp_path / "out").exists()


def test_empty_input_warns_naming_the_file(tmp_path, caplog):
    empty, full = tmp_path / "empty.tsv", tmp_path / "empty.tsv.gz"
    empty.write_bytes(b"")
    full.write_bytes(gzip.compress(b""))
    with caplog.at_level("WARNING", logger="mining.stages.ingest"):
        stats = ingest.run(paths=[empty, SAMPLE, full], out=tmp_path / "out", progress=False)
    assert stats["rows_out"] == 4
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [f"{empty} has no rows (an empty input adds nothing to the dataset)",
                      f"{full} has no rows (an empty input adds nothing to the dataset)"]


def _one_line_error(capsys, rc: int, path: Path, reason: str) -> None:
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err == f"mining ingest: error: {path}: {reason}\n"


def test_unwritable_output_is_one_line_naming_the_path_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    import errno

    import pyarrow.parquet as pq

    from mining.cli import main

    blocker = tmp_path / "a-file"  # --out under a regular file: ENOTDIR, whoever runs the test
    blocker.write_text("x")
    rc = main(["ingest", str(SAMPLE), "--out", str(blocker / "out"), "--no-progress"])
    _one_line_error(capsys, rc, blocker / "out", "Not a directory")
    # a full disk while the Parquet parts are written: nothing partial is left, and a
    # complete earlier output survives a failed --force rerun untouched
    out = tmp_path / "out"
    assert main(["ingest", str(SAMPLE), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", no_space)
    rc = main(["ingest", str(SAMPLE), "--out", str(out), "--no-progress", "--force"])
    _one_line_error(capsys, rc, out, "No space left on device")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    rc = main(["ingest", str(SAMPLE), "--out", str(tmp_path / "new"), "--no-progress"])
    _one_line_error(capsys, rc, tmp_path / "new", "No space left on device")
    assert not (tmp_path / "new").exists()


def test_read_only_folder_and_full_disk_for_real(tmp_path, capsys):
    from faults import full_disk, read_only_folder

    from mining.cli import main

    src = tmp_path / "in.tsv"
    write_synthetic(src, 3000, seed=2, nfields=25, malformed=0.01)  # ~1.5 MB of rows
    with read_only_folder(tmp_path / "ro") as ro:
        rc = main(["ingest", str(src), "--out", str(ro / "metadata"), "--no-progress"])
        _one_line_error(capsys, rc, ro / "metadata", "Read-only file system" if os.geteuid() == 0 else "Permission denied")
        assert list(ro.iterdir()) == []
    with full_disk(tmp_path / "full", size_kb=256) as full:
        rc = main(["ingest", str(src), "--out", str(full / "metadata"), "--no-progress"])
        _one_line_error(capsys, rc, full / "metadata", "No space left on device")
        assert list(full.iterdir()) == []


def test_output_bytes_do_not_depend_on_workers_or_compression(tmp_path, monkeypatch):
    """The same rows as plain, multi-stream .bz2 (many 100k blocks, decoded in parallel) and
    multi-member .gz, each with 1-3 workers, and through Arrow's single-threaded decoders
    (what ingest used before): the same Parquet bytes, quarantine and counts."""
    import mining.stages.ingest.stage as ingest_mod

    plain = tmp_path / "rows.tsv"
    planted = write_synthetic(plain, 4000, seed=21, nfields=25, malformed=0.05)
    data = plain.read_bytes()
    cut = len(data) // 3 + 7  # stream boundaries in the middle of a line
    packed = tmp_path / "rows.bz2"
    packed.write_bytes(bz2.compress(data[:cut], 1) + bz2.compress(data[cut:], 1))
    assert len(data) > 10 * 100_000  # level 1: bzip2 blocks of 100 kB, 10+ to share out
    member = tmp_path / "rows.gz"
    member.write_bytes(gzip.compress(data[: 2 * cut]) + gzip.compress(data[2 * cut:]))

    def run(src: Path, workers: int, name: str) -> tuple:
        out = tmp_path / name
        stats = ingest.run(paths=[src], out=out, options=ingest.IngestOptions(rows_per_part=1500, block_size=256 << 10),
                           workers=workers, progress=False)
        assert stats["files"][0]["compression"] == {".tsv": "none", ".bz2": "bz2", ".gz": "gzip"}[src.suffix]
        return ingested(out)

    reference = run(plain, 1, "ref")
    parts, q, stats = reference
    assert stats["rows_in"] == 4000 and len(parts) == -(-stats["rows_out"] // 1500) >= 2
    assert {k: v for k, v in stats["rejected"].items() if v} == planted and len(q) == sum(planted.values())
    for src in (plain, packed, member):
        for workers in (1, 2, 3):
            assert run(src, workers, f"{src.suffix}-{workers}") == reference, (src.name, workers)
    # Arrow's own single-threaded decoders (the code path before parallel decompression)
    monkeypatch.setattr(ingest_mod, "open_stream", lambda path, threads=0: decompress.open_stream(path, 0))
    for src in (packed, member):
        assert run(src, 2, f"{src.suffix}-arrow") == reference, src.name


@pytest.mark.parametrize("codec", ["bz2", "gz"])
def test_parallel_decoders_give_the_bytes_python_does(tmp_path, codec):
    """open_stream with decoder threads: byte-for-byte what Python's bz2/gzip modules give,
    for multi-stream files, read in odd-sized pieces."""
    rng = random.Random(5)
    data = b"".join(b"%d\t%s\n" % (i, bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300))))
                    for i in range(4000))
    mod = bz2 if codec == "bz2" else gzip
    path = tmp_path / f"x.{codec}"
    path.write_bytes(mod.compress(data[:500_001], 1) + mod.compress(data[500_001:], 1))
    for threads in (1, 3):
        stream, raw = decompress.open_stream(path, threads)
        got = []
        try:
            while piece := stream.read(rng.randint(1, 300_000)):
                got.append(piece)
                assert 0 <= raw.tell() <= path.stat().st_size
        finally:
            stream.close()
            raw.close()
        assert b"".join(got) == mod.decompress(path.read_bytes()) == data
