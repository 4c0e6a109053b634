"""The review web app (FastAPI): a JSON API plus a static single page, no build step, no CDN.

The client never sends a path: images are addressed by item id or query index and mapped to
files server-side, then resolved and checked to lie under their root (symlinks included).
Every vote goes to SQLite at once. Who votes: with tokens (one, or one per reviewer) the token a
request carries names the reviewer and a request cannot speak for anyone else (403); without a
token (loopback only) the browser keeps the reviewer's name and sends it (see `access`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from mining import imageindex
from mining.errors import UserError
from mining.benchmarks import dataset_view
from mining.stages.review import db, geometry, thumbs
from mining.stages.review.access import Access, single

STATIC = Path(__file__).parent / "static"
MAX_BODY = 4096  # a vote is ~60 bytes; anything much larger is refused before parsing
MAX_PAGE = 500
_NO_ACCESS_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>mining review: link not valid</title>
<style>body{font:16px/1.5 system-ui,sans-serif;background:#16181d;color:#e6e8ec;display:flex;justify-content:center;
padding-top:15vh}main{max-width:34em}code{background:#2a303a;padding:1px 5px;border-radius:4px}</style></head>
<body><main><h1>This review link is not valid</h1>
<p>The link is incomplete, mistyped, or from an earlier review set-up (links change when the
reviewers' tokens are renewed).</p>
<p>Ask the person running the review for your current link: they find it in the file the server
named at start-up (<code>review.links.json</code> beside the database). Your votes so far are safe on the server.</p>
</main></body></html>"""
MAX_ID = 2**62  # SQLite integers are 64-bit; larger ids are refused as 422, not a 500
TOKEN_HEADER = "x-review-token"
TOKEN_COOKIE = "review_token"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


@dataclass(frozen=True)
class Settings:
    db_path: Path
    images: Path
    paths: dict[int, str]  # photo id -> image path under `images` (its index.parquet)
    landmarks: Any  # LandmarkDataset, mining.benchmarks.Combined (several benchmarks) or None
    thumbs: Path
    access: Access


def thumbs_dir_for(db_path: Path) -> Path:
    """The thumbnail cache lives beside the database: `review.sqlite` → `review.thumbs/`."""
    return db_path.with_name(db_path.stem + ".thumbs")


def create_app(db_path: str | Path, images: str | Path, landmarks: str | Path | None = None,
               token: str | None = None, thumbs_dir: str | Path | None = None, *,
               reviewer: str | None = None, access: Access | None = None, images_required: bool = True) -> FastAPI:
    """Build the app; refuses missing inputs up front so `serve` fails before binding a port.

    `token` (one person, named `reviewer`) or `access` (a token per reviewer); neither: open
    mode, loopback Host headers only, the client names itself. `images_required=False` (the
    simulated reviewers): a folder without the download's index.parquet serves no images."""
    if token and access is not None:
        raise UserError("pass a token or per-reviewer access, not both")
    if access is None:
        access = single(token, reviewer) if token else Access()
    dbp = Path(db_path)
    root = Path(images)
    if not root.is_dir():
        raise UserError(f"{root}: image root not found")
    # the download's index says where each image is; the simulated reviewers see no images
    paths = imageindex.stored(root) if images_required or (root / imageindex.NAME).exists() else {}
    db.connect(dbp).close()  # exists and opens
    ds = dataset_view(landmarks) if landmarks else None  # several benchmarks: their queries as one list
    if ds is not None:
        con = db.connect(dbp)
        try:
            known = db.fingerprint(con)
        finally:
            con.close()
        if known and known != ds.fingerprint():
            raise UserError(f"{ds.path}: landmark dataset {ds.fingerprint()} is not the one the queue "
                            f"was scored against ({known})")
    s = Settings(dbp, root.resolve(), paths, ds, Path(thumbs_dir) if thumbs_dir else thumbs_dir_for(dbp), access)
    app = FastAPI(title="mining review", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.settings = s

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Response:
        """A known token on every request (it names the reviewer: request.state.reviewer);
        without tokens, only loopback Host headers (DNS rebinding)."""
        request.state.reviewer = None
        given = ""
        if not s.access.open:
            given = (request.headers.get(TOKEN_HEADER) or request.query_params.get("token")
                     or request.cookies.get(TOKEN_COOKIE) or "")
            auth = request.headers.get("authorization", "")
            if auth.lower().startswith("bearer "):
                given = given or auth[7:]
            request.state.reviewer = s.access.reviewer_for(given)
            if request.state.reviewer is None:
                if "text/html" in request.headers.get("accept", ""):  # a person following a link
                    return HTMLResponse(_NO_ACCESS_PAGE, status_code=401, headers={"Cache-Control": "no-store"})
                return JSONResponse({"detail": "missing or wrong token"}, status_code=401)
        else:
            if _hostname(request.headers.get("host", "")) not in LOOPBACK_HOSTS:
                return JSONResponse({"detail": "host not allowed"}, status_code=403)
        response = await call_next(request)
        if given and request.query_params.get("token") == given:
            # The page URL carries the token once; the cookie then authorises images and API calls.
            response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    local = threading.local()

    def thread_con() -> sqlite3.Connection:
        """One connection per worker thread, kept open: closing the last connection to a WAL
        database checkpoints it (an fsync), which made every request ~30 ms slower."""
        con = getattr(local, "con", None)
        if con is None:
            con = local.con = db.connect(s.db_path)
        return con

    def conn() -> sqlite3.Connection:
        return thread_con()

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

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    @app.get("/api/me")
    def api_me(request: Request) -> dict[str, Any]:
        """Who this link votes as (null: the page asks for a name)."""
        return {"reviewer": request.state.reviewer}

    @app.get("/api/landmarks")
    def api_landmarks(request: Request, reviewer: str | None = Query(None, max_length=200),
                      con: sqlite3.Connection = Depends(conn)) -> dict[str, Any]:
        try:
            overview = db.landmarks_overview(con, who(request, reviewer))
        except UserError as exc:
            raise user_error(exc) from None
        queries = _queries_by_landmark(s.landmarks)
        for lm in overview:
            lm["queries"] = queries.get(lm["landmark"], [])
        return {"landmarks": overview, "total": sum(x["total"] for x in overview),
                "mine": sum(x["mine"] for x in overview), "kind": db.queue_kind(con)}

    @app.get("/api/items")
    def api_items(request: Request, landmark: str = Query(..., max_length=500), offset: int = Query(0, ge=0, le=MAX_ID),
                  limit: int = Query(100, ge=1, le=MAX_PAGE),
                  reviewer: str | None = Query(None, max_length=200),
                  show: Literal["all", "undecided", "mine", "disputed"] = "all",
                  after: int | None = Query(None, ge=0, le=MAX_ID), sort: Literal["rank", "inliers"] = "rank",
                  con: sqlite3.Connection = Depends(conn)) -> dict[str, Any]:
        try:
            page = db.items_page(con, landmark, offset, limit, who(request, reviewer), show, after, sort)
        except UserError as exc:
            raise user_error(exc) from None
        if page["total"] == 0 and (show == "all" or db.items_page(con, landmark, 0, 1, None)["total"] == 0):
            raise HTTPException(404, "unknown landmark")
        return page

    @app.get("/api/resume")
    def api_resume(request: Request, landmark: str = Query(..., max_length=500),
                   reviewer: str | None = Query(None, max_length=200),
                   con: sqlite3.Connection = Depends(conn)) -> dict[str, Any]:
        try:
            return {"landmark": landmark, "position": db.first_open(con, landmark, who(request, reviewer))}
        except UserError as exc:
            raise user_error(exc) from None

    async def write(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run a database write off the event loop; its errors as HTTP answers."""
        try:
            return await run_in_threadpool(work)
        except db.NotFound:
            raise HTTPException(404, "unknown item") from None
        except UserError as exc:
            raise HTTPException(422, str(exc)) from None
        except sqlite3.Error as exc:
            raise _unwritable(exc) from None

    @app.post("/api/votes")
    async def api_vote(request: Request) -> dict[str, Any]:
        body = await _json_body(request)
        item, value, reviewer = body.get("item_id"), body.get("vote"), who(request, body.get("reviewer"))
        if not isinstance(item, int) or isinstance(item, bool) or item < 0 or item > MAX_ID:
            raise HTTPException(422, "item_id must be a non-negative integer")
        if value not in db.VOTES:
            raise HTTPException(422, f"vote must be one of {', '.join(db.VOTES)}")

        def work() -> dict[str, Any]:
            return db.vote(thread_con(), item, reviewer, value)
        return await write(work)

    @app.post("/api/votes/bulk")
    async def api_bulk_vote(request: Request) -> dict[str, Any]:
        """One decision on several items (the rest of a page), skipping those this reviewer has
        decided already; one undo retracts it."""
        body = await _json_body(request)
        items, value, reviewer = body.get("item_ids"), body.get("vote"), who(request, body.get("reviewer"))
        if (not isinstance(items, list) or not 1 <= len(items) <= MAX_PAGE
                or any(not isinstance(i, int) or isinstance(i, bool) or not 0 <= i <= MAX_ID for i in items)):
            raise HTTPException(422, f"item_ids must be a list of 1 to {MAX_PAGE} non-negative integers")
        if value not in db.VOTES:
            raise HTTPException(422, f"vote must be one of {', '.join(db.VOTES)}")

        def work() -> dict[str, Any]:
            return db.bulk_vote(thread_con(), items, reviewer, value)
        return await write(work)

    @app.post("/api/undo")
    async def api_undo(request: Request) -> dict[str, Any]:
        body = await _json_body(request)
        reviewer = who(request, body.get("reviewer"))

        def work() -> dict[str, Any]:
            con = thread_con()
            done = db.undo(con, reviewer)
            if done is None:
                return {"undone": None}
            lm, pos = db.position_of(con, done["item_id"]) or ("", 0)
            return {"undone": {**done, "landmark": lm, "position": pos}}
        return await write(work)

    @app.get("/thumb/{item_id}")
    def thumb(item_id: int = PathParam(ge=0, le=MAX_ID), con: sqlite3.Connection = Depends(conn)) -> Response:
        src, pid = _item_image(con, item_id)
        return _jpeg(thumbs.cached(s.thumbs, f"items/{s.paths[pid].removeprefix('jpg/')}", src))

    @app.get("/image/{item_id}")
    def image(item_id: int = PathParam(ge=0, le=MAX_ID), con: sqlite3.Connection = Depends(conn)) -> FileResponse:
        src, _ = _item_image(con, item_id)
        return FileResponse(src, media_type="image/jpeg", headers={"Cache-Control": "private, max-age=86400"})

    @app.get("/query/{index}")
    def query_crop(index: int = PathParam(ge=0, le=MAX_ID), full: bool = False) -> Response:
        return _jpeg(query_jpeg(index, full))

    def query_jpeg(index: int, full: bool) -> bytes | None:
        ds = s.landmarks
        if ds is None or not 0 <= index < len(ds.qimlist):
            raise HTTPException(404, "unknown query")
        sub, j = ds.locate(index)  # its benchmark's dataset (itself with one)
        src = thumbs.inside(sub.image_root, sub.image_path(sub.qimlist[j]))
        if src is None:
            raise HTTPException(404, "query image not found")
        bbox = sub.bbox(j) if sub.gnd[j].get("bbx") is not None else None
        tag = hashlib.sha256(json.dumps([ds.qimlist[index], bbox, full]).encode()).hexdigest()[:24]
        return thumbs.cached(s.thumbs, f"queries/{tag}.jpg", src, 1024 if full else thumbs.THUMB_SIZE, bbox)

    @app.get("/matches/{item_id}")
    def matches(item_id: int = PathParam(ge=0, le=MAX_ID), con: sqlite3.Connection = Depends(conn)) -> Response:
        """The item's inlier correspondences drawn between it and the landmark image that gave
        them (`geometry.svg`, images embedded: an SVG shown as an image loads nothing else)."""
        ev = geometry.of_item(con, item_id)
        if ev is None or ev["inliers"] <= 0:
            raise HTTPException(404, "no geometric evidence for this item")
        src, pid = _item_image(con, item_id)
        cand = thumbs.cached(s.thumbs, f"matches/{s.paths[pid].removeprefix('jpg/')}", src, 768)
        body = geometry.svg(ev, cand, landmark_jpeg(ev["image"]), f"{ev['inliers']} inliers with {ev['image']}")
        return Response(body, media_type="image/svg+xml", headers={
            "Cache-Control": "private, max-age=86400", "Content-Security-Policy": "default-src 'none'; img-src data:"})

    def landmark_jpeg(image: str) -> bytes | None:
        """`queries/<name>` (its crop) or `database/<name>` of the landmark dataset; None when absent."""
        part, _, name = image.partition("/")
        ds = s.landmarks
        if ds is None:
            return None
        if part == "queries" and name in ds.qimlist:
            return query_jpeg(ds.qimlist.index(name), True)
        if part == "database" and name in getattr(ds, "imlist", ()):
            src = thumbs.inside(ds.image_root, ds.image_path(name))
            tag = hashlib.sha256(json.dumps(["database", name]).encode()).hexdigest()[:24]
            return thumbs.cached(s.thumbs, f"database/{tag}.jpg", src, 1024) if src else None
        return None

    def _item_image(con: sqlite3.Connection, item_id: int) -> tuple[Path, int]:
        pid = db.photo_of(con, item_id)
        if pid is None:
            raise HTTPException(404, "unknown item")
        rel = s.paths.get(pid)
        src = thumbs.inside(s.images, s.images / rel) if rel else None
        if src is None:
            raise HTTPException(404, "image not found under the image root")
        return src, pid

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def _unwritable(exc: sqlite3.Error) -> HTTPException:
    """A vote the database could not store (disk full, read-only, locked too long): 503, not 500."""
    logging.getLogger(__name__).error("review database write failed: %s", exc)
    return HTTPException(503, f"the review database could not store this ({exc}); nothing was saved")


def _jpeg(data: bytes | None) -> Response:
    """A cached thumbnail; None: its cache entry was refused (a planted symlink, see thumbs)."""
    if data is None:
        raise HTTPException(404, "thumbnail cache entry refused")
    return Response(data, media_type="image/jpeg", headers={"Cache-Control": "private, max-age=86400"})


def _hostname(host: str) -> str:
    """The Host header without its port (`[::1]:8765` → `[::1]`)."""
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0]


def _queries_by_landmark(ds: Any) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    if ds is None:
        return out
    for i, name in enumerate(ds.qimlist):
        out.setdefault(ds.query_landmark(i), []).append({"index": i, "name": name})
    return out


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
