"""The review database (`mining.stages.review.database`): an older database gains what later versions added."""

from mining.stages.review import database


def test_a_database_from_before_bulk_votes_gains_the_batch_column(tmp_path):
    import sqlite3

    p = tmp_path / "old.sqlite"
    old = sqlite3.connect(p)
    old.executescript(database.SCHEMA.replace(",\n    batch INTEGER", ""))
    old.close()
    assert "batch" not in {r[1] for r in sqlite3.connect(p).execute("PRAGMA table_info(votes)")}
    database.connect(p).close()
    assert "batch" in {r[1] for r in sqlite3.connect(p).execute("PRAGMA table_info(votes)")}
