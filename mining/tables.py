"""Reading a Parquet file that another stage (or a person) produced.

One place for the checks every consumer needs, so a missing, unreadable or incomplete file
is always refused the same way: one line naming the file and what is wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pyarrow as pa

from mining.errors import UserError


def read_table(path: str | Path, required: Sequence[str], what: str, hint: str = "") -> pa.Table:
    """The table at `path`, which must exist, be readable Parquet and hold `required` columns."""
    import pyarrow.parquet as pq

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
