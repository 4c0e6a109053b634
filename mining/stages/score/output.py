"""The score's files: scores.parquet (one row per candidate, sorted by photo id; with several
benchmarks also each one's part of the score, `benchmark_score_<name>`),
review_queue.parquet (per landmark its top K, near-copies of a landmark's images first when
`mining neardup` ran) and stats.json, each written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mining import pins
from mining.files import atomic
from mining.files.checksums import file_sha256
from mining.files.names import REVIEW_QUEUE, SCORES, STATS
from mining.datasets.benchmarks import score_column
from mining.evidence.geometry import columns
from mining.stages.score.inputs import Problem
from mining.stages.score.loop import ScoreResult
from mining.evidence.screening import prepend_probable


def write_outputs(result: ScoreResult, problem: Problem, out: Path, near_duplicates: Path | None = None,
                  geometry: Any = None) -> None:
    """scores.parquet (sorted by photo id), review_queue.parquet, stats.json, atomically.
    `geometry` (`mining.evidence.geometry.Geometry`): each queue row's best inliers against its landmark."""
    order = np.argsort(result.photo_id, kind="stable")
    lm_names = np.array(problem.landmarks + [None], dtype=object)
    cols = {
        "photo_id": pa.array(result.photo_id[order], pa.int64()),
        "score": pa.array(result.score[order], pa.float64()),
    }
    for name, s in result.method_scores.items():
        v = s[order]
        cols[f"score_{name}"] = pa.array(v, pa.float64(), mask=np.isnan(v))
    if len(problem.benchmarks) > 1:  # each benchmark's part of score (they sum to it exactly)
        for bi, name in enumerate(problem.benchmarks):
            cols[score_column(name)] = pa.array(result.benchmark_scores[bi][order], pa.float64())
    cols["closest_landmark"] = pa.array(lm_names[result.closest_landmark[order]], pa.string())
    cols["methods_missing"] = pa.array(result.methods_missing[order], pa.int8())
    scores = pa.table(cols)

    rows = {k: [] for k in ("landmark", "photo_id", "rank", "score", "total_score", "best_query")}
    sorted_ids, sorted_scores = result.photo_id[order], result.score[order]
    for lm in problem.landmarks:
        t = result.review[lm]
        for r, (c, p, q) in enumerate(zip(t.contrib.tolist(), t.photo_id.tolist(), t.best_query.tolist()), 1):
            rows["landmark"].append(lm)
            rows["photo_id"].append(p)
            rows["rank"].append(r)
            rows["score"].append(c)
            rows["total_score"].append(float(sorted_scores[np.searchsorted(sorted_ids, p)]))
            rows["best_query"].append(problem.query_names[q])
    schema = pa.schema([("landmark", pa.string()), ("photo_id", pa.int64()), ("rank", pa.int32()),
                        ("score", pa.float64()), ("total_score", pa.float64()), ("best_query", pa.string())])
    if near_duplicates is not None:  # near-copies of a landmark's images head its queue (mining.stages.neardup.stage)

        rows = prepend_probable(rows, Path(near_duplicates), sorted_ids, sorted_scores, problem.landmarks)
        schema = schema.append(pa.field("probable_landmark", pa.bool_()))
        result.stats["review_queue_probable_landmark"] = int(sum(rows["probable_landmark"]))
    table = pa.table(rows, schema=schema)
    if geometry is not None:
        table = add_geometry(table, geometry, result.stats)
    result.stats["review_queue_rows"] = len(rows["photo_id"])
    result.stats["pins"] = pins.fingerprint()
    # the three files of one run, stats.json last (the commit), naming the others' digests: a kill or
    # a full disk leaves the old run's files whole, and a reader can tell files of two runs apart
    with atomic.files_together(out, (SCORES, REVIEW_QUEUE, STATS)) as tmp:
        pq.write_table(scores, tmp[SCORES])
        pq.write_table(table, tmp[REVIEW_QUEUE])
        result.stats["files_sha256"] = {name: file_sha256(tmp[name]) for name in (SCORES, REVIEW_QUEUE)}
        tmp[STATS].write_text(atomic.json_text(result.stats))




def add_geometry(table: pa.Table, geometry: Any, stats: dict) -> pa.Table:
    """The queue with the geometric evidence columns (`mining.evidence.geometry.columns`), and its counts in stats."""
    ev = geometry.best(table.column("landmark").to_pylist(), table.column("photo_id").to_pylist())
    for name, col in columns(ev).items():
        table = table.append_column(name, col)
    meta = {**(table.schema.metadata or {}), b"min_inliers": str(geometry.min_inliers).encode()}  # the review app's bar
    table = table.replace_schema_metadata(meta)
    stats["review_queue_geometry"] = {"method": geometry.method, "min_inliers": geometry.min_inliers,
                                      "rows_at_min_inliers": int((ev.inliers >= geometry.min_inliers).sum())}
    return table
