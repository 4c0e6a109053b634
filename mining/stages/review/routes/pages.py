"""The review page and the queue it shows: who this link votes as, the landmarks with their
counts, a page of items, and where a reviewer resumes."""

from __future__ import annotations

import sqlite3
from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import FileResponse

from mining.errors import UserError
from mining.stages.review import listing, queue_import
from mining.stages.review.routes.shared import MAX_ID, MAX_PAGE, STATIC, conn, settings_of, user_error, who

router = APIRouter()


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


@router.get("/api/me")
def api_me(request: Request) -> dict[str, Any]:
    """Who this link votes as (null: the page asks for a name)."""
    return {"reviewer": request.state.reviewer}


@router.get("/api/landmarks")
def api_landmarks(request: Request, reviewer: str | None = Query(None, max_length=200),
                  con: sqlite3.Connection = Depends(conn)) -> dict[str, Any]:
    try:
        overview = listing.landmarks_overview(con, who(request, reviewer))
    except UserError as exc:
        raise user_error(exc) from None
    queries = _queries_by_landmark(settings_of(request).landmarks)
    for lm in overview:
        lm["queries"] = queries.get(lm["landmark"], [])
    return {"landmarks": overview, "total": sum(x["total"] for x in overview),
            "mine": sum(x["mine"] for x in overview), "kind": queue_import.queue_kind(con)}


@router.get("/api/items")
def api_items(request: Request, landmark: str = Query(..., max_length=500), offset: int = Query(0, ge=0, le=MAX_ID),
              limit: int = Query(100, ge=1, le=MAX_PAGE),
              reviewer: str | None = Query(None, max_length=200),
              show: Literal["all", "undecided", "mine", "disputed"] = "all",
              after: int | None = Query(None, ge=0, le=MAX_ID), sort: Literal["rank", "inliers"] = "rank",
              con: sqlite3.Connection = Depends(conn)) -> dict[str, Any]:
    try:
        page = listing.items_page(con, landmark, offset, limit, who(request, reviewer), show, after, sort)
    except UserError as exc:
        raise user_error(exc) from None
    if page["total"] == 0 and (show == "all" or listing.items_page(con, landmark, 0, 1, None)["total"] == 0):
        raise HTTPException(404, "unknown landmark")
    return page


@router.get("/api/resume")
def api_resume(request: Request, landmark: str = Query(..., max_length=500),
               reviewer: str | None = Query(None, max_length=200),
               con: sqlite3.Connection = Depends(conn)) -> dict[str, Any]:
    try:
        return {"landmark": landmark, "position": listing.first_open(con, landmark, who(request, reviewer))}
    except UserError as exc:
        raise user_error(exc) from None


def _queries_by_landmark(ds: Any) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    if ds is None:
        return out
    for i, name in enumerate(ds.qimlist):
        out.setdefault(ds.query_landmark(i), []).append({"index": i, "name": name})
    return out
