"""The review web app (FastAPI): a JSON API plus a static single page, no build step, no CDN.

The client never sends a path: images are addressed by item id or query index and mapped to
files server-side, then resolved and checked to lie under their root (symlinks included).
Every vote goes to SQLite at once. Who votes: with tokens (one, or one per reviewer) the token a
request carries names the reviewer and a request cannot speak for anyone else (403); without a
token (loopback only) the browser keeps the reviewer's name and sends it (see `access`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from mining.photos import imageindex
from mining.datasets.benchmarks import dataset_view
from mining.errors import UserError
from mining.stages.review import database, queue_import
from mining.stages.review.access import Access, single
from mining.stages.review.routes import images as image_routes
from mining.stages.review.routes import pages, votes
from mining.stages.review.routes.shared import STATIC, Settings

_NO_ACCESS_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>mining review: link not valid</title>
<style>body{font:16px/1.5 system-ui,sans-serif;background:#16181d;color:#e6e8ec;display:flex;justify-content:center;
padding-top:15vh}main{max-width:34em}code{background:#2a303a;padding:1px 5px;border-radius:4px}</style></head>
<body><main><h1>This review link is not valid</h1>
<p>The link is incomplete, mistyped, or from an earlier review set-up (links change when the
reviewers' tokens are renewed).</p>
<p>Ask the person running the review for your current link: they find it in the file the server
named at start-up (<code>review.links.json</code> beside the database). Your votes so far are safe on the server.</p>
</main></body></html>"""
TOKEN_HEADER = "x-review-token"
TOKEN_COOKIE = "review_token"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def thumbs_dir_for(db_path: Path) -> Path:
    """The thumbnail cache lives beside the database: `review.sqlite` → `review.thumbs/`."""
    return db_path.with_name(db_path.stem + ".thumbs")


def create_app(*, db_path: str | Path, images: str | Path, landmarks: str | Path | list[str] | None = None,
               token: str | None = None, reviewer: str | None = None, access: Access | None = None,
               thumbs_dir: str | Path | None = None, images_required: bool = True) -> FastAPI:
    """Build the app; refuses missing inputs up front so `serve` fails before binding a port.

    `db_path`: the review database; `images`: the download's folder; `landmarks`: [NAME=]GND,
    whose images give the query crops. `token` (one person, named `reviewer`) or `access` (a
    token per reviewer); neither: open mode, loopback Host headers only, the client names
    itself. `thumbs_dir`: the thumbnail cache (default: beside the database).
    `images_required=False` (the simulated reviewers): a folder without the download's
    index.parquet serves no images."""
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
    database.connect(dbp).close()  # exists and opens
    ds = dataset_view(landmarks) if landmarks else None  # several benchmarks: their queries as one list
    if ds is not None:
        _check_fingerprint(dbp, ds)
    app = FastAPI(title="mining review", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.settings = Settings(dbp, root.resolve(), paths, ds,
                                  Path(thumbs_dir) if thumbs_dir else thumbs_dir_for(dbp), access)
    app.middleware("http")(guard)
    for group in (pages, votes, image_routes):
        app.include_router(group.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def _check_fingerprint(dbp: Path, ds: Any) -> None:
    """The landmarks are the ones the queue was scored against, or one line."""
    con = database.connect(dbp)
    try:
        known = queue_import.fingerprint(con)
    finally:
        con.close()
    if known and known != ds.fingerprint():
        raise UserError(f"{ds.path}: landmark dataset {ds.fingerprint()} is not the one the queue "
                        f"was scored against ({known})")


async def guard(request: Request, call_next: Any) -> Response:
    """A known token on every request (it names the reviewer: request.state.reviewer);
    without tokens, only loopback Host headers (DNS rebinding)."""
    access = request.app.state.settings.access
    request.state.reviewer = None
    given = ""
    if not access.open:
        given = (request.headers.get(TOKEN_HEADER) or request.query_params.get("token")
                 or request.cookies.get(TOKEN_COOKIE) or "")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = given or auth[7:]
        request.state.reviewer = access.reviewer_for(given)
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


def _hostname(host: str) -> str:
    """The Host header without its port (`[::1]:8765` → `[::1]`)."""
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0]
