"""What the review app lists, read from the database: the landmarks with this reviewer's
progress, a page of a landmark's items under a filter and a sort, where a reviewer resumes, where
an undone item stands, and an item's photo.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from mining.stages.review import inliers
from mining.stages.review.vote_log import reviewer_id


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
        offset = inliers.position_after(con, landmark, cond, arg, after)
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
            "sort": sort, "min_inliers": inliers.min_inliers(con)}


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
