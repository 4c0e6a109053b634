"""Review decisions exported: each item's reviewers' latest votes and their majority, written
as decisions.parquet (docs/formats.md), the file select and audit read."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa

from mining.files import answers
from mining.files.atomic import write_parquet
from mining.errors import UserError
from mining.files.names import DECISIONS
from mining.files.answers import SELECTION
from mining.stages.review.queue_import import fingerprint, queue_kind
from mining.stages.review.vote_log import DECISION


def majority(votes: Iterable[str]) -> str:
    """Majority of the reviewers' votes; a tie for the most votes is `unclear`."""
    counts = Counter(votes).most_common()
    if not counts:
        raise ValueError("no votes")
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return "unclear"
    return DECISION[counts[0][0]]


def export_rows(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], int]:
    """Decision rows for every item with at least one vote, and the number of items without."""
    rows, total, _ = _snapshot(con)
    return rows, total - len(rows)


def _snapshot(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], int, answers.Label]:
    """The decision rows, the number of items and what they answer (mining.files.answers), read in one
    snapshot (reviewers may keep voting, and a queue be imported, meanwhile)."""
    con.execute("BEGIN")
    try:
        rows = con.execute(
            """SELECT i.landmark, i.photo_id, i.rank, r.name, c.vote
               FROM current c JOIN items i ON i.id = c.item_id JOIN reviewers r ON r.id = c.reviewer_id
               ORDER BY i.landmark, i.rank, i.id, r.name""").fetchall()
        ids = [int(r[0]) for r in con.execute("SELECT photo_id FROM items")]
        kind, fp = queue_kind(con), fingerprint(con)
        selection = con.execute("SELECT value FROM meta WHERE key = ?", (SELECTION,)).fetchone()
    finally:
        con.execute("COMMIT")
    grouped: dict[tuple[str, int], dict[str, Any]] = {}
    for lm, pid, rank, name, v in rows:
        g = grouped.setdefault((lm, pid), {"landmark": lm, "photo_id": int(pid), "rank": int(rank), "votes": {}})
        g["votes"][name] = v
    out = []
    for g in grouped.values():
        out.append({**g, "votes": json.dumps(g["votes"], sort_keys=True, ensure_ascii=False),
                    "voters": sorted(g["votes"]), "n_votes": len(g["votes"]),
                    "decision": majority(g["votes"].values())})
    label = answers.Label(kind, answers.queue_digest(ids), fp, str(selection[0]) if selection else None)
    return out, len(ids), label


def _check_out(con: sqlite3.Connection, out: Path) -> None:
    """Refuse to write the decisions over a database (this one, its journal files, or another):
    the file would replace every vote."""
    db = Path(con.execute("PRAGMA database_list").fetchone()[2] or "")
    mine = {Path(str(db) + tail).resolve() for tail in ("", "-wal", "-shm", "-journal")} if str(db) else set()
    try:
        head = out.open("rb").read(16) if out.is_file() else b""
    except OSError:
        head = b""
    if out.resolve() in mine or head == b"SQLite format 3\x00":
        raise UserError(f"{out}: is a review database, not where its decisions go (writing there would replace "
                        f"every vote); give --out a new file, e.g. {DECISIONS}")


def export(con: sqlite3.Connection, out: str | Path) -> dict[str, Any]:
    """Write decisions.parquet (docs/formats.md); items nobody voted on are left out. Its schema
    metadata says what it answers (mining.files.answers): `mining select` takes only the review's answers
    (for its landmark dataset), `mining audit estimate` only the answers to its own sample."""
    _check_out(con, Path(out))
    rows, total, label = _snapshot(con)
    schema = pa.schema([("landmark", pa.string()), ("photo_id", pa.int64()), ("rank", pa.int32()),
                        ("votes", pa.string()), ("voters", pa.list_(pa.string())), ("n_votes", pa.int32()),
                        ("decision", pa.string())], metadata=label.metadata())
    table = pa.Table.from_pylist(rows, schema=schema)
    try:
        write_parquet(out, table)  # atomic: a failed write leaves no file under `out`
    except OSError as exc:
        raise UserError(f"{out}: cannot write the decisions ({exc.strerror or exc})") from None
    counts = Counter(r["decision"] for r in rows)
    return {"rows": len(rows), "unvoted": total - len(rows), "votes": sum(r["n_votes"] for r in rows),
            **{d: counts.get(d, 0) for d in DECISION.values()}}
