"""Reading a Parquet or JSON file that another stage (or a person) produced.

One place for the checks every consumer needs, so a missing, unreadable or incomplete file
is always refused the same way: one line naming the file and what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mining.files.answers import require
from mining.errors import UserError

DECISIONS = ("landmark", "not_landmark", "unclear")  # a reviewer's answers (docs/formats.md)


def read_file(path: str | Path, columns: Sequence[str] | None = None) -> pa.Table:
    """One Parquet file as a table (its columns, or these): `pq.read_table` without its
    dataset layer, whose import (pyarrow.dataset, pandas) costs ~1 CPU s per process."""
    with pq.ParquetFile(path) as f:
        return f.read(columns=list(columns) if columns is not None else None)


def read_table(path: str | Path, required: Sequence[str], what: str, hint: str = "") -> pa.Table:
    """The table at `path`, which must exist, be readable Parquet and hold `required` columns."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{what} {p} not found" + (f" ({hint})" if hint else ""))
    try:
        table = pq.read_table(p)
    except Exception as exc:  # noqa: BLE001 - any reader failure is the user's file
        raise UserError(f"{p}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise UserError(f"{p}: {what} lacks column(s) {', '.join(missing)}")
    return table


def read_json(path: str | Path, what: str, hint: str = "") -> Any:
    """The JSON document at `path`, which must exist and parse."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{what} {p} not found" + (f" ({hint})" if hint else ""))
    try:
        return json.loads(p.read_text())
    except ValueError as exc:
        raise UserError(f"{p}: not JSON ({exc})") from None


def load_decisions(path: Path, kind: str | None = None, digest: str | None = None) -> tuple[Any, str | None]:
    """decisions.parquet (docs/formats.md) and the fingerprint it carries, if any; read by
    select, audit and evaluate (choose_n too), written by `mining review export`. With `kind`
    (and `digest`), only the answers to that kind of queue (to that very queue) are taken
    (mining.files.answers.require)."""
    table = read_table(path, ("landmark", "photo_id", "decision"), "decisions file",
                       hint="export it with `mining review export`")
    meta = table.schema.metadata or {}
    if kind is not None:
        require(Path(path), meta, kind, digest)
    fp = meta.get(b"landmarks_fingerprint")
    if not pa.types.is_integer(table.schema.field("photo_id").type):
        raise UserError(f"{path}: photo_id is {table.schema.field('photo_id').type}, not integers; export the "
                        "decisions again with `mining review export`")
    df = table.select(["landmark", "photo_id", "decision"]).to_pandas()
    bad = sorted(set(df.decision.dropna()) - set(DECISIONS)) + (["<null>"] if df.decision.isna().any() else [])
    if bad:
        raise UserError(f"{path}: unknown decision value(s) {bad} (expected {', '.join(DECISIONS)})")
    if df.photo_id.isna().any():
        raise UserError(f"{path}: rows without photo_id")
    df["photo_id"] = df.photo_id.astype(np.int64)
    return df, fp.decode() if fp else None


def load_shortlist(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """A cascade's shortlist.parquet (`mining cascade shortlist`): its photo ids (int64,
    ascending, each once) and which of them are the random check sample; read by describe and
    `mining cascade check`."""
    table = read_table(path, ("photo_id", "check"), "shortlist", hint="make it with `mining cascade shortlist`")
    if not pa.types.is_integer(table.schema.field("photo_id").type) or table.column("photo_id").null_count:
        raise UserError(f"{path}: photo_id must be integers, none missing")
    ids = table.column("photo_id").to_numpy().astype(np.int64)
    if ids.size and not (np.diff(ids) > 0).all():
        raise UserError(f"{path}: photo ids must be ascending, each once (make it again with `mining cascade shortlist`)")
    return ids, table.column("check").to_numpy(zero_copy_only=False).astype(bool)

