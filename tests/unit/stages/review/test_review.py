"""`mining review` end to end through its CLI: import, progress and resume, export (also from a
read-only database and to a full disk), the landmark fingerprint from the queue to the decisions."""

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from review_world import item_id, make_world

from mining.cli import main
from mining.errors import UserError
from mining.stages.review import database, decisions, listing, queue_import, vote_log


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
