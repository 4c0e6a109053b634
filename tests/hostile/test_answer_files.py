"""Every answer file says what it answers, and is taken only for that (the leak audit, the review).

- `mining audit estimate` given the main review's decisions (which answer every sampled photo, as
  on a small selection the review saw whole) refuses them in one line that names the file and what
  it answers: nobody answered the audit; the audit's own export is taken;
- another audit's answers, and an export from before answer files were labelled, are refused too;
- `mining select` refuses a leak audit's answers given as the review's decisions;
- `mining review import` keeps the two kinds of queue apart (an audit sample into the review's
  database, the review queue into the audit's), refuses another selection's sample into an audit
  database, and never rewrites an item already imported (rank, score, best query stay);
- a full disk while `audit estimate` writes leaves the audit's old outputs whole, never
  distractors.parquet without its audit.json.
"""

from __future__ import annotations

import errno
import json
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from auditing import answer, draw, estimate, review_queue, selection
from selection import make_inputs, select

from mining.cli import main


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_the_audit_refuses_the_main_reviews_decisions(tmp_path, capsys):
    sel, ids = selection(tmp_path, 40)  # small: the audit checks every image, the review saw them all
    audit = tmp_path / "audit"
    sampled = draw(sel, audit)
    assert sorted(sampled) == sorted(int(i) for i in ids)
    review = answer(review_queue(tmp_path / "review_queue.parquet", ids), tmp_path / "review.sqlite",
                    tmp_path / "review_decisions.parquet")
    capsys.readouterr()
    assert estimate(sel, audit, review) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(review) in line and "review" in line and "not this audit's sample" in line, line
    assert not (audit / "audit.json").exists() and not (audit / "distractors.parquet").exists()
    # the audit's own answers: taken
    own = answer(audit / "audit_queue.parquet", audit / "audit.sqlite", audit / "decisions.parquet")
    assert estimate(sel, audit, own) == 0
    assert json.loads((audit / "audit.json").read_text())["method"] == "census"


def test_another_audits_answers_and_an_unlabelled_export_are_refused(tmp_path, capsys):
    sel, _ = selection(tmp_path, 2000)
    mine, other = tmp_path / "a", tmp_path / "b"
    sampled = draw(sel, mine, "--seed", "3")
    draw(sel, other, "--seed", "4")
    theirs = answer(other / "audit_queue.parquet", other / "audit.sqlite", other / "decisions.parquet")
    capsys.readouterr()
    assert estimate(sel, mine, theirs) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(theirs) in line and "another audit sample" in line, line
    # an export without the labels (made before they existed, or by hand) answering every sampled photo
    old = tmp_path / "old.parquet"
    pq.write_table(pa.table({"landmark": ["tower"] * len(sampled), "photo_id": pa.array(sampled, pa.int64()),
                             "decision": ["not_landmark"] * len(sampled)}), old)
    assert estimate(sel, mine, old) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(old) in line and "mining review export --db" in line, line
    assert not (mine / "audit.json").exists()


def test_select_refuses_the_audits_answers(tmp_path, capsys):
    scores_dir, ids, _ = make_inputs(tmp_path)
    sel, _ = selection(tmp_path / "s", 30)
    audit = tmp_path / "audit"
    draw(sel, audit)
    # the audit's queue, filed under photos select knows: an export whose rows select would accept
    queue = pq.read_table(audit / "audit_queue.parquet")
    queue = queue.set_column(queue.schema.get_field_index("photo_id"), "photo_id", pa.array(ids[:30], pa.int64()))
    pq.write_table(queue, tmp_path / "audit_queue.parquet")
    answers = answer(tmp_path / "audit_queue.parquet", tmp_path / "audit.sqlite", tmp_path / "answers.parquet")
    capsys.readouterr()
    assert select(tmp_path, scores_dir, answers, tmp_path / "out") == 2
    line = _one_line(capsys.readouterr().err)
    assert str(answers) in line and "audit" in line and "not the review" in line, line
    assert not (tmp_path / "out").exists()


def _items(database: Path) -> list[tuple]:
    with sqlite3.connect(database) as con:
        return con.execute("SELECT landmark, photo_id, rank, score, total_score, best_query FROM items "
                           "ORDER BY id").fetchall()


def _kind(database: Path) -> str | None:
    with sqlite3.connect(database) as con:
        row = con.execute("SELECT value FROM meta WHERE key = 'queue_kind'").fetchone()
    return row[0] if row else None


def test_review_import_keeps_the_queues_apart(tmp_path, capsys):
    sel, ids = selection(tmp_path / "one", 600)
    audit = tmp_path / "audit"
    draw(sel, audit)
    main_queue = review_queue(tmp_path / "review_queue.parquet", ids[:250])
    review_db, audit_db = tmp_path / "review.sqlite", tmp_path / "audit.sqlite"
    assert main(["review", "import", str(main_queue), "--db", str(review_db)]) == 0
    assert main(["review", "import", str(audit / "audit_queue.parquet"), "--db", str(audit_db)]) == 0
    review_items, audit_items = _items(review_db), _items(audit_db)
    capsys.readouterr()
    # the audit's sample into the review's database: refused, the database says `review` still
    assert main(["review", "import", str(audit / "audit_queue.parquet"), "--db", str(review_db)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "audit" in line and str(review_db) in line, line
    assert _kind(review_db) == "review" and _items(review_db) == review_items
    # the review queue into the audit's database: refused, no item added, no blind rank changed
    assert main(["review", "import", str(main_queue), "--db", str(audit_db)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "review queue" in line and str(audit_db) in line, line
    assert _kind(audit_db) == "audit" and _items(audit_db) == audit_items
    # another selection's sample into the audit's database: refused
    sel2, _ = selection(tmp_path / "two", 600, seed=1)
    draw(sel2, tmp_path / "audit2")
    assert main(["review", "import", str(tmp_path / "audit2" / "audit_queue.parquet"), "--db", str(audit_db)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "another selection" in line, line
    assert _items(audit_db) == audit_items
    # the same sample again: nothing added, nothing rewritten
    assert main(["review", "import", str(audit / "audit_queue.parquet"), "--db", str(audit_db)]) == 0
    assert _items(audit_db) == audit_items


def test_review_import_never_rewrites_an_imported_item(tmp_path, capsys):
    review_db = tmp_path / "review.sqlite"
    first = review_queue(tmp_path / "q1.parquet", [11, 12, 13])
    assert main(["review", "import", str(first), "--db", str(review_db)]) == 0
    before = _items(review_db)
    # a newer queue: the same photos in another order with other scores, and one new photo
    pq.write_table(pa.table({"landmark": ["tower"] * 4, "photo_id": pa.array([13, 12, 11, 14], pa.int64()),
                             "rank": pa.array([1, 2, 3, 4], pa.int32()), "score": [9.0, 8.0, 7.0, 6.0],
                             "total_score": [9.5] * 4, "best_query": ["tower_002"] * 4}), tmp_path / "q2.parquet")
    capsys.readouterr()
    assert main(["review", "import", str(tmp_path / "q2.parquet"), "--db", str(review_db)]) == 0
    assert json.loads(capsys.readouterr().out) == {"rows": 4, "added": 1, "kept": 3}
    assert _items(review_db) == before + [("tower", 14, 4, 6.0, 9.5, "tower_002")]


def test_a_full_disk_during_the_estimate_leaves_the_old_outputs_whole(tmp_path, monkeypatch, capsys):
    sel, _ = selection(tmp_path, 40, images=False)
    audit = tmp_path / "audit"
    sampled = draw(sel, audit)
    clean = answer(audit / "audit_queue.parquet", audit / "audit.sqlite", tmp_path / "clean.parquet")
    assert estimate(sel, audit, clean) == 0
    names = ("audit.json", "distractors.parquet", "distractors.txt")
    before = {n: (audit / n).read_bytes() for n in names}
    # the reviewers change their mind on one photo: the new outputs differ from the old ones
    leaky = answer(audit / "audit_queue.parquet", tmp_path / "again.sqlite", tmp_path / "leaky.parquet",
                   votes={sampled[0]: "y"})
    real = Path.write_text

    def full(self, data, *a, **kw):
        if "audit.json" in self.name:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, data, *a, **kw)

    monkeypatch.setattr(Path, "write_text", full)
    capsys.readouterr()
    assert estimate(sel, audit, leaky) == 1
    _one_line(capsys.readouterr().err)
    assert {n: (audit / n).read_bytes() for n in names} == before
    assert sorted(p.name for p in audit.iterdir() if p.name.startswith(".")) == []
    monkeypatch.undo()
    assert estimate(sel, audit, leaky) == 0
    assert json.loads((audit / "audit.json").read_text())["leaks_found"] == [sampled[0]]
    assert sampled[0] not in pq.read_table(audit / "distractors.parquet").column("photo_id").to_pylist()


def test_a_real_full_disk_between_the_set_and_its_audit_json(tmp_path, capsys):
    """A real full disk (a tmpfs, tests/helpers/faults.py) filled so that the new set fits beside
    the old outputs and its audit.json does not: one line, and the old outputs stay whole."""
    import math
    import os

    from faults import full_disk

    sel, _ = selection(tmp_path, 40)
    audit = tmp_path / "audit"
    sampled = draw(sel, audit)
    clean = answer(audit / "audit_queue.parquet", audit / "audit.sqlite", tmp_path / "clean.parquet")
    leaky = answer(audit / "audit_queue.parquet", tmp_path / "again.sqlite", tmp_path / "leaky.parquet",
                   votes={sampled[0]: "y"})
    assert estimate(sel, audit, leaky, tmp_path / "dry") == 0  # the sizes of the new outputs
    with full_disk(tmp_path / "disk", size_kb=256) as disk:
        assert estimate(sel, audit, clean, disk) == 0
        # the set, and the plan and answers its counts come from (copied beside audit.json), then audit.json
        names = ("audit.json", "distractors.parquet", "distractors.txt", "plan.json", "decisions.parquet")
        before = {n: (disk / n).read_bytes() for n in names}
        st = os.statvfs(disk)
        room = sum(math.ceil((tmp_path / "dry" / n).stat().st_size / st.f_bsize) for n in names[1:])
        with open(disk / "filler", "wb") as f:  # leave room for the new set, not for its audit.json
            f.write(b"\0" * ((st.f_bavail - room) * st.f_bsize))
        capsys.readouterr()
        assert estimate(sel, audit, leaky, disk) == 1
        line = _one_line(capsys.readouterr().err)
        assert "No space left on device" in line, line
        assert {n: (disk / n).read_bytes() for n in names} == before
        assert sorted(p.name for p in disk.iterdir()) == sorted([*names, "filler"])


@pytest.mark.parametrize("edit", ["outside", "twice", "text-ids", "fraction-ids"])
def test_an_audit_answer_file_edited_after_export_is_refused(tmp_path, capsys, edit):
    """The label names the sample, not the rows: rows edited after the export (a landmark answer for
    a photo outside the sample, which the estimate ignored with exit 0; a photo answered twice; ids
    as text, a traceback on 'abc'; fractional ids, truncated) are refused in one line."""
    sel, ids = selection(tmp_path, 400)
    audit = tmp_path / "audit"
    sampled = set(draw(sel, audit))
    table = pq.read_table(answer(audit / "audit_queue.parquet", audit / "audit.sqlite", tmp_path / "a.parquet"))
    rows, schema = table.to_pylist(), table.schema
    if edit == "outside":
        rows.append(dict(rows[0], photo_id=next(int(i) for i in ids if int(i) not in sampled), decision="landmark"))
    elif edit == "twice":
        rows.append(dict(rows[0], decision="landmark"))
    else:
        kind = pa.string() if edit == "text-ids" else pa.float64()
        schema = schema.set(schema.get_field_index("photo_id"), pa.field("photo_id", kind))
        rows = [dict(r, photo_id=(str if edit == "text-ids" else float)(r["photo_id"])) for r in rows]
        rows[0]["photo_id"] = "abc" if edit == "text-ids" else rows[0]["photo_id"] + 0.5
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp_path / "edited.parquet")
    capsys.readouterr()
    assert estimate(sel, audit, tmp_path / "edited.parquet") == 2
    line = _one_line(capsys.readouterr().err)
    assert str(tmp_path / "edited.parquet") in line and ("export" in line), line
    assert not (audit / "audit.json").exists()


@pytest.mark.parametrize("ids", [pa.array(["1", "2", "abc"]), pa.array([1.0, 2.5, 3.0]),
                                 pa.array([2**64 - 1, 2, 3], pa.uint64())], ids=["text", "fraction", "uint64"])
def test_review_import_refuses_photo_ids_that_are_not_integers(tmp_path, capsys, ids):
    """A queue's photo ids are int64: text was a traceback ('abc'), 2.5 was imported as photo 2
    (another photo's answer), an id past 2^63 a traceback from SQLite."""
    queue = tmp_path / "queue.parquet"
    pq.write_table(pa.table({"landmark": ["tower"] * 3, "photo_id": ids, "rank": pa.array([1, 2, 3], pa.int32()),
                             "score": [1.0] * 3, "total_score": [2.0] * 3, "best_query": ["tower_001"] * 3}), queue)
    capsys.readouterr()
    assert main(["review", "import", str(queue), "--db", str(tmp_path / "r.sqlite")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(queue) in line and "column photo_id" in line and "not integers" in line, line
    with sqlite3.connect(tmp_path / "r.sqlite") as con:
        assert con.execute("SELECT COUNT(*) FROM items").fetchone()[0] == 0


def test_the_audit_refuses_a_selection_that_lists_a_photo_twice(tmp_path, capsys):
    """A selection with a repeated photo was audited as a census of 30 images where 29 were checked."""
    sel, ids = selection(tmp_path, 30)
    table = pq.read_table(sel / "distractors.parquet")
    repeated = [int(i) for i in ids[:-1]] + [int(ids[0])]
    pq.write_table(table.set_column(table.schema.get_field_index("photo_id"), "photo_id",
                                    pa.array(repeated, pa.int64())), sel / "distractors.parquet")
    capsys.readouterr()
    assert main(["audit", "draw", "--selected", str(sel), "--out", str(tmp_path / "audit")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"photo {int(ids[0])} is listed more than once" in line, line
    assert not (tmp_path / "audit" / "plan.json").exists()


def test_review_export_never_writes_over_a_database(tmp_path, capsys):
    """`review export --out` naming the database itself replaced it (every vote) with the Parquet
    export, exit 0; another database is refused the same way."""
    sel, _ = selection(tmp_path, 30)
    audit = tmp_path / "audit"
    draw(sel, audit)
    answer(audit / "audit_queue.parquet", audit / "audit.sqlite", audit / "decisions.parquet")
    (tmp_path / "other.sqlite").write_bytes((audit / "audit.sqlite").read_bytes())
    for out in (audit / "audit.sqlite", tmp_path / "other.sqlite"):
        before = out.read_bytes()
        capsys.readouterr()
        assert main(["review", "export", "--db", str(audit / "audit.sqlite"), "--out", str(out)]) == 2
        line = _one_line(capsys.readouterr().err)
        assert str(out) in line and "review database" in line, line
        assert out.read_bytes() == before
    with sqlite3.connect(audit / "audit.sqlite") as con:
        assert con.execute("SELECT COUNT(*) FROM items").fetchone()[0] == 30


def test_audit_estimate_never_writes_over_the_selection_it_reads(tmp_path, capsys):
    """`audit estimate --out SELECTED` replaced the selection with the audited set, exit 0."""
    sel, _ = selection(tmp_path, 30)
    audit = tmp_path / "audit"
    draw(sel, audit)
    own = answer(audit / "audit_queue.parquet", audit / "audit.sqlite", audit / "decisions.parquet",
                 votes={}, default="y")
    before = (sel / "distractors.parquet").read_bytes()
    capsys.readouterr()
    assert estimate(sel, audit, own, out=sel) == 2
    line = _one_line(capsys.readouterr().err)
    assert "would replace it" in line, line
    assert (sel / "distractors.parquet").read_bytes() == before and not (sel / "audit.json").exists()
