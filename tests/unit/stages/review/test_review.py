"""Review database: idempotent import, append-only votes with undo, majority export."""

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from review_world import make_world

from mining.cli import main
from mining.errors import UserError
from mining.stages.review import database, decisions, listing, queue_import, vote_log


@pytest.fixture
def world(tmp_path):
    w = make_world(tmp_path)
    con = database.connect(w["db"], create=True)
    queue_import.import_queue(con, w["queue"], scores_fingerprint=None)
    yield w, con
    con.close()


def item_id(con, landmark, rank):
    return con.execute("SELECT id FROM items WHERE landmark = ? AND rank = ?", (landmark, rank)).fetchone()[0]


def test_import_is_idempotent_and_keeps_votes(world, tmp_path):
    w, con = world
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again = queue_import.import_queue(con, w["queue"], scores_fingerprint=None)
    assert (again.rows, again.added, again.kept) == (12, 0, 12)
    first = item_id(con, "tower", 1)
    vote_log.vote(con, first, "ann", "y")
    # A newer queue: one old item at another rank (it keeps its own), one new item; old decisions stay.
    new = tmp_path / "q2.parquet"
    pq.write_table(pa.Table.from_pylist([
        {"landmark": "tower", "photo_id": 10000, "rank": 3, "score": 1.0},
        {"landmark": "tower", "photo_id": 99, "rank": 7, "score": 0.5},
    ]), new)
    r = queue_import.import_queue(con, new, scores_fingerprint=None)
    assert (r.rows, r.added, r.kept) == (2, 1, 1)
    assert con.execute("SELECT COUNT(*) FROM items").fetchone()[0] == 13
    assert con.execute("SELECT rank, score FROM items WHERE id = ?", (first,)).fetchone() == (1, 10.0)
    assert vote_log.current_votes(con) == {(first, 1): "y"}


def test_import_rejects_bad_queues(tmp_path):
    con = database.connect(tmp_path / "r.sqlite", create=True)
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"landmark": ["a"], "rank": [1]}), bad)
    with pytest.raises(UserError, match="photo_id"):
        queue_import.import_queue(con, bad, scores_fingerprint=None)
    (tmp_path / "junk.parquet").write_text("nope")
    with pytest.raises(UserError, match="Parquet"):
        queue_import.import_queue(con, tmp_path / "junk.parquet", scores_fingerprint=None)
    with pytest.raises(UserError, match="not found"):
        queue_import.import_queue(con, tmp_path / "missing.parquet", scores_fingerprint=None)
    with pytest.raises(UserError, match="not found"):
        database.connect(tmp_path / "absent.sqlite")


def test_votes_undo_walks_back_through_the_log(world):
    w, con = world
    a, b = item_id(con, "tower", 1), item_id(con, "tower", 2)
    vote_log.vote(con, a, "ann", "y")
    vote_log.vote(con, b, "ann", "n")
    vote_log.vote(con, a, "ann", "u")          # changes her mind on a
    vote_log.vote(con, a, "bob", "n")
    assert vote_log.current_votes(con) == {(a, 1): "u", (b, 1): "n", (a, 2): "n"}
    assert vote_log.undo(con, "ann") == {"item_id": a, "vote": "y", "count": 1}      # her earlier y applies again
    assert vote_log.undo(con, "ann") == {"item_id": b, "vote": None, "count": 1}
    assert vote_log.undo(con, "ann") == {"item_id": a, "vote": None, "count": 1}
    assert vote_log.undo(con, "ann") is None
    assert vote_log.undo(con, "nobody") is None
    assert vote_log.current_votes(con) == {(a, 2): "n"}
    # Append-only: 4 votes + 3 undos, and the cache equals a replay of the log.
    assert con.execute("SELECT COUNT(*) FROM votes").fetchone()[0] == 7
    assert vote_log.current_votes(con) == vote_log.replay_current(con)


def test_a_bulk_decision_skips_own_votes_and_is_undone_as_one(world):
    w, con = world
    ids = [item_id(con, "tower", r) for r in (1, 2, 3, 4, 5)]
    vote_log.vote(con, ids[1], "ann", "y")               # her own vote stays, whatever the bulk says
    vote_log.vote(con, ids[2], "bob", "y")               # another reviewer's vote does not count as hers
    r = vote_log.bulk_vote(con, ids, "ann", "n")
    assert (r["voted"], r["skipped"]) == (4, 1) and r["batch"] is not None
    assert {i: v for (i, rid), v in vote_log.current_votes(con).items() if rid == 1} == {
        ids[0]: "n", ids[1]: "y", ids[2]: "n", ids[3]: "n", ids[4]: "n"}
    assert vote_log.bulk_vote(con, ids, "ann", "u")["voted"] == 0   # nothing left undecided: an empty batch
    undone = vote_log.undo(con, "ann")                   # the whole batch, in one step
    assert undone == {"item_id": ids[0], "vote": None, "count": 4}
    assert {i: v for (i, rid), v in vote_log.current_votes(con).items() if rid == 1} == {ids[1]: "y"}
    assert vote_log.undo(con, "ann") == {"item_id": ids[1], "vote": None, "count": 1}
    assert vote_log.current_votes(con) == vote_log.replay_current(con) == {(ids[2], 2): "y"}
    with pytest.raises(vote_log.NotFound):
        vote_log.bulk_vote(con, [ids[0], 10**9], "ann", "n")
    assert con.execute("SELECT COUNT(*) FROM votes WHERE vote != 'undo'").fetchone()[0] == 6


def test_filters_undecided_mine_disputed_and_a_page_after_an_item(world):
    """The review app's filters list exactly: this reviewer's undecided items, her decided
    ones, the items whose reviewers' standing votes differ; `after` starts right after an item
    whatever the filter kept before it (her votes move items out of "undecided")."""
    w, con = world  # 6 items per landmark
    ids = [item_id(con, "tower", r) for r in range(1, 7)]
    for k, v in ((0, "y"), (1, "n"), (2, "y"), (3, "u")):
        vote_log.vote(con, ids[k], "ann", v)
    for k, v in ((0, "y"), (1, "y"), (2, "n"), (4, "n")):
        vote_log.vote(con, ids[k], "bob", v)
    ranks = lambda show, **kw: [x["rank"] for x in listing.items_page(con, "tower", kw.get("offset", 0), 100, "ann", show,  # noqa: E731
                                                                 kw.get("after"))["items"]]
    assert ranks("all") == [1, 2, 3, 4, 5, 6]
    assert ranks("undecided") == [5, 6]        # bob's vote on 5 is not hers
    assert ranks("mine") == [1, 2, 3, 4]
    assert ranks("disputed") == [2, 3]         # 1: both y; 4 and 5: one vote each
    page = listing.items_page(con, "tower", 0, 1, "ann", "undecided")
    assert (page["total"], page["offset"], [x["vote"] for x in page["items"]]) == (2, 0, [None])
    vote_log.vote(con, ids[4], "ann", "n")           # rank 5 decided: "undecided" is now [6]
    page = listing.items_page(con, "tower", 0, 100, "ann", "undecided", after=ids[4])
    assert (page["total"], page["offset"], [x["rank"] for x in page["items"]]) == (1, 0, [6])
    assert ranks("mine", after=ids[1]) == [3, 4, 5] and ranks("all", after=ids[5]) == []
    assert vote_log.undo(con, "ann")["item_id"] == ids[4]
    assert ranks("undecided") == [5, 6] and ranks("disputed") == [2, 3]
    nobody = listing.items_page(con, "tower", 0, 100, None, "undecided")["items"]   # no reviewer: nothing decided
    assert [x["rank"] for x in nobody] == [1, 2, 3, 4, 5, 6]


def test_a_database_from_before_bulk_votes_gains_the_batch_column(tmp_path):
    import sqlite3

    p = tmp_path / "old.sqlite"
    old = sqlite3.connect(p)
    old.executescript(database.SCHEMA.replace(",\n    batch INTEGER", ""))
    old.close()
    assert "batch" not in {r[1] for r in sqlite3.connect(p).execute("PRAGMA table_info(votes)")}
    database.connect(p).close()
    assert "batch" in {r[1] for r in sqlite3.connect(p).execute("PRAGMA table_info(votes)")}


def test_vote_validation(world):
    w, con = world
    with pytest.raises(vote_log.NotFound):
        vote_log.vote(con, 10**9, "ann", "y")
    with pytest.raises(UserError):
        vote_log.vote(con, 1, "ann", "maybe")
    for bad in ("", "   ", "x" * 65, "a\x00b", None, 5):
        with pytest.raises(UserError):
            vote_log.vote(con, 1, bad, "y")
    assert con.execute("SELECT COUNT(*) FROM votes").fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM reviewers").fetchone()[0] == 0


@pytest.mark.parametrize("votes,expected", [
    (["y"], "landmark"), (["n", "n", "y"], "not_landmark"), (["y", "n"], "unclear"),
    (["y", "n", "u"], "unclear"), (["u"], "unclear"), (["y", "y", "u"], "landmark"),
    (["y", "y", "n", "n", "u"], "unclear"),
])
def test_majority(votes, expected):
    assert decisions.majority(votes) == expected


def test_progress_resume_and_export(world, tmp_path):
    w, con = world
    ids = [item_id(con, "tower", r) for r in range(1, 7)]
    vote_log.vote(con, ids[0], "ann", "y")
    vote_log.vote(con, ids[1], "ann", "n")
    vote_log.vote(con, ids[3], "ann", "n")
    vote_log.vote(con, ids[0], "bob", "n")
    vote_log.vote(con, ids[0], "cy", "n")
    vote_log.vote(con, ids[1], "bob", "u")
    assert listing.first_open(con, "tower", "ann") == 2
    assert listing.first_open(con, "tower", "dan") == 0       # unknown reviewer: start at the top
    assert listing.first_open(con, "bridge", "ann") == 0
    ov = {x["landmark"]: x for x in listing.landmarks_overview(con, "ann")}
    assert ov["tower"] == {"landmark": "tower", "total": 6, "mine": 3}
    assert ov["bridge"] == {"landmark": "bridge", "total": 6, "mine": 0}
    page = listing.items_page(con, "tower", 1, 2, "bob")
    assert [i["rank"] for i in page["items"]] == [2, 3] and page["total"] == 6
    assert [i["vote"] for i in page["items"]] == ["u", None]
    assert [i["n_votes"] for i in page["items"]] == [2, 0]

    out = tmp_path / "decisions.parquet"
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(out)]) == 0
    t = pq.read_table(out).to_pylist()
    got = {r["photo_id"]: r for r in t}
    assert len(t) == 3                                   # unvoted items are left out
    assert json.loads(got[10000]["votes"]) == {"ann": "y", "bob": "n", "cy": "n"}
    assert (got[10000]["n_votes"], got[10000]["decision"]) == (3, "not_landmark")
    assert got[10001]["decision"] == "unclear"           # n vs u: tie
    assert got[10003]["decision"] == "not_landmark"
    assert all(r["landmark"] == "tower" for r in t)
    # --complete refuses while items are open
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(tmp_path / "x.parquet"),
                 "--complete"]) == 2
    assert not (tmp_path / "x.parquet").exists()


def test_cli_import_is_idempotent(tmp_path, capsys):
    w = make_world(tmp_path)
    assert main(["review", "import", str(w["queue"]), "--db", str(w["db"])]) == 0
    assert json.loads(capsys.readouterr().out)["added"] == 12
    assert main(["review", "import", str(w["queue"]), "--db", str(w["db"])]) == 0
    assert json.loads(capsys.readouterr().out) == {"added": 0, "rows": 12, "kept": 12}
    assert main(["review", "import", str(tmp_path / "nope.parquet"), "--db", str(w["db"])]) == 2


def test_landmark_fingerprint_travels_from_queue_to_decisions(tmp_path, capsys):
    """The score run's fingerprint (SCORES/stats.json, which `mining review import` reads beside
    the queue and gives the import) goes into the database and from there into the decisions;
    a queue scored against another landmark dataset is refused, and so is the app on other landmarks."""
    from mining.datasets.landmarks import load_landmarks
    from mining.stages.review.app import create_app

    w = make_world(tmp_path)
    fp = load_landmarks(w["landmarks"]).fingerprint()
    (w["queue"].parent / "stats.json").write_text(json.dumps({"landmarks_fingerprint": fp}))
    assert main(["review", "import", str(w["queue"]), "--db", str(w["db"])]) == 0
    con = database.connect(w["db"])
    assert queue_import.fingerprint(con) == fp
    vote_log.vote(con, 1, "ann", "y")
    out = tmp_path / "d.parquet"
    decisions.export(con, out)
    assert pq.read_schema(out).metadata[b"landmarks_fingerprint"] == fp.encode()
    other = tmp_path / "other" / "review_queue.parquet"
    other.parent.mkdir()
    pq.write_table(pq.read_table(w["queue"]), other)
    (other.parent / "stats.json").write_text(json.dumps({"landmarks_fingerprint": "0123456789abcdef"}))
    before = con.execute("SELECT COUNT(*) FROM items").fetchone()[0]
    capsys.readouterr()
    assert main(["review", "import", str(other), "--db", str(w["db"])]) == 2
    assert "landmark dataset 0123456789abcdef" in capsys.readouterr().err
    with pytest.raises(UserError, match="landmark dataset"):
        queue_import.import_queue(con, other, scores_fingerprint="0123456789abcdef")
    assert con.execute("SELECT COUNT(*) FROM items").fetchone()[0] == before
    con.execute("UPDATE meta SET value = 'feedfacefeedface'")
    with pytest.raises(UserError, match="landmark dataset"):
        create_app(db_path=w["db"], images=w["images"], landmarks=w["landmarks"])
    con.close()


def test_the_import_takes_the_score_runs_fingerprint_from_its_caller(tmp_path):
    """import_queue reads no file of the score's (a stats.json beside the queue is the caller's
    to read), and a fingerprint in the queue's own metadata comes before the one it is given."""
    w = make_world(tmp_path)
    (w["queue"].parent / "stats.json").write_text(json.dumps({"landmarks_fingerprint": "feedfacefeedface"}))
    con = database.connect(w["db"], create=True)
    queue_import.import_queue(con, w["queue"], scores_fingerprint=None)
    assert queue_import.fingerprint(con) is None
    con.close()
    table = pq.read_table(w["queue"])
    labelled = tmp_path / "labelled" / "review_queue.parquet"
    labelled.parent.mkdir()
    pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}),
                                                  b"landmarks_fingerprint": b"0123456789abcdef"}), labelled)
    con = database.connect(tmp_path / "labelled.sqlite", create=True)
    queue_import.import_queue(con, labelled, scores_fingerprint="feedfacefeedface")
    assert queue_import.fingerprint(con) == "0123456789abcdef"
    con.close()


def _voted_db(tmp_path):
    """A review database with a few votes (WAL checkpointed: every vote in the file)."""
    w = make_world(tmp_path)
    con = database.connect(w["db"], create=True)
    queue_import.import_queue(con, w["queue"], scores_fingerprint=None)
    for item, name, v in ((1, "ann", "y"), (1, "bob", "n"), (2, "ann", "n"), (1, "cy", "y")):
        vote_log.vote(con, item, name, v)
    con.close()
    return w


def _folder_state(folder):
    return sorted((p.name, p.is_dir(), p.read_bytes() if p.is_file() else None) for p in folder.iterdir())


def test_export_reads_a_database_whose_folder_forbids_new_files(tmp_path, capsys):
    """Without root-proof read-only mounts (see the next test): -wal and -shm cannot be created
    (they are taken by folders, which stops root too), so SQLite's mode=ro cannot open the WAL
    database; export falls back to immutable=1 and changes nothing beside the database."""
    w = _voted_db(tmp_path / "w")
    ref = tmp_path / "ref.parquet"
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(ref)]) == 0
    for suffix in ("-wal", "-shm"):
        side = w["db"].parent / (w["db"].name + suffix)
        if side.exists():  # left by the read-only connection above; the -wal is empty
            assert suffix == "-shm" or side.stat().st_size == 0
            side.unlink()
        side.mkdir()
    w["db"].chmod(0o444)
    before = _folder_state(w["db"].parent)
    out = tmp_path / "elsewhere" / "decisions.parquet"
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(out), "--complete"]) == 2  # 8 open
    assert "have no vote yet" in capsys.readouterr().err and not out.exists()
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(out)]) == 0
    assert pq.read_table(out).equals(pq.read_table(ref))
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["votes"] == 4
    assert _folder_state(w["db"].parent) == before
    # A write error names the output path in one line and leaves no partial file.
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    bad = blocker / "decisions.parquet"
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "elsewhere", "ref.parquet", "w"]
    assert database.connect_readonly(w["db"]).execute("SELECT COUNT(*) FROM votes").fetchone()[0] == 4


@contextlib.contextmanager
def _mounted(*args):
    """Run `mount ARGS… TARGET` (needs root and CAP_SYS_ADMIN); skip the test where it is refused."""
    target = args[-1]
    for cmd in (["mount", *args],) + ((["mount", "-o", "remount,bind,ro", str(target)],) if "--bind" in args else ()):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        except FileNotFoundError:
            r = None
        if r is None or r.returncode != 0:
            if cmd[1] == "-o":
                subprocess.run(["umount", str(target)], capture_output=True)
            pytest.skip(f"cannot mount here ({r.stderr.strip() if r else 'no mount command'}); "
                        "test_export_reads_a_database_whose_folder_forbids_new_files covers the fallback")
    try:
        yield Path(target)
    finally:
        subprocess.run(["umount", str(target)], capture_output=True, timeout=30)


def test_export_from_a_read_only_mount_and_to_a_full_disk(tmp_path, capsys):
    """Real read-only and full file systems (root cannot write there either)."""
    w = _voted_db(tmp_path / "w")
    ref = tmp_path / "ref.parquet"
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(ref)]) == 0
    ro = tmp_path / "ro"
    ro.mkdir()
    with _mounted("--bind", str(w["db"].parent), str(ro)):
        with pytest.raises(OSError):
            (ro / "probe").write_text("")
        out = tmp_path / "d.parquet"
        assert main(["review", "export", "--db", str(ro / w["db"].name), "--out", str(out)]) == 0
        assert pq.read_table(out).equals(pq.read_table(ref))
        assert sorted(p.name for p in ro.iterdir()) == sorted(p.name for p in w["db"].parent.iterdir())
        bad = ro / "decisions.parquet"                                  # output onto the read-only mount
        assert main(["review", "export", "--db", str(w["db"]), "--out", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(bad) in err and not bad.exists()

    # Votes still in a -wal (a server was killed, or is running): read with the WAL, never without.
    live = database.connect(w["db"])
    live.execute("PRAGMA wal_autocheckpoint = 0")
    vote_log.vote(live, 3, "dan", "y")
    snap = tmp_path / "snap"
    snap.mkdir()
    for suffix in ("", "-wal"):
        shutil.copyfile(str(w["db"]) + suffix, snap / (w["db"].name + suffix))
    live.close()
    with _mounted("--bind", str(snap), str(ro)):
        out = tmp_path / "d2.parquet"
        assert main(["review", "export", "--db", str(ro / w["db"].name), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "-wal" in err and "copy the folder" in err and not out.exists()
    assert main(["review", "export", "--db", str(snap / w["db"].name), "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["votes"] == 5                # writable: the -wal is read

    full = tmp_path / "full"
    full.mkdir()
    with _mounted("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)):
        fd = os.open(full / "filler", os.O_WRONLY | os.O_CREAT)
        with pytest.raises(OSError, match="No space"):
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        out = full / "decisions.parquet"
        assert main(["review", "export", "--db", str(w["db"]), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(out) in err
        assert sorted(p.name for p in full.iterdir()) == ["filler"]          # no partial output
