"""What every router of the review app uses: the app's settings, one database connection per
worker thread, and the reviewer a request speaks for."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request

from mining.errors import UserError
from mining.stages.review import database
from mining.stages.review.access import Access

STATIC = Path(__file__).parent.parent / "static"  # the page, its script and style
MAX_ID = 2**62  # SQLite integers are 64-bit; larger ids are refused as 422, not a 500
MAX_PAGE = 500


@dataclass(frozen=True)
class Settings:
    db_path: Path
    images: Path
    paths: dict[int, str]  # photo id -> image path under `images` (its index.parquet)
    landmarks: Any  # LandmarkDataset, mining.datasets.benchmarks.Combined (several benchmarks) or None
    thumbs: Path
    access: Access
    connections: threading.local = field(default_factory=threading.local)  # one per worker thread


def settings_of(request: Request) -> Settings:
    """The settings of the app serving `request` (`create_app` keeps them in app.state)."""
    return request.app.state.settings


def thread_con(s: Settings) -> sqlite3.Connection:
    """One connection per worker thread, kept open: closing the last connection to a WAL
    database checkpoints it (an fsync), which made every request ~30 ms slower."""
    con = getattr(s.connections, "con", None)
    if con is None:
        con = s.connections.con = database.connect(s.db_path)
    return con


def conn(request: Request) -> sqlite3.Connection:
    """The route's database connection (a dependency: `Depends(conn)`)."""
    return thread_con(settings_of(request))


def user_error(exc: UserError) -> HTTPException:
    return HTTPException(status_code=400, detail=str(exc))


def who(request: Request, claimed: Any) -> Any:
    """The reviewer a request speaks for: its token's, whatever it claims (another name is
    refused, 403); without tokens, the name the client sends."""
    bound = request.state.reviewer
    if bound is None:
        return claimed
    name = " ".join(claimed.split()) if isinstance(claimed, str) else claimed
    if name is not None and name != bound:
        raise HTTPException(403, f"this link belongs to reviewer {bound!r}; it cannot act as {name!r}")
    return bound
