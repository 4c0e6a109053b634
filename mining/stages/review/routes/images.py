"""Images, addressed by item id or query index and mapped to files server-side (the client
never sends a path): thumbnails, full images, query crops and an item's geometric matches."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, Response

from mining.stages.review import inliers, listing, thumbs
from mining.stages.review.routes.shared import MAX_ID, Settings, conn, settings_of

router = APIRouter()


@router.get("/thumb/{item_id}")
def thumb(request: Request, item_id: int = PathParam(ge=0, le=MAX_ID),
          con: sqlite3.Connection = Depends(conn)) -> Response:
    s = settings_of(request)
    src, pid = _item_image(s, con, item_id)
    return _jpeg(thumbs.cached(s.thumbs, f"items/{s.paths[pid].removeprefix('jpg/')}", src))


@router.get("/image/{item_id}")
def image(request: Request, item_id: int = PathParam(ge=0, le=MAX_ID),
          con: sqlite3.Connection = Depends(conn)) -> FileResponse:
    src, _ = _item_image(settings_of(request), con, item_id)
    return FileResponse(src, media_type="image/jpeg", headers={"Cache-Control": "private, max-age=86400"})


@router.get("/query/{index}")
def query_crop(request: Request, index: int = PathParam(ge=0, le=MAX_ID), full: bool = False) -> Response:
    return _jpeg(query_jpeg(settings_of(request), index, full))


@router.get("/matches/{item_id}")
def matches(request: Request, item_id: int = PathParam(ge=0, le=MAX_ID),
            con: sqlite3.Connection = Depends(conn)) -> Response:
    """The item's inlier correspondences drawn between it and the landmark image that gave
    them (`inliers.svg`, images embedded: an SVG shown as an image loads nothing else)."""
    s = settings_of(request)
    ev = inliers.of_item(con, item_id)
    if ev is None or ev["inliers"] <= 0:
        raise HTTPException(404, "no geometric evidence for this item")
    src, pid = _item_image(s, con, item_id)
    cand = thumbs.cached(s.thumbs, f"matches/{s.paths[pid].removeprefix('jpg/')}", src, 768)
    body = inliers.svg(ev, cand, landmark_jpeg(s, ev["image"]), f"{ev['inliers']} inliers with {ev['image']}")
    return Response(body, media_type="image/svg+xml", headers={
        "Cache-Control": "private, max-age=86400", "Content-Security-Policy": "default-src 'none'; img-src data:"})


def query_jpeg(s: Settings, index: int, full: bool) -> bytes | None:
    """Query `index`'s crop (its bbox; `full`: larger), cached; 404 for an unknown query."""
    if s.landmarks is None or not 0 <= index < len(s.landmarks.qimlist):
        raise HTTPException(404, "unknown query")
    sub, j = s.landmarks.locate(index)  # its benchmark's dataset (itself with one)
    src = thumbs.inside(sub.image_root, sub.image_path(sub.qimlist[j]))
    if src is None:
        raise HTTPException(404, "query image not found")
    bbox = sub.bbox(j) if sub.gnd[j].get("bbx") is not None else None
    tag = hashlib.sha256(json.dumps([s.landmarks.qimlist[index], bbox, full]).encode()).hexdigest()[:24]
    return thumbs.cached(s.thumbs, f"queries/{tag}.jpg", src, 1024 if full else thumbs.THUMB_SIZE, bbox)


def landmark_jpeg(s: Settings, image: str) -> bytes | None:
    """`queries/<name>` (its crop) or `database/<name>` of the landmark dataset; None when absent."""
    part, _, name = image.partition("/")
    ds = s.landmarks
    if ds is None:
        return None
    if part == "queries" and name in ds.qimlist:
        return query_jpeg(s, ds.qimlist.index(name), True)
    if part == "database" and name in getattr(ds, "imlist", ()):
        src = thumbs.inside(ds.image_root, ds.image_path(name))
        tag = hashlib.sha256(json.dumps(["database", name]).encode()).hexdigest()[:24]
        return thumbs.cached(s.thumbs, f"database/{tag}.jpg", src, 1024) if src else None
    return None


def _item_image(s: Settings, con: sqlite3.Connection, item_id: int) -> tuple[Path, int]:
    pid = listing.photo_of(con, item_id)
    if pid is None:
        raise HTTPException(404, "unknown item")
    rel = s.paths.get(pid)
    src = thumbs.inside(s.images, s.images / rel) if rel else None
    if src is None:
        raise HTTPException(404, "image not found under the image root")
    return src, pid


def _jpeg(data: bytes | None) -> Response:
    """A cached thumbnail; None: its cache entry was refused (a planted symlink, see thumbs)."""
    if data is None:
        raise HTTPException(404, "thumbnail cache entry refused")
    return Response(data, media_type="image/jpeg", headers={"Cache-Control": "private, max-age=86400"})
