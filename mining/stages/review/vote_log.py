"""The vote log: a decision is a row of `votes`, an undo is a row that names the vote it
retracts, and a bulk decision is one batch of rows that one undo retracts. `current` caches each
reviewer's effective (latest, not undone) vote per item, updated in the same transaction, so the
app and the progress queries stay fast; the log is the source of truth and `replay_current`
rebuilds the cache from it. Reviewers are named here too (`clean_name`, `reviewer_id`).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Iterable

from mining.errors import UserError
from mining.stages.review.database import Transaction

VOTES = ("y", "n", "u")  # shows the landmark / does not / unclear
DECISION = {"y": "landmark", "n": "not_landmark", "u": "unclear"}
MAX_NAME = 64


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
    with Transaction(con):
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
    with Transaction(con):
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
    with Transaction(con):
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

