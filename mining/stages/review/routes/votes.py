"""Votes: one item, several items at once (the rest of a page), and undo; every write goes to
SQLite at once, off the event loop."""

from __future__ import annotations

import json
import logging
import sqlite3
from typing import Any, Callable

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from mining.errors import UserError
from mining.stages.review import listing, vote_log
from mining.stages.review.routes.shared import MAX_ID, MAX_PAGE, settings_of, thread_con, who

MAX_BODY = 4096  # a vote is ~60 bytes; anything much larger is refused before parsing

router = APIRouter()


@router.post("/api/votes")
async def api_vote(request: Request) -> dict[str, Any]:
    s = settings_of(request)
    body = await _json_body(request)
    item, value, reviewer = body.get("item_id"), body.get("vote"), who(request, body.get("reviewer"))
    if not isinstance(item, int) or isinstance(item, bool) or item < 0 or item > MAX_ID:
        raise HTTPException(422, "item_id must be a non-negative integer")
    _check_vote(value)
    return await _write(lambda: vote_log.vote(thread_con(s), item, reviewer, value))


@router.post("/api/votes/bulk")
async def api_bulk_vote(request: Request) -> dict[str, Any]:
    """One decision on several items (the rest of a page), skipping those this reviewer has
    decided already; one undo retracts it."""
    s = settings_of(request)
    body = await _json_body(request)
    items, value, reviewer = body.get("item_ids"), body.get("vote"), who(request, body.get("reviewer"))
    if (not isinstance(items, list) or not 1 <= len(items) <= MAX_PAGE
            or any(not isinstance(i, int) or isinstance(i, bool) or not 0 <= i <= MAX_ID for i in items)):
        raise HTTPException(422, f"item_ids must be a list of 1 to {MAX_PAGE} non-negative integers")
    _check_vote(value)
    return await _write(lambda: vote_log.bulk_vote(thread_con(s), items, reviewer, value))


@router.post("/api/undo")
async def api_undo(request: Request) -> dict[str, Any]:
    s = settings_of(request)
    body = await _json_body(request)
    reviewer = who(request, body.get("reviewer"))

    def work() -> dict[str, Any]:
        con = thread_con(s)
        done = vote_log.undo(con, reviewer)
        if done is None:
            return {"undone": None}
        lm, pos = listing.position_of(con, done["item_id"]) or ("", 0)
        return {"undone": {**done, "landmark": lm, "position": pos}}
    return await _write(work)


def _check_vote(value: Any) -> None:
    if value not in vote_log.VOTES:
        raise HTTPException(422, f"vote must be one of {', '.join(vote_log.VOTES)}")


async def _write(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a database write off the event loop; its errors as HTTP answers."""
    try:
        return await run_in_threadpool(work)
    except vote_log.NotFound:
        raise HTTPException(404, "unknown item") from None
    except UserError as exc:
        raise HTTPException(422, str(exc)) from None
    except sqlite3.Error as exc:
        raise _unwritable(exc) from None


def _unwritable(exc: sqlite3.Error) -> HTTPException:
    """A vote the database could not store (disk full, read-only, locked too long): 503, not 500."""
    logging.getLogger(__name__).error("review database write failed: %s", exc)
    return HTTPException(503, f"the review database could not store this ({exc}); nothing was saved")


async def _json_body(request: Request) -> dict[str, Any]:
    """A small JSON object, or 413/415/400; read in chunks so a huge body is never held."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        # Also blocks cross-site "simple" form posts, which cannot set this type without CORS.
        raise HTTPException(415, "send application/json")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise HTTPException(413, "request body too large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise HTTPException(413, "request body too large")
        chunks.append(chunk)
    try:
        data = json.loads(b"".join(chunks) or b"null")
    except (ValueError, UnicodeDecodeError):
        raise HTTPException(400, "body is not valid JSON") from None
    except RecursionError:  # "[[[[…" nested deeper than the parser's stack: bad input, not a 500
        raise HTTPException(400, "body is nested too deeply") from None
    if not isinstance(data, dict):
        raise HTTPException(400, "body must be a JSON object")
    return data
