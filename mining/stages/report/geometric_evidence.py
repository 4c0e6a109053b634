"""The geometric evidence section: what spatial verification put in front of the reviewers.

Two figures for the run reported: the review-queue images that reached a reviewer with at
least `min_inliers` inliers against their landmark's images before any vote, split by what the
reviewers then decided (the landmark images geometry found; the images that scored that high
and were not the landmark), and the landmark images geometry missed; plus what the leak risk's
geometric check flagged beyond the queue (mining/evidence/geometry.py)."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq

from mining.files.names import REVIEW_QUEUE, STATS
from mining.stages.report.common import NA, Inputs, esc, read_json, table
from mining.files.tables import load_decisions


def geometric_evidence(inp: Inputs) -> str:
    queue_path = inp.scores / REVIEW_QUEUE if inp.scores else None
    if queue_path is None:
        return NA
    if not queue_path.is_file() or "inliers" not in pq.read_schema(queue_path).names:
        return ("<p>No geometric evidence: no review queue with inliers (a method keeping keypoints, "
                "<code>spatial_verification</code>, gives it).</p>")
    st = (read_json(inp.scores / STATS) or {}).get("review_queue_geometry") or {}
    t = int(st.get("min_inliers", 0))
    q = pq.read_table(queue_path, columns=["landmark", "photo_id", "inliers"]).to_pandas()
    hit = q[q["inliers"] >= t]
    rows: list[list[Any]] = [["review-queue items", len(q)],
                             [f"… with ≥ {t} inliers before any vote (images)", f"{len(hit)} ({hit['photo_id'].nunique()})"]]
    if inp.decisions and inp.decisions.is_file():
        decided, _ = load_decisions(inp.decisions)
        d = q.merge(decided, on=["landmark", "photo_id"], how="left")
        flagged, landmark = d["inliers"] >= t, d["decision"] == "landmark"
        rows += [[f"… decided landmark: landmark images with ≥ {t} inliers", int((flagged & landmark).sum())],
                 [f"… decided not landmark: non-landmark images with ≥ {t} inliers",
                  int((flagged & (d["decision"] == "not_landmark")).sum())],
                 [f"items decided landmark with < {t} inliers (missed by geometry, or another landmark's photo)",
                  int((~flagged & landmark).sum())]]
    lr = (read_json(inp.leakrisk / STATS) or {}).get("geometry") if inp.leakrisk else None
    if lr:
        rows += [[f"leak risk: riskiest candidates verified ({lr['verified']}), ≥ {t} inliers", lr["at_min_inliers"]],
                 ["… of them outside the review queue", lr["at_min_inliers_outside_queue"]],
                 ["… high risk by geometry only (cosine below the threshold)", lr["high_by_geometry_only"]]]
    return (f"<p>Best RANSAC inliers of each candidate against its landmark's query crops and positives "
            f"({esc(st.get('method', '?'))} keypoints); a reviewer sees the matched keypoints and can sort by them. "
            f"People decide: the inliers flag, they remove nothing.</p>" + table(rows, ["", "count"]))

