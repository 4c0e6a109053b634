"""The final distractor set: the N highest scores, minus every image reviewers confirmed.

Why the checks: a selection mixes three independent files (scores, review decisions,
candidate metadata). A decision about a photo that was never scored, or about a landmark of
another dataset, means the files do not belong together; silently ignoring it could ship a
landmark image as a "distractor", so it is refused. The landmark fingerprint (stored by
`mining score` in stats.json) is compared with `--landmarks` when given, and with a
`landmarks_fingerprint` entry of the decisions file's Parquet metadata when present.

Order is total — score descending, then photo id ascending — so the same inputs always
give the same list, bytes included.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mining import atomic, imageindex
from mining.attribution import attribution_csv, attribution_md, credit_fields, load_candidate_meta
from mining.benchmarks import is_score_column, run_fingerprint
from mining.errors import UserError
from mining.flickr import DEFAULT_HOST, photo_url
from mining.layout import image_key, image_relpath, named_download_url
from mining.licences import licence_label
from mining.options import SelectOptions
from mining.retrieval import rank_order
from mining.screening import leakrisk_filter_order, neardup_filter_order
from mining.tables import load_decisions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Inputs:
    """What `mining select` reads: the files of the stages before it."""

    scores: Path  # `mining score`'s folder
    decisions: Path  # decisions.parquet
    candidates: Path  # geofilter's candidates
    landmarks: list[str] | None = None  # [NAME=]GND, as score was given them: refuse other datasets' scores
    images_root: Path | None = None  # the download folder (its index.parquet)
    near_duplicates: Path | None = None  # neardup.parquet
    leak_risk: Path | None = None  # leakrisk.parquet
    url_host: str | None = None  # image host of the URLs (default live.staticflickr.com)


def load_scores(scores_dir: Path) -> tuple[Any, dict]:
    """scores.parquet as a DataFrame, plus stats.json."""
    import pandas as pd

    table_path, stats_path = scores_dir / "scores.parquet", scores_dir / "stats.json"
    for p in (table_path, stats_path):
        if not p.is_file():
            raise UserError(f"{p} not found (is {scores_dir} the output of `mining score`?)")
    stats = json.loads(stats_path.read_text())
    scores: pd.DataFrame = pq.read_table(table_path).to_pandas()
    for col in ("photo_id", "score"):
        if col not in scores.columns:
            raise UserError(f"{table_path} has no column {col!r}")
    return scores, stats


def check_fingerprints(stats: dict, decisions_fp: str | None, landmarks: Any) -> str | None:
    """Refuse a scores dir / decisions file made for another landmark dataset (or another set
    of benchmarks: `landmarks` as `mining.benchmarks.as_list` takes them)."""
    scores_fp = stats.get("landmarks_fingerprint")
    if landmarks is not None and landmarks != []:
        fp = run_fingerprint(landmarks)
        if fp != scores_fp:
            shown = " ".join(map(str, landmarks)) if isinstance(landmarks, (list, tuple)) else landmarks
            raise UserError(f"scores were made for landmark dataset {scores_fp}, but {shown} is {fp}")
    if decisions_fp is not None and decisions_fp != scores_fp:
        raise UserError(f"decisions were made for landmark dataset {decisions_fp}, but the scores for {scores_fp}")
    return scores_fp


def check_decisions(decisions: Any, scores_ids: np.ndarray, landmarks: list[str]) -> None:
    unknown_lm = sorted(set(decisions.landmark) - set(landmarks))
    if unknown_lm:
        raise UserError(f"decisions name {len(unknown_lm)} landmark(s) the scores do not know: "
                        f"{', '.join(map(str, unknown_lm[:5]))}")
    ids = decisions.photo_id.to_numpy(np.int64)
    known = np.isin(ids, scores_ids)
    if not known.all():
        bad = np.unique(ids[~known])
        raise UserError(f"decisions reference {bad.size} photo id(s) that are not scored candidates "
                        f"(e.g. {bad[0]}); wrong decisions file or scores dir?")


@dataclass
class Ranked:
    """The candidates `mining select` may keep, best first (`order` indexes `pid`/`scores`)."""

    scores: Any
    decisions: Any
    fingerprint: str | None
    pid: np.ndarray
    order: np.ndarray
    confirmed: np.ndarray
    unclear: np.ndarray
    drop: np.ndarray
    near_duplicates: dict | None
    leak_risk: dict | None


def ranked(inputs: Inputs, options: SelectOptions) -> Ranked:
    """Checked inputs and the ranking select takes its top N from (also what `select: {n: auto}`
    measures the mAP-vs-N curve on): score order minus confirmed landmarks (and unclear ones with
    drop_unclear), near-duplicate and leak-risk rules applied."""
    scores, stats = load_scores(inputs.scores)
    decisions, decisions_fp = load_decisions(inputs.decisions, kind="review")  # never an audit's answers
    fingerprint = check_fingerprints(stats, decisions_fp, inputs.landmarks)
    pid = scores.photo_id.to_numpy(np.int64)
    check_decisions(decisions, pid, list(stats.get("landmarks", [])))

    confirmed = np.unique(decisions.photo_id[decisions.decision == "landmark"].to_numpy(np.int64))
    unclear = np.setdiff1d(np.unique(decisions.photo_id[decisions.decision == "unclear"].to_numpy(np.int64)),
                           confirmed)
    drop = np.union1d(confirmed, unclear) if options.drop_unclear else confirmed
    order = rank_order(pid, scores.score.to_numpy(np.float64))
    order = order[~np.isin(pid[order], drop)]
    nd_stats = None
    if inputs.near_duplicates is not None:  # near-copies of landmark images and bursts (mining.stages.neardup.stage)

        order, nd_stats = neardup_filter_order(order, pid, decisions, Path(inputs.near_duplicates),
                                               options.near_duplicates)
    risk_stats = None
    if inputs.leak_risk is not None:  # high-risk candidates beyond the reviewed depth (mining.stages.leakrisk.stage)

        order, risk_stats = leakrisk_filter_order(order, pid, decisions, Path(inputs.leak_risk), options.leak_risk)
    return Ranked(scores, decisions, fingerprint, pid, order, confirmed, unclear, drop, nd_stats, risk_stats)


def run(inputs: Inputs, out: Path, options: SelectOptions, ranking: Ranked | None = None) -> dict:
    """`mining select`: see the module docstring and docs/formats.md ("Selection"). `options.n`
    is a count here (`n: auto` is chosen first, by `mining.joins.select`).

    `ranking`: `ranked(inputs, options)`, when the caller has it already (`n: auto` measures
    its curve on it first), so that it is not computed twice. `inputs.images_root`: the
    download folder; only photos its index.parquet holds as `ok` (and, with
    `require_full_res`, not only from a `low_res` source) are selected, and the set's paths,
    photo hashes and sources are the index's (without it, `require_full_res` has no index to
    ask and selects as if off)."""
    import pandas as pd

    n = options.n
    if not isinstance(n, int) or n < 1:
        raise UserError(f"--n must be a positive integer, not {n!r}")
    images_root, require_full_res = inputs.images_root, options.require_full_res and inputs.images_root is not None
    r = ranking if ranking is not None else ranked(inputs, options)
    scores, decisions, fingerprint, pid, order = r.scores, r.decisions, r.fingerprint, r.pid, r.order
    confirmed, unclear, drop, nd_stats, risk_stats = r.confirmed, r.unclear, r.drop, r.near_duplicates, r.leak_risk
    missing_images = low_res_skipped = 0
    index = None
    if images_root is not None:
        if not images_root.is_dir():
            raise UserError(f"--images-root {images_root} is not a folder")
        index = imageindex.read(images_root, ["photo_id", "photo_hash", "status", "source", "low_res", "path"]
                                ).to_pandas().set_index("photo_id")
        index = index[index.status == "ok"]
        chosen = []
        for i in order:
            p = int(pid[i])
            rel = index.path.get(p)
            if rel is None or not (images_root / rel).is_file():
                missing_images += 1
            elif require_full_res and bool(index.low_res.get(p)):
                low_res_skipped += 1
            else:
                chosen.append(i)
                if len(chosen) == n:
                    break
        order = np.array(chosen, np.int64)
    available = len(order)
    warning = None
    if n > available:
        warning = f"asked for {n} distractors but only {available} candidates are left; keeping all of them"
        log.warning(warning)
    sel = scores.iloc[order[:n]].reset_index(drop=True)
    sel_ids = sel.photo_id.to_numpy(np.int64)
    meta = load_candidate_meta(inputs.candidates, sel_ids)
    host = inputs.url_host or DEFAULT_HOST
    if index is not None:
        picked = index.loc[sel_ids]
        paths, hashes, sources = list(picked.path), list(picked.photo_hash), list(picked.source)
    else:  # where `mining download` puts them (its key rule), without knowing whether it did
        named = [named_download_url(int(p), sec, url) for p, sec, url in zip(sel_ids, meta.secret, meta.download_url)]
        paths = [image_relpath(int(p), url) for p, url in zip(sel_ids, named)]
        hashes, sources = [image_key(int(p), url) for p, url in zip(sel_ids, named)], [None] * len(paths)
    urls = [photo_url(host, "b", int(srv), int(p), sec, None, None)
            for p, srv, sec in zip(sel_ids, meta.server_id, meta.secret)]
    method_cols = [c for c in scores.columns if c.startswith("score_")]
    method_cols += [c for c in scores.columns if is_score_column(c)]  # each benchmark's part (several)
    frame = pd.DataFrame({
        "rank": np.arange(1, len(sel) + 1, dtype=np.int64),
        "photo_id": sel_ids,
        "photo_hash": hashes,
        "source": pd.array(sources, dtype="string"),
        "path": paths,
        "url": urls,
        "license_name": meta.license_name.to_numpy(),
        "license_url": meta.license_url.to_numpy(),
        "user_nsid": meta.user_nsid.to_numpy(),
        "user_nickname": meta.user_nickname.to_numpy(),
        "score": sel.score.to_numpy(),
        **{c: sel[c].to_numpy() for c in method_cols},
        **({"closest_landmark": sel.closest_landmark.to_numpy()} if "closest_landmark" in sel else {}),
    })
    titles, pages = credit_fields(meta, sel_ids)

    atomic.write_text(out / "distractors.txt", "".join(p + "\n" for p in paths))
    atomic.write_parquet(out / "distractors.parquet", pa.Table.from_pandas(frame, preserve_index=False))
    atomic.write_text(out / "ATTRIBUTION.csv", attribution_csv(frame, titles, pages))
    atomic.write_text(out / "ATTRIBUTION.md", attribution_md(frame, titles, pages))

    licences = pd.Series([licence_label(n, u) for n, u in zip(frame.license_name, frame.license_url)],
                         dtype=object).value_counts().sort_index()
    result = {
        "scores_dir": str(inputs.scores),
        "landmarks_fingerprint": fingerprint,
        "candidates_scored": int(len(pid)),
        "decisions": int(len(decisions)),
        "confirmed_landmark": int(confirmed.size),
        "unclear": int(unclear.size),
        "dropped": int(np.isin(pid, drop).sum()),
        "drop_unclear": bool(options.drop_unclear),
        "missing_images": int(missing_images),
        "low_res_skipped": int(low_res_skipped),
        "require_full_res": bool(require_full_res),
        "n_requested": int(n),
        "n_selected": int(len(frame)),
        "warning": warning,
        "score_min": float(frame.score.min()) if len(frame) else None,
        "score_max": float(frame.score.max()) if len(frame) else None,
        "licences": {str(k): int(v) for k, v in licences.items()},
        "near_duplicates": nd_stats,
        "leak_risk": risk_stats,
    }
    atomic.write_json(out / "stats.json", result)
    return result
