"""`mining select`: review rules, top N, determinism, attribution, refusals."""

from __future__ import annotations

import csv
import io
import json
import logging
import pickle
from urllib.parse import unquote

import pyarrow.parquet as pq
from selection import expected, hostile_selection, make_inputs, select, write_decisions

from mining.photos import imageindex
from mining.settings.layout import image_relpath
from mining.publishing.licences import licence_code


def test_select_drops_confirmed_keeps_top_n_deterministically(tmp_path):
    scores_dir, ids, score = make_inputs(tmp_path)
    top = expected(ids, score, set(), 30)
    confirmed, unclear, rejected = top[0], top[1], top[2]
    dec = write_decisions(tmp_path / "d.parquet", [
        ("tower", confirmed, "landmark"), ("bridge", confirmed, "not_landmark"),  # any landmark → dropped
        ("bridge", unclear, "unclear"), ("tower", rejected, "not_landmark")])
    out = tmp_path / "sel"
    assert select(tmp_path, scores_dir, dec, out, "--n", "10", "--landmarks", str(tmp_path / "gnd")) == 0
    want = expected(ids, score, {confirmed}, 10)
    table = pq.read_table(out / "distractors.parquet").to_pandas()
    assert table.photo_id.tolist() == want
    assert confirmed not in table.photo_id.tolist() and unclear in table.photo_id.tolist()
    assert table["rank"].tolist() == list(range(1, 11))
    assert (out / "distractors.txt").read_text().splitlines() == [image_relpath(p) for p in want]
    assert table.url[0] == f"https://live.staticflickr.com/65535/{want[0]}_5e{want[0]}_b.jpg"
    assert {"license_name", "license_url", "user_nsid", "user_nickname", "score", "score_cnn", "path"} <= set(table)
    rows = list(csv.DictReader((out / "ATTRIBUTION.csv").open()))
    assert [int(r["photo_id"]) for r in rows] == want
    assert rows[0]["source"].startswith("https://www.flickr.com/photos/") and rows[0]["license_url"]
    md = (out / "ATTRIBUTION.md").read_text()
    assert md.count("creativecommons.org/licenses/by/2.0") == 10 and "user\\|" in md
    stats = json.loads((out / "stats.json").read_text())
    assert stats["n_selected"] == 10 and stats["confirmed_landmark"] == 1 and stats["warning"] is None
    out2 = tmp_path / "sel2"
    assert select(tmp_path, scores_dir, dec, out2, "--n", "10") == 0
    for name in ("distractors.txt", "distractors.parquet", "ATTRIBUTION.md", "ATTRIBUTION.csv"):
        assert (out / name).read_bytes() == (out2 / name).read_bytes()
    out3 = tmp_path / "sel3"
    assert select(tmp_path, scores_dir, dec, out3, "--n", "10", "--drop-unclear") == 0
    t3 = pq.read_table(out3 / "distractors.parquet").to_pandas()
    assert t3.photo_id.tolist() == expected(ids, score, {confirmed, unclear}, 10)


def test_n_larger_than_available_keeps_all_and_warns(tmp_path, caplog):
    scores_dir, ids, score = make_inputs(tmp_path, n=12)
    dec = write_decisions(tmp_path / "d.parquet", [("tower", int(ids[0]), "landmark")])
    with caplog.at_level(logging.WARNING):
        assert select(tmp_path, scores_dir, dec, tmp_path / "o", "--n", "100") == 0
    assert "only 11 candidates are left" in caplog.text
    stats = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert stats["n_selected"] == 11 and "only 11" in stats["warning"]
    assert len((tmp_path / "o" / "distractors.txt").read_text().splitlines()) == 11


def test_empty_decisions_and_images_root(tmp_path):
    scores_dir, ids, score = make_inputs(tmp_path, n=8)
    dec = write_decisions(tmp_path / "d.parquet", [])
    root = tmp_path / "images"
    ranked_ids = expected(ids, score, set(), 8)
    keep = ranked_ids[1::2]
    for p in keep:
        (root / image_relpath(p)).parent.mkdir(parents=True, exist_ok=True)
        (root / image_relpath(p)).write_bytes(b"jpg")
    # the index says where each image is; the download's keys, not recomputed by select
    imageindex.write(root, [{"photo_id": p, "photo_hash": f"h{p}", "status": "ok", "source": "flickr",
                             "low_res": False, "path": image_relpath(p)} for p in ranked_ids])
    assert select(tmp_path, scores_dir, dec, tmp_path / "o", "--n", "3", "--images-root", str(root)) == 0
    out = pq.read_table(tmp_path / "o" / "distractors.parquet").to_pandas()
    assert out.photo_id.tolist() == keep[:3]
    assert out.photo_hash.tolist() == [f"h{p}" for p in keep[:3]] and set(out.source) == {"flickr"}
    assert json.loads((tmp_path / "o" / "stats.json").read_text())["missing_images"] == 3


def test_require_full_res_leaves_out_low_res_images(tmp_path):
    scores_dir, ids, score = make_inputs(tmp_path, n=8)
    dec = write_decisions(tmp_path / "d.parquet", [])
    root = tmp_path / "images"
    ranked_ids = expected(ids, score, set(), 8)
    low = set(ranked_ids[:2])  # the two best were only on the mirror, at ~500 px
    rows = []
    for p in ranked_ids:
        (root / image_relpath(p)).parent.mkdir(parents=True, exist_ok=True)
        (root / image_relpath(p)).write_bytes(b"jpg")
        rows.append({"photo_id": p, "photo_hash": image_relpath(p)[8:-4], "status": "ok", "low_res": p in low,
                     "source": "multimedia-commons" if p in low else "flickr", "path": image_relpath(p)})
    imageindex.write(root, rows)
    # off (the schema's default is on, as the CLI's now)
    assert select(tmp_path, scores_dir, dec, tmp_path / "a", "--n", "3", "--images-root", str(root),
                  "--no-require-full-res") == 0
    assert pq.read_table(tmp_path / "a" / "distractors.parquet").column("photo_id").to_pylist() == ranked_ids[:3]
    assert select(tmp_path, scores_dir, dec, tmp_path / "f", "--n", "3", "--images-root", str(root),
                  "--require-full-res") == 0
    t = pq.read_table(tmp_path / "f" / "distractors.parquet").to_pandas()
    assert t.photo_id.tolist() == ranked_ids[2:5] and set(t.source) == {"flickr"}
    stats = json.loads((tmp_path / "f" / "stats.json").read_text())
    assert stats["low_res_skipped"] == 2 and stats["require_full_res"] is True


def test_refusals(tmp_path, capsys):
    scores_dir, ids, score = make_inputs(tmp_path)
    out = tmp_path / "o"

    def refused(dec, *extra, msg):
        assert select(tmp_path, scores_dir, dec, out, *extra) == 2
        assert msg in capsys.readouterr().err
        assert not (out / "distractors.txt").exists()

    refused(write_decisions(tmp_path / "u.parquet", [("tower", 123456789012, "landmark")]),
            msg="not scored candidates")
    refused(write_decisions(tmp_path / "l.parquet", [("castle", int(ids[0]), "landmark")]),
            msg="landmark(s) the scores do not know")
    refused(write_decisions(tmp_path / "f.parquet", [], metadata={b"landmarks_fingerprint": b"0123456789abcdef"}),
            msg="decisions were made for landmark dataset")
    refused(tmp_path / "absent.parquet", msg="not found")
    good = write_decisions(tmp_path / "g.parquet", [])
    other = tmp_path / "other"
    other.mkdir()
    gnd = {"imlist": ["a"], "qimlist": ["x_001"], "gnd": [{"bbx": [0, 0, 1, 1], "easy": [0], "hard": [], "junk": []}]}
    (other / "gnd_other.pkl").write_bytes(pickle.dumps(gnd))
    refused(good, "--landmarks", str(other), msg="scores were made for landmark dataset")
    (scores_dir / "stats.json").unlink()
    refused(good, msg="stats.json not found")


def test_attribution_csv_of_hostile_metadata_reads_back_one_record_per_photo(tmp_path):
    import pyarrow.csv as pacsv

    out, want, meta = hostile_selection(tmp_path)
    raw = (out / "ATTRIBUTION.csv").read_bytes()
    header = ["path", "photo_id", "title", "owner_nsid", "owner_name", "source", "license_name", "license_url"]
    assert raw.count(b"\n") == len(want) + 1 and b"\r" not in raw and b"\t" not in raw
    rows = list(csv.reader(io.StringIO(raw.decode())))
    assert rows[0] == header and len(rows) == len(want) + 1
    recs = [dict(zip(header, r)) for r in rows[1:]]
    assert all(len(r) == len(header) for r in rows)
    assert [int(r["photo_id"]) for r in recs] == want
    assert [r["path"] for r in recs] == [image_relpath(p) for p in want]
    fields = {"title": "title", "owner_nsid": "user_nsid", "owner_name": "user_nickname",
              "source": "page_url", "license_name": "license_name", "license_url": "license_url"}
    formula = 0
    for r in recs:
        m = meta[int(r["photo_id"])]
        for col, src in fields.items():
            got, orig = r[col], m[src]
            assert not any(c in got for c in "\r\n\t\x00\x1b\x7f\x85")
            if orig[:1] in "=+-@\t\r" and orig or orig.lstrip(" ").startswith(("=", "+", "-", "@")):
                formula += 1
                assert got.startswith("'"), (col, orig, got)
                got = got[1:]
            else:
                assert got.lstrip(" ")[:1] not in ("=", "+", "-", "@", "'"), (col, orig, got)
            assert got == "".join(" " if c in "\r\n\t" or ord(c) < 32 or 0x7f <= ord(c) <= 0x9f
                                  or c in "\u2028\u2029" else c for c in orig), (col, orig, got)
    assert formula >= 6 * 7  # every formula string of the corpus, in every field
    one = next(r for r in recs if meta[int(r["photo_id"])]["title"].startswith("=HYPERLINK"))
    assert one["title"] == "'=HYPERLINK(\"http://evil.example/\",\"click me\")"
    crlf = next(r for r in recs if meta[int(r["photo_id"])]["title"].startswith("line one"))
    assert crlf["title"] == "line one  line two | x | y |" and crlf["photo_id"] != ""
    table = pacsv.read_csv(out / "ATTRIBUTION.csv")
    assert table.column_names == header and table.num_rows == len(want)
    assert table.column("photo_id").to_pylist() == want
    for col in header[2:]:  # pyarrow reads the same values as the csv module
        assert table.column(col).to_pylist() == [r[col] for r in recs], col


def test_attribution_md_of_hostile_metadata_is_one_inert_row_per_photo(tmp_path):
    from hostile import markdown_parser, shown

    out, want, meta = hostile_selection(tmp_path)
    md = (out / "ATTRIBUTION.md").read_text()
    tokens = markdown_parser().parse(md)
    assert not [t for t in tokens if t.type.startswith("html")]
    inline = [c for t in tokens if t.type == "inline" for c in (t.children or [])]
    assert not [c for c in inline if c.type.startswith("html") or c.type == "image"]
    hrefs = [c.attrs["href"] for c in inline if c.type == "link_open"]
    assert hrefs and all(h.startswith(("http://", "https://")) for h in hrefs)
    assert not [h for h in hrefs if any(ch in h for ch in " ()<>|\"'`\\\r\n")]
    # the table: one body row per photo, six cells each, in rank order
    rows, cells, row = [], None, None
    for t in tokens:
        if t.type == "tr_open":
            row = []
        elif t.type == "inline" and row is not None:
            row.append(t)
        elif t.type == "tr_close":
            rows.append(row)
            row = None
    assert len(rows) == len(want) + 1 and all(len(r) == 6 for r in rows)
    for r, pid in zip(rows[1:], want):
        rank, path, title, author, source, licence = r
        assert path.children[0].content == image_relpath(pid)
        m = meta[pid]
        text = "".join(c.content for c in title.children if c.type == "text")
        assert text == shown(m["title"]), (m["title"], title.content)
        nick = shown(m["user_nickname"]) or shown(m["user_nsid"])
        who = "".join(c.content for c in author.children if c.type == "text")
        assert who == f"{nick} ({shown(m['user_nsid'])})".strip()
        for cell, url, label in ((source, m["page_url"], m["page_url"]), (licence, m["license_url"], m["license_name"])):
            links = [c for c in cell.children if c.type == "link_open"]
            ok = url.startswith(("http://", "https://")) and "\n" not in url and url != "http://[::1"
            if cell is licence:  # linked only when it is a known licence (mining.publishing.licences): none here
                ok = licence_code(label, url) is not None
                assert ok or cell.content.endswith("(unknown licence)"), cell.content
            assert len(links) == (1 if ok else 0), (url, cell.content)
            if ok:  # the link goes where the metadata says, percent-encoded
                assert unquote(links[0].attrs["href"]) == url
    assert "creativecommons.org/licenses/by/2.0/" in (out / "ATTRIBUTION.csv").read_text()
