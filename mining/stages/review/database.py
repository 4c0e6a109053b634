"""The review database: SQLite in WAL mode, so several reviewers can vote at once. Its tables
(`SCHEMA`: the queue's items, reviewers, the vote log and its `current` cache, meta, and each
item's inlier evidence from `inliers.py`), its connections (read-write, read-only for the export)
and its write transactions. What goes in: `queue_import.py` (items), `vote_log.py` (votes);
what the app reads: `listing.py`.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

from mining.errors import UserError
from mining.stages.review import inliers

SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,
    landmark TEXT NOT NULL,
    photo_id INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    score REAL,
    total_score REAL,
    best_query TEXT,
    UNIQUE (landmark, photo_id)
);
CREATE INDEX IF NOT EXISTS items_by_rank ON items (landmark, rank, id);
CREATE TABLE IF NOT EXISTS reviewers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS votes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id INTEGER NOT NULL REFERENCES items (id),
    reviewer_id INTEGER NOT NULL REFERENCES reviewers (id),
    vote TEXT NOT NULL CHECK (vote IN ('y', 'n', 'u', 'undo')),
    undoes INTEGER REFERENCES votes (id),
    created REAL NOT NULL,
    batch INTEGER
);
CREATE INDEX IF NOT EXISTS votes_by_reviewer ON votes (reviewer_id, id);
CREATE INDEX IF NOT EXISTS votes_by_item ON votes (item_id, reviewer_id, id);
CREATE UNIQUE INDEX IF NOT EXISTS votes_undoes ON votes (undoes);
CREATE TABLE IF NOT EXISTS current (
    item_id INTEGER NOT NULL REFERENCES items (id),
    reviewer_id INTEGER NOT NULL REFERENCES reviewers (id),
    vote_id INTEGER NOT NULL REFERENCES votes (id),
    vote TEXT NOT NULL,
    PRIMARY KEY (item_id, reviewer_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS current_by_reviewer ON current (reviewer_id, item_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
""" + inliers.SCHEMA  # each item's geometric evidence (mining/stages/review/inliers.py)


def connect(path: str | Path, *, create: bool = False) -> sqlite3.Connection:
    """One connection per thread/request; WAL + busy_timeout so concurrent writers wait, not fail."""
    p = Path(path)
    if not create and not p.is_file():
        raise UserError(f"{p}: review database not found (run `mining review import` first)")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(p, timeout=30, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise UserError(f"{p}: cannot open the review database ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        con.execute("PRAGMA busy_timeout = 30000")
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = NORMAL")
        con.execute("PRAGMA foreign_keys = ON")
        con.executescript(SCHEMA)  # IF NOT EXISTS: also upgrades a database from an older version
        if "batch" not in {r[1] for r in con.execute("PRAGMA table_info(votes)")}:  # before bulk votes
            con.execute("ALTER TABLE votes ADD COLUMN batch INTEGER")
    except sqlite3.Error as exc:  # a read-only file or folder, a full disk, not a database
        con.close()
        raise UserError(f"{p}: cannot open the review database for writing ({exc}); "
                        "`review export` reads it without writing") from None
    return con


def connect_readonly(path: str | Path) -> sqlite3.Connection:
    """Open to read only (export): never creates, migrates or writes anything beside the file.

    `mode=ro` reads a WAL database with its -wal. In a read-only folder without a -wal, SQLite
    cannot make the -shm it needs, so the file is opened `immutable=1` (right then: with no
    -wal, every vote is in the file, and nobody can write in that folder). A -wal that holds
    votes but cannot be read is refused rather than silently left out."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: review database not found (run `mining review import` first)")
    uri = "file:" + urllib.parse.quote(str(p.resolve()))
    try:
        return _probe(sqlite3.connect(uri + "?mode=ro", uri=True, timeout=30, isolation_level=None), p)
    except sqlite3.Error as exc:
        first = exc
    wal = p.with_name(p.name + "-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        raise UserError(f"{p}: cannot open read-only ({first}), and {wal.name} beside it holds votes not yet "
                        "in the database file; copy the folder (with its -wal) somewhere writable and export there")
    try:
        return _probe(sqlite3.connect(uri + "?immutable=1", uri=True, isolation_level=None), p)
    except sqlite3.Error as exc:
        raise UserError(f"{p}: cannot read the review database ({exc})") from None


def _probe(con: sqlite3.Connection, p: Path) -> sqlite3.Connection:
    """`con` once it has read the schema; refuses a database without the review tables."""
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        con.close()
        raise
    missing = sorted({"items", "reviewers", "votes", "current", "meta"} - tables)
    if missing:
        con.close()
        raise UserError(f"{p}: not a review database (no table {', '.join(missing)})")
    return con


class Transaction:
    """`BEGIN IMMEDIATE` … COMMIT/ROLLBACK: take the write lock up front, so no upgrade deadlocks."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con

    def __enter__(self) -> sqlite3.Connection:
        self.con.execute("BEGIN IMMEDIATE")
        return self.con

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self.con.execute("ROLLBACK" if exc_type else "COMMIT")
