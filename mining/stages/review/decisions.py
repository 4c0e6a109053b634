"""Review decisions exported: each item's reviewers' latest votes and their majority, written
as decisions.parquet (docs/formats.md), the file select and audit read."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa

from mining.atomic import write_parquet
from mining.errors import UserError
from mining.stages.review.db import DECISION, FINGERPRINT, fingerprint


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
    con.execute("BEGIN")  # one read snapshot, even while reviewers keep voting
    try:
        rows = con.execute(
            """SELECT i.landmark, i.photo_id, i.rank, r.name, c.vote
               FROM current c JOIN items i ON i.id = c.item_id JOIN reviewers r ON r.id = c.reviewer_id
               ORDER BY i.landmark, i.rank, i.id, r.name""").fetchall()
        total = con.execute("SELECT COUNT(*) FROM items").fetchone()[0]
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
    return out, int(total) - len(out)


def export(con: sqlite3.Connection, out: str | Path) -> dict[str, Any]:
    """Write decisions.parquet (docs/formats.md); items nobody voted on are left out."""
    rows, unvoted = export_rows(con)
    schema = pa.schema([("landmark", pa.string()), ("photo_id", pa.int64()), ("rank", pa.int32()),
                        ("votes", pa.string()), ("voters", pa.list_(pa.string())), ("n_votes", pa.int32()),
                        ("decision", pa.string())])
    fp = fingerprint(con)
    if fp:  # `mining select` refuses decisions made for another landmark dataset
        schema = schema.with_metadata({FINGERPRINT: fp})
    table = pa.Table.from_pylist(rows, schema=schema)
    try:
        write_parquet(out, table)  # atomic: a failed write leaves no file under `out`
    except OSError as exc:
        raise UserError(f"{out}: cannot write the decisions ({exc.strerror or exc})") from None
    counts = Counter(r["decision"] for r in rows)
    return {"rows": len(rows), "unvoted": unvoted, "votes": sum(r["n_votes"] for r in rows),
            **{d: counts.get(d, 0) for d in DECISION.values()}}
