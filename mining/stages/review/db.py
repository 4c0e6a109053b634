"""The review database: SQLite in WAL mode, so several reviewers can vote at once.

Votes are an append-only log (`votes`): a decision is a row, an undo is a row that names the
vote it retracts. `current` caches each reviewer's effective (latest, not undone) vote per
item, updated in the same transaction, so the UI and progress queries stay fast; the log is
the source of truth and `replay_current` can rebuild the cache from it.
"""

from __future__ import annotations

import json
import sqlite3
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa

from mining.files import answers
from mining.errors import UserError
from mining.files.names import STATS
from mining.stages.review import geometry
from mining.files.tables import read_table

VOTES = ("y", "n", "u")  # shows the landmark / does not / unclear
DECISION = {"y": "landmark", "n": "not_landmark", "u": "unclear"}
MAX_NAME = 64

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
""" + geometry.SCHEMA  # each item's geometric evidence (mining/stages/review/geometry.py)
FINGERPRINT, KIND, SELECTION = answers.FINGERPRINT, answers.KIND, answers.SELECTION  # meta keys (mining.files.answers)


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


class _Tx:
    """`BEGIN IMMEDIATE` … COMMIT/ROLLBACK: take the write lock up front, so no upgrade deadlocks."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con

    def __enter__(self) -> sqlite3.Connection:
        self.con.execute("BEGIN IMMEDIATE")
        return self.con

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self.con.execute("ROLLBACK" if exc_type else "COMMIT")


# ---------------------------------------------------------------- import

QUEUE_REQUIRED = ("landmark", "photo_id", "rank")
QUEUE_OPTIONAL = ("score", "total_score", "best_query")


@dataclass(frozen=True)
class ImportResult:
    rows: int
    added: int
    kept: int  # already imported: left as they were (rank, score, best query, votes)


def import_queue(con: sqlite3.Connection, queue: str | Path) -> ImportResult:
    """Add a queue's new rows. An item already imported is never rewritten (its rank, score and
    best query stay: the order reviewers saw, and for an audit the blind order). A database holds
    one kind of queue (mining.files.answers): the review's queue and an audit sample never share one,
    and an audit database holds one sample (re-importing it adds nothing)."""
    p = Path(queue)
    table = read_table(p, QUEUE_REQUIRED, "review queue", hint="made by `mining score`")
    for c in ("photo_id", "rank"):  # a float id would be truncated into another photo's, text is no id
        kind = table.schema.field(c).type
        if not pa.types.is_integer(kind) or kind == pa.uint64():
            raise UserError(f"{p}: column {c} is {kind}, not integers (int64); is this a queue made by "
                            "`mining score` or `mining audit draw`?")
    cols = {c: table.column(c).to_pylist() for c in QUEUE_REQUIRED + QUEUE_OPTIONAL
            if c in table.column_names}
    n = table.num_rows
    fp = queue_fingerprint(p, table)
    rows = []
    for i in range(n):
        lm, pid, rank = cols["landmark"][i], cols["photo_id"][i], cols["rank"][i]
        if lm is None or pid is None or rank is None:
            raise UserError(f"{p}: row {i} has a null landmark, photo_id or rank")
        rows.append((str(lm), int(pid), int(rank), *(
            cols[c][i] if c in cols else None for c in QUEUE_OPTIONAL)))
    try:
        label = queue_label(table, fp)
    except UserError as exc:
        raise UserError(f"{p}: {exc}") from None
    with _Tx(con):
        known = fingerprint(con)
        if fp and known and fp != known:
            raise UserError(f"{p}: queue is for landmark dataset {fp}, but this database holds {known}")
        _check_kind(con, p, label)
        if fp and not known:
            con.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (FINGERPRINT, fp))
        con.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (KIND, label.kind))
        if label.selection:
            con.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (SELECTION, label.selection))
        before = con.execute("SELECT COUNT(*) FROM items").fetchone()[0]
        con.executemany(
            """INSERT INTO items (landmark, photo_id, rank, score, total_score, best_query)
               VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (landmark, photo_id) DO NOTHING""", rows)
        added = con.execute("SELECT COUNT(*) FROM items").fetchone()[0] - before
        geometry.import_evidence(con, table)
    return ImportResult(rows=n, added=added, kept=n - added)


def queue_label(table: Any, fp: str | None) -> answers.Label:
    """What a queue file asks about: its kind (`queue_kind` metadata; a queue without it is the
    score's review queue), the digest of its photos, its landmark dataset, and for an audit sample
    the selection it was drawn from."""
    meta = table.schema.metadata or {}
    kind = meta.get(KIND.encode(), b"review").decode(errors="replace")
    if kind not in answers.KINDS:
        raise UserError(f"queue of unknown kind {kind!r} (expected {' or '.join(answers.KINDS)})")
    selection = meta.get(SELECTION.encode())
    return answers.Label(kind, answers.queue_digest(table.column("photo_id").to_numpy(zero_copy_only=False)), fp,
                         selection.decode() if selection else None)


def database_label(con: sqlite3.Connection) -> answers.Label | None:
    """What the database's items ask about (None while it holds none): its kind, the digest of its
    photos, its landmark dataset and (audit) selection."""
    ids = [int(r[0]) for r in con.execute("SELECT photo_id FROM items")]
    if not ids:
        return None
    row = con.execute("SELECT value FROM meta WHERE key = ?", (SELECTION,)).fetchone()
    return answers.Label(queue_kind(con), answers.queue_digest(ids), fingerprint(con), str(row[0]) if row else None)


def _check_kind(con: sqlite3.Connection, queue: Path, label: answers.Label) -> None:
    """Refuse a queue of the other kind, or another audit sample, for this database."""
    here = database_label(con)
    if here is None:
        return
    name = con.execute("PRAGMA database_list").fetchone()[2] or "this database"
    if here.kind != label.kind:
        raise UserError(f"{queue}: {label.words()}, but {name} holds {here.words()}; a database answers one kind of "
                        f"queue: import it into {answers.WHERE[label.kind]}")
    if label.kind == "audit" and label.digest != here.digest:
        other = ("another selection's sample" if label.selection and here.selection and label.selection != here.selection
                 else "another audit sample")
        raise UserError(f"{queue}: {label.words()} is {other}; {name} holds {here.words()}: an audit database "
                        "answers one sample (import a new sample into a new database)")


def queue_fingerprint(queue: Path, table: Any) -> str | None:
    """The landmark dataset a queue was scored against: its Parquet metadata, else SCORES/stats.json."""
    meta = table.schema.metadata or {}
    if meta.get(FINGERPRINT.encode()):
        return meta[FINGERPRINT.encode()].decode()
    stats = queue.parent / STATS
    if stats.is_file():
        try:
            value = json.loads(stats.read_text()).get(FINGERPRINT)
        except (ValueError, AttributeError):
            return None
        return str(value) if value else None
    return None


def queue_kind(con: sqlite3.Connection) -> str:
    """`audit` for an audit queue (mining/stages/audit/stage.py), `review` for the score's review queue."""
    row = con.execute("SELECT value FROM meta WHERE key = ?", (KIND,)).fetchone()
    return str(row[0]) if row else "review"


def fingerprint(con: sqlite3.Connection) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = ?", (FINGERPRINT,)).fetchone()
    return str(row[0]) if row else None


# ---------------------------------------------------------------- reviewers and votes


def clean_name(name: Any) -> str:
    """Reviewer names are short printable text; anything else is refused."""
    if not isinstance(name, str):
        raise UserError("reviewer name must be text")
    name = " ".join(name.split())
    if not name or len(name) > MAX_NAME or not name.isprintable():
        raise UserError(f"reviewer name must be 1–{MAX_NAME} printable characters")
    return name


def reviewer_id(con: sqlite3.Connection, name: str, *, create: bool) -> int | None:
    name = clean_name(name)
    row = con.execute("SELECT id FROM reviewers WHERE name = ?", (name,)).fetchone()
    if row:
        return int(row[0])
    if not create:
        return None
    con.execute("INSERT OR IGNORE INTO reviewers (name, created) VALUES (?, ?)", (name, time.time()))
    return int(con.execute("SELECT id FROM reviewers WHERE name = ?", (name,)).fetchone()[0])


class NotFound(LookupError):
    """An item id that is not in the database (the API answers 404)."""


def vote(con: sqlite3.Connection, item_id: int, reviewer: str, value: str) -> dict[str, Any]:
    """Append a vote; it becomes the reviewer's effective vote on the item."""
    if value not in VOTES:
        raise UserError(f"vote must be one of {', '.join(VOTES)}")
    name = clean_name(reviewer)
    with _Tx(con):
        if con.execute("SELECT 1 FROM items WHERE id = ?", (item_id,)).fetchone() is None:
            raise NotFound(item_id)
        rid = reviewer_id(con, name, create=True)
        cur = con.execute(
            "INSERT INTO votes (item_id, reviewer_id, vote, created) VALUES (?, ?, ?, ?)",
            (item_id, rid, value, time.time()))
        con.execute(
            "INSERT OR REPLACE INTO current (item_id, reviewer_id, vote_id, vote) VALUES (?, ?, ?, ?)",
            (item_id, rid, cur.lastrowid, value))
    return {"item_id": item_id, "vote": value}


def bulk_vote(con: sqlite3.Connection, item_ids: Iterable[int], reviewer: str, value: str) -> dict[str, Any]:
    """One vote on each of these items that the reviewer has not decided yet (their own votes are
    never overwritten), as one batch: one `undo` retracts the whole batch."""
    if value not in VOTES:
        raise UserError(f"vote must be one of {', '.join(VOTES)}")
    name = clean_name(reviewer)
    ids = list(dict.fromkeys(int(i) for i in item_ids))
    with _Tx(con):
        rid = reviewer_id(con, name, create=True)
        known = {int(r[0]) for r in con.execute(
            f"SELECT id FROM items WHERE id IN ({','.join('?' * len(ids))})", ids)} if ids else set()
        if len(known) != len(ids):
            raise NotFound(next(i for i in ids if i not in known))
        decided = {int(r[0]) for r in con.execute(
            f"SELECT item_id FROM current WHERE reviewer_id = ? AND item_id IN ({','.join('?' * len(ids))})",
            [rid, *ids])} if ids else set()
        todo = [i for i in ids if i not in decided]
        batch = None
        now = time.time()
        for item_id in todo:
            cur = con.execute(
                "INSERT INTO votes (item_id, reviewer_id, vote, created, batch) VALUES (?, ?, ?, ?, ?)",
                (item_id, rid, value, now, batch))
            if batch is None:  # the batch is named by its first vote
                batch = int(cur.lastrowid)
                con.execute("UPDATE votes SET batch = ? WHERE id = ?", (batch, batch))
            con.execute(
                "INSERT OR REPLACE INTO current (item_id, reviewer_id, vote_id, vote) VALUES (?, ?, ?, ?)",
                (item_id, rid, cur.lastrowid, value))
    return {"vote": value, "voted": len(todo), "skipped": len(ids) - len(todo), "batch": batch}


def _effective(con: sqlite3.Connection, item_id: int, rid: int) -> tuple[int, str] | None:
    """Latest vote of a reviewer on an item that no undo row retracts."""
    row = con.execute(
        """SELECT v.id, v.vote FROM votes v
           WHERE v.item_id = ? AND v.reviewer_id = ? AND v.vote != 'undo'
             AND NOT EXISTS (SELECT 1 FROM votes u WHERE u.undoes = v.id)
           ORDER BY v.id DESC LIMIT 1""", (item_id, rid)).fetchone()
    return (int(row[0]), str(row[1])) if row else None


def undo(con: sqlite3.Connection, reviewer: str) -> dict[str, Any] | None:
    """Retract the reviewer's most recent standing vote (a bulk decision: all of its standing
    votes); the vote before each (if any) applies again. Returns the first item retracted."""
    name = clean_name(reviewer)
    standing = """SELECT v.id, v.item_id, v.batch FROM votes v
                   WHERE v.reviewer_id = ? AND v.vote != 'undo'
                     AND NOT EXISTS (SELECT 1 FROM votes u WHERE u.undoes = v.id)"""
    with _Tx(con):
        rid = reviewer_id(con, name, create=False)
        if rid is None:
            return None
        row = con.execute(standing + " ORDER BY v.id DESC LIMIT 1", (rid,)).fetchone()
        if row is None:
            return None
        retract = [(int(row[0]), int(row[1]))]
        if row[2] is not None:
            retract = [(int(r[0]), int(r[1])) for r in
                       con.execute(standing + " AND v.batch = ? ORDER BY v.id", (rid, row[2]))]
        now = time.time()
        for vote_id, item_id in retract:
            con.execute(
                "INSERT INTO votes (item_id, reviewer_id, vote, undoes, created) VALUES (?, ?, 'undo', ?, ?)",
                (item_id, rid, vote_id, now))
            eff = _effective(con, item_id, rid)
            if eff is None:
                con.execute("DELETE FROM current WHERE item_id = ? AND reviewer_id = ?", (item_id, rid))
            else:
                con.execute(
                    "INSERT OR REPLACE INTO current (item_id, reviewer_id, vote_id, vote) VALUES (?, ?, ?, ?)",
                    (item_id, rid, eff[0], eff[1]))
    first = retract[0][1]
    eff = _effective(con, first, rid)
    return {"item_id": first, "vote": eff[1] if eff else None, "count": len(retract)}


def replay_current(con: sqlite3.Connection) -> dict[tuple[int, int], str]:
    """Effective votes recomputed from the log alone (to check or rebuild the `current` cache)."""
    state: dict[tuple[int, int], list[tuple[int, str]]] = {}
    undone: set[int] = set()
    rows = con.execute("SELECT id, item_id, reviewer_id, vote, undoes FROM votes ORDER BY id").fetchall()
    for _vid, _item, _rid, v, undoes in rows:
        if v == "undo":
            undone.add(int(undoes))
    for vid, item, rid, v, _undoes in rows:
        if v != "undo" and vid not in undone:
            state.setdefault((item, rid), []).append((vid, v))
    return {k: max(v)[1] for k, v in state.items()}


def current_votes(con: sqlite3.Connection) -> dict[tuple[int, int], str]:
    return {(int(i), int(r)): str(v) for i, r, v in
            con.execute("SELECT item_id, reviewer_id, vote FROM current")}


# ---------------------------------------------------------------- queries for the UI


def landmarks_overview(con: sqlite3.Connection, reviewer: str | None) -> list[dict[str, Any]]:
    """Per landmark, in queue order: queued items and how many this reviewer has decided."""
    rid = reviewer_id(con, reviewer, create=False) if reviewer else None
    totals = con.execute(
        "SELECT landmark, COUNT(*), MIN(id) FROM items GROUP BY landmark ORDER BY MIN(id)").fetchall()
    mine = dict(con.execute(
        """SELECT i.landmark, COUNT(*) FROM current c JOIN items i ON i.id = c.item_id
           WHERE c.reviewer_id = ? GROUP BY i.landmark""", (rid if rid is not None else -1,)).fetchall())
    return [{"landmark": lm, "total": int(t), "mine": int(mine.get(lm, 0))} for lm, t, _ in totals]


# The review app's filters: which of a landmark's items a page lists (`?` is this reviewer's id).
SHOW = {
    "all": "1",
    "undecided": "NOT EXISTS (SELECT 1 FROM current m WHERE m.item_id = i.id AND m.reviewer_id = ?)",
    "mine": "EXISTS (SELECT 1 FROM current m WHERE m.item_id = i.id AND m.reviewer_id = ?)",
    "disputed": "(SELECT COUNT(DISTINCT d.vote) FROM current d WHERE d.item_id = i.id) > 1",
}


SORT = {"rank": "i.rank, i.id", "inliers": "COALESCE(e.inliers, -1) DESC, i.rank, i.id"}


def items_page(con: sqlite3.Connection, landmark: str, offset: int, limit: int, reviewer: str | None,
               show: str = "all", after: int | None = None, sort: str = "rank") -> dict[str, Any]:
    """One page of a landmark's queue in rank order, with this reviewer's votes: every item, or
    those `show` keeps (undecided by this reviewer, decided by this reviewer, or disputed: the
    reviewers' standing votes differ). `after` (an item id) starts the page just after that
    item, whatever the filter kept before it (a vote moves items in and out of a filter)."""
    rid = reviewer_id(con, reviewer, create=False) if reviewer else None
    rid = rid if rid is not None else -1
    cond = SHOW[show]
    arg = (rid,) if "?" in cond else ()
    total = con.execute(f"SELECT COUNT(*) FROM items i WHERE i.landmark = ? AND {cond}", (landmark, *arg)).fetchone()[0]
    if after is not None and sort == "rank":
        offset = con.execute(
            f"""SELECT COUNT(*) FROM items i, items a WHERE a.id = ? AND i.landmark = ? AND {cond}
                AND (i.rank < a.rank OR (i.rank = a.rank AND i.id <= a.id))""", (after, landmark, *arg)).fetchone()[0]
    elif after is not None:
        offset = geometry.position_after(con, landmark, cond, arg, after)
    rows = con.execute(
        f"""SELECT i.id, i.photo_id, i.rank, i.score, i.best_query, c.vote,
                  (SELECT COUNT(*) FROM current a WHERE a.item_id = i.id), e.inliers, e.image
           FROM items i LEFT JOIN current c ON c.item_id = i.id AND c.reviewer_id = ?
           LEFT JOIN evidence e ON e.item_id = i.id
           WHERE i.landmark = ? AND {cond} ORDER BY {SORT[sort]} LIMIT ? OFFSET ?""",
        (rid, landmark, *arg, limit, offset)).fetchall()
    items = [{"id": r[0], "photo_id": str(r[1]), "rank": r[2], "score": r[3], "best_query": r[4],
              "vote": r[5], "n_votes": r[6], "inliers": r[7], "inlier_image": r[8]} for r in rows]
    return {"landmark": landmark, "total": int(total), "offset": int(offset), "items": items, "show": show,
            "sort": sort, "min_inliers": geometry.min_inliers(con)}


def first_open(con: sqlite3.Connection, landmark: str, reviewer: str | None) -> int:
    """Position (0-based, rank order) of the reviewer's first undecided item; `total` when done."""
    rid = reviewer_id(con, reviewer, create=False) if reviewer else None
    row = con.execute(
        """SELECT pos FROM (
             SELECT i.id, ROW_NUMBER() OVER (ORDER BY i.rank, i.id) - 1 AS pos
             FROM items i WHERE i.landmark = ?) p
           WHERE NOT EXISTS (SELECT 1 FROM current c WHERE c.item_id = p.id AND c.reviewer_id = ?)
           ORDER BY pos LIMIT 1""", (landmark, rid if rid is not None else -1)).fetchone()
    if row is not None:
        return int(row[0])
    return int(con.execute("SELECT COUNT(*) FROM items WHERE landmark = ?", (landmark,)).fetchone()[0])


def position_of(con: sqlite3.Connection, item_id: int) -> tuple[str, int] | None:
    """(landmark, 0-based position in rank order) of an item, so undo can jump to it."""
    row = con.execute("SELECT landmark, rank, id FROM items WHERE id = ?", (item_id,)).fetchone()
    if row is None:
        return None
    pos = con.execute(
        "SELECT COUNT(*) FROM items WHERE landmark = ? AND (rank < ? OR (rank = ? AND id < ?))",
        (row[0], row[1], row[1], row[2])).fetchone()[0]
    return str(row[0]), int(pos)


def photo_of(con: sqlite3.Connection, item_id: int) -> int | None:
    row = con.execute("SELECT photo_id FROM items WHERE id = ?", (item_id,)).fetchone()
    return int(row[0]) if row else None
