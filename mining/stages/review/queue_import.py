"""A queue into the review database: its new rows added, none rewritten, and what the database
answers (mining.files.answers): one kind of queue, for an audit one sample, for one landmark
dataset. The landmark dataset is the queue's Parquet metadata's or, for the score's review queue
that does not carry it, the score run's, which the caller reads (`mining review import` from the
queue's folder, SCORES/stats.json) and passes in: this module reads no stage's files but the queue.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from mining.errors import UserError
from mining.files import answers
from mining.files.answers import FINGERPRINT, KIND, SELECTION  # the meta keys
from mining.files.tables import read_table
from mining.stages.review import inliers
from mining.stages.review.database import Transaction

QUEUE_REQUIRED = ("landmark", "photo_id", "rank")
QUEUE_OPTIONAL = ("score", "total_score", "best_query")


@dataclass(frozen=True)
class ImportResult:
    rows: int
    added: int
    kept: int  # already imported: left as they were (rank, score, best query, votes)


def import_queue(con: sqlite3.Connection, queue: str | Path, *, scores_fingerprint: str | None) -> ImportResult:
    """Add a queue's new rows. An item already imported is never rewritten (its rank, score and
    best query stay: the order reviewers saw, and for an audit the blind order). A database holds
    one kind of queue (mining.files.answers): the review's queue and an audit sample never share one,
    and an audit database holds one sample (re-importing it adds nothing). `scores_fingerprint`:
    the landmark dataset the score run names (SCORES/stats.json, read by the caller), None when
    there is none; the queue's own metadata, when it names one, comes first."""
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
    fp = queue_fingerprint(table, scores_fingerprint)
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
    with Transaction(con):
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
        inliers.import_evidence(con, table)
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


def queue_fingerprint(table: Any, scores_fingerprint: str | None) -> str | None:
    """The landmark dataset a queue was scored against: its Parquet metadata, else the score run's."""
    meta = table.schema.metadata or {}
    if meta.get(FINGERPRINT.encode()):
        return meta[FINGERPRINT.encode()].decode()
    return scores_fingerprint or None


def queue_kind(con: sqlite3.Connection) -> str:
    """`audit` for an audit queue (mining/stages/audit/stage.py), `review` for the score's review queue."""
    row = con.execute("SELECT value FROM meta WHERE key = ?", (KIND,)).fetchone()
    return str(row[0]) if row else "review"


def fingerprint(con: sqlite3.Connection) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = ?", (FINGERPRINT,)).fetchone()
    return str(row[0]) if row else None
