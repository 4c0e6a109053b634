"""The geometric evidence of review items (`mining.evidence`): kept beside the items, drawn as SVG.

A queue made from stores that keep keypoints has, per row, the candidate's best inlier count
against its landmark's images, the image that gave it and the inlier correspondences; they are
imported into `evidence` (one row per item) with the queue. The app sorts by inliers and draws
the correspondences between the candidate and that image: an SVG that places both images at
the frames the keypoints were found in (so the lines meet the points whatever size the
browser shows) and holds no text but escaped names.
"""

from __future__ import annotations

import base64
import html
import json
import math
import sqlite3
from typing import Any

from mining.errors import UserError

SCHEMA = """
CREATE TABLE IF NOT EXISTS evidence (
    item_id INTEGER PRIMARY KEY REFERENCES items (id),
    inliers INTEGER NOT NULL,
    image TEXT,
    points TEXT,
    frames TEXT
);
"""
MIN_INLIERS = "min_inliers"  # meta key: the bar a flagged item reaches (the queue's Parquet metadata)
COLUMNS = ("inliers", "inlier_image", "inlier_points", "inlier_frames")


def import_evidence(con: sqlite3.Connection, table: Any) -> int:
    """Store the queue's evidence columns (if any) for its items; returns the rows given. Evidence
    already stored for an item is kept, as the item is. Runs inside the queue import's transaction."""
    if "inliers" not in table.column_names:
        return 0
    meta = table.schema.metadata or {}
    if meta.get(MIN_INLIERS.encode()):
        bar = meta[MIN_INLIERS.encode()].decode(errors="replace")
        if not bar.isascii() or not bar.isdigit() or int(bar) > MAX_INLIERS:
            raise UserError(f"the queue's {MIN_INLIERS} metadata is {bar[:40]!r}, not a whole number of inliers; "
                            "make the queue again with `mining score`")
        con.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (MIN_INLIERS, bar))
    cols = {c: table.column(c).to_pylist() for c in ("landmark", "photo_id", *COLUMNS) if c in table.column_names}
    rows = []
    for i in range(table.num_rows):
        item = con.execute("SELECT id FROM items WHERE landmark = ? AND photo_id = ?",
                           (str(cols["landmark"][i]), int(cols["photo_id"][i]))).fetchone()
        n = cols["inliers"][i]
        if item is None or n is None:
            continue
        pts = cols.get("inlier_points", [None] * table.num_rows)[i] or []
        frames = cols.get("inlier_frames", [None] * table.num_rows)[i] or []
        bad = _out_of_domain(n, pts, frames)
        if bad:
            raise UserError(f"queue row {i + 1} (landmark {str(cols['landmark'][i])[:60]!r}, photo "
                            f"{cols['photo_id'][i]}): {bad}; the evidence is refused (make the queue again with "
                            "`mining score`)")
        rows.append((item[0], int(n), cols.get("inlier_image", [None] * table.num_rows)[i],
                     json.dumps([round(float(v), 2) for v in pts]), json.dumps([int(v) for v in frames])))
    con.executemany("INSERT OR IGNORE INTO evidence (item_id, inliers, image, points, frames) VALUES (?, ?, ?, ?, ?)", rows)
    return len(rows)


MAX_INLIERS = 10**7
MAX_SIDE = 65535  # a JPEG's largest side


def _out_of_domain(inliers: Any, points: list, frames: list) -> str | None:
    """What is wrong with one row's evidence, or None: inliers a whole number ≥ -1 (-1: no
    keypoints); frames the two images' sizes (4 whole numbers in 1..65535) or none; points
    (x, y in the candidate, x, y in the image) finite and inside those frames."""
    if type(inliers) is not int or not -1 <= inliers <= MAX_INLIERS:
        return f"inliers is {inliers!r}, not a whole number from -1 to {MAX_INLIERS}"
    if frames and (len(frames) != 4 or any(type(v) is not int or not 1 <= v <= MAX_SIDE for v in frames)):
        return f"inlier_frames is {str(frames)[:80]}, not two image sizes (4 whole numbers from 1 to {MAX_SIDE})"
    if len(points) % 4 or (points and not frames):
        return "inlier_points is not (x, y, x, y) per inlier with the frames they lie in"
    for k, v in enumerate(points):
        limit = frames[k % 4]  # x, y of the candidate, then of the image: within a pixel of the frame
        if v is None or not math.isfinite(v) or not -1 <= v <= limit + 1:
            return f"inlier_points[{k}] is {v!r}, not inside its image ({'width' if k % 2 == 0 else 'height'} {limit})"
    return None


def position_after(con: sqlite3.Connection, landmark: str, cond: str, arg: tuple, after: int) -> int:
    """How many of the landmark's listed items (`cond`) come up to and including item `after` in
    the inlier order (most first, then rank), whether or not `after` is still listed (a vote
    moves items in and out of a filter): the page after it starts there."""
    n_i, n_a = "COALESCE(e.inliers, -1)", "COALESCE(ea.inliers, -1)"
    return int(con.execute(
        f"""SELECT COUNT(*) FROM items i LEFT JOIN evidence e ON e.item_id = i.id,
                  items a LEFT JOIN evidence ea ON ea.item_id = a.id
            WHERE a.id = ? AND i.landmark = ? AND {cond}
              AND ({n_i} > {n_a} OR ({n_i} = {n_a} AND (i.rank < a.rank OR (i.rank = a.rank AND i.id <= a.id))))""",
        (after, landmark, *arg)).fetchone()[0])


def min_inliers(con: sqlite3.Connection) -> int | None:
    row = con.execute("SELECT value FROM meta WHERE key = ?", (MIN_INLIERS,)).fetchone()
    return int(row[0]) if row else None


def of_item(con: sqlite3.Connection, item_id: int) -> dict[str, Any] | None:
    """An item's evidence: inliers, image (`queries/<name>` or `database/<name>`), points, frames."""
    row = con.execute("SELECT inliers, image, points, frames FROM evidence WHERE item_id = ?", (item_id,)).fetchone()
    if row is None:
        return None
    return {"inliers": row[0], "image": row[1] or "", "points": json.loads(row[2] or "[]"), "frames": json.loads(row[3] or "[]")}


def svg(ev: dict[str, Any], candidate: bytes | None, image: bytes | None, caption: str) -> str:
    """The candidate (left) and the matched image (right), JPEG bytes embedded, each stretched
    to the frame its keypoints were found in; a line per inlier correspondence."""
    frames = ev["frames"] if len(ev["frames"]) == 4 else [1, 1, 1, 1]
    wc, hc, wl, hl = (max(1, int(v)) for v in frames)
    gap = max(8, wc // 50)
    width, height = wc + gap + wl, max(hc, hl)
    pts = ev["points"]
    lines = "".join(f'<line x1="{pts[k]:.1f}" y1="{pts[k + 1]:.1f}" x2="{wc + gap + pts[k + 2]:.1f}" y2="{pts[k + 3]:.1f}"/>'
                    for k in range(0, len(pts) - 3, 4))

    def picture(data: bytes | None, x: int, w: int, h: int) -> str:
        if not data:
            return ""
        uri = "data:image/jpeg;base64," + base64.b64encode(data).decode()
        return f'<image href="{uri}" x="{x}" y="0" width="{w}" height="{h}" preserveAspectRatio="none"/>'

    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
            f'<title>{html.escape(caption)}</title><rect width="100%" height="100%" fill="#16181d"/>'
            f'{picture(candidate, 0, wc, hc)}{picture(image, wc + gap, wl, hl)}'
            f'<g stroke="#3ee07a" stroke-width="{max(1, width // 600)}" stroke-opacity="0.8">{lines}</g></svg>')
