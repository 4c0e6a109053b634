"""Importing a review queue (`mining.stages.review.queue_import`): idempotent, keeping the votes, refusing
bad queues, with the score run's landmark fingerprint from its caller."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from review_world import item_id, make_world

from mining.errors import UserError
from mining.stages.review import database, queue_import, vote_log


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
