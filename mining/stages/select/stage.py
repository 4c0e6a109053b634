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

from mining import pins
from mining.files import atomic
from mining.files.names import DISTRACTORS, DISTRACTORS_TXT, REVIEW_QUEUE, SCORES, STATS
from mining.photos import imageindex
from mining.publishing.attribution import attribution_csv, attribution_md, credit_fields, load_candidate_meta
from mining.datasets.benchmarks import is_score_column, run_fingerprint
from mining.errors import UserError
from mining.photos.flickr import DEFAULT_HOST, photo_url
from mining.settings.layout import image_key, image_relpath, named_download_url
from mining.publishing.licences import licence_label
from mining.settings.options import SelectOptions
from mining.retrieval.methodstores import rank_order
from mining.evidence.screening import leakrisk_filter_order, neardup_filter_order
from mining.files import answers
from mining.files.checksums import check_described
from mining.files.tables import load_decisions, read_file, read_table

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """What `mining select` reads: the files of the stages before it."""

    scores: Path  # `mining score`'s folder
    decisions: Path  # decisions.parquet
    candidates: Path  # geofilter's candidates
    landmarks: list[str] | None = None  # [NAME=]GND, as score was given them: refuse other datasets' scores
    images_root: Path | None = None  # the download folder (its index.parquet)
    near_duplicates: Path | None = None  # neardup.parquet
    leak_risk: Path | None = None  # leakrisk.parquet


def load_scores(scores_dir: Path) -> tuple[Any, dict]:
    """scores.parquet as a DataFrame, plus stats.json."""
    import pandas as pd

    table_path, stats_path = scores_dir / SCORES, scores_dir / STATS
    for p in (table_path, stats_path):
        if not p.is_file():
            raise UserError(f"{p} not found (is {scores_dir} the output of `mining score`?)")
    stats = json.loads(stats_path.read_text())
    check_described(scores_dir, STATS, stats.get("files_sha256"))  # one score run's files, not two
    scores: pd.DataFrame = pq.read_table(table_path).to_pandas()
    for col in ("photo_id", "score"):
        if col not in scores.columns:
            raise UserError(f"{table_path} has no column {col!r}")
    return scores, stats


def review_coverage(scores_dir: Path, path: Path, decisions: Any, policy: str) -> dict[str, Any]:
    """How much of the scores' review queue the answers cover. Answers to another queue (their label's
    digest is not this queue's, and they leave some of its photos unanswered) are refused; answers
    that leave photos of this queue unanswered are refused unless `policy` is allow (then counted in
    stats.json and the card): an unreviewed top-ranked photo may show a landmark."""
    queue_path = scores_dir / REVIEW_QUEUE
    if not queue_path.is_file():
        raise UserError(f"{queue_path} not found (is {scores_dir} the whole output of `mining score`?); score again")
    queue = np.unique(read_file(queue_path, ["photo_id"]).column("photo_id").to_numpy(zero_copy_only=False)
                      .astype(np.int64))
    label = answers.read_label(read_table(path, ("photo_id",), "decisions file").schema.metadata)
    digest = answers.queue_digest(queue)
    same = label is not None and label.digest == digest
    missing = np.setdiff1d(queue, decisions.photo_id.to_numpy(np.int64))
    if missing.size and not same:
        raise UserError(f"{path}: answers {label.words() if label else 'an unnamed queue'}, not this run's review "
                        f"queue (photos digest {digest}, {queue_path}): {missing.size} of its {queue.size} photos have "
                        "no answer; import this queue into the review (`mining review import`) and export its answers")
    if missing.size and policy != "allow":
        raise UserError(f"{path}: answers {queue.size - missing.size} of the review queue's {queue.size} photos; "
                        f"{missing.size} (e.g. photo {missing[0]}) have none, and an unreviewed top-ranked photo may "
                        "show a landmark: finish the review and export it again, or keep the partial review with "
                        f"--partial-review allow (counted in selected/{STATS})")
    return {"queue_photos": int(queue.size), "answered": int(queue.size - missing.size),
            "unanswered": int(missing.size), "answers_label_is_this_queue": bool(same), "partial_review": policy}


def check_fingerprints(stats: dict, decisions_fp: str | None, landmarks: Any) -> str | None:
    """Refuse a scores dir / decisions file made for another landmark dataset (or another set
    of benchmarks: `landmarks` as `mining.datasets.benchmarks.as_list` takes them)."""
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
    review: dict


def ranked(inputs: Inputs, options: SelectOptions) -> Ranked:
    """Checked inputs and the ranking select takes its top N from (also what `select: {n: auto}`
    measures the mAP-vs-N curve on): score order minus confirmed landmarks (and unclear ones with
    drop_unclear), near-duplicate and leak-risk rules applied."""
    scores, stats = load_scores(inputs.scores)
    decisions, decisions_fp = load_decisions(inputs.decisions, kind="review")  # never an audit's answers
    fingerprint = check_fingerprints(stats, decisions_fp, inputs.landmarks)
    pid = scores.photo_id.to_numpy(np.int64)
    check_decisions(decisions, pid, list(stats.get("landmarks", [])))
    coverage = review_coverage(inputs.scores, inputs.decisions, decisions, options.partial_review)

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
    return Ranked(scores, decisions, fingerprint, pid, order, confirmed, unclear, drop, nd_stats, risk_stats, coverage)


def run(*, inputs: Inputs, out: Path, options: SelectOptions, url_host: str | None = None,
        ranking: Ranked | None = None) -> dict:
    """`mining select`: see the module docstring and docs/formats.md ("Selection"). `options.n`
    is a count here (`n: auto` is chosen first, by `mining.auto_n.select`). `url_host`: the
    image host of the URLs (default live.staticflickr.com).

    `ranking`: `ranked(inputs, options)`, when the caller has it already (`n: auto` measures
    its curve on it first), so that it is not computed twice. `inputs.images_root`: the
    download folder; only photos its index.parquet holds as `ok` (and, with
    `require_full_res`, not only from a `low_res` source) are selected, and the set's paths,
    photo hashes and sources are the index's (without it, `require_full_res` has no index to
    ask and selects as if off)."""
    if not isinstance(options.n, int) or options.n < 1:
        raise UserError(f"--n must be a positive integer, not {options.n!r}")
    r = ranking if ranking is not None else ranked(inputs, options)
    chosen = choose(r, options.n, inputs.images_root, options.require_full_res)
    warning = None
    if options.n > len(chosen.order):
        warning = (f"asked for {options.n} distractors but only {len(chosen.order)} candidates are left; "
                   "keeping all of them")
        log.warning(warning)
    table, titles, pages = frame(r.scores, chosen, options.n, inputs.candidates, url_host or DEFAULT_HOST)
    write(out, table, titles, pages)
    result = summary(inputs.scores, r, chosen, table, options, warning) | {"pins": pins.fingerprint()}
    atomic.write_json(out / STATS, result)
    return result


@dataclass(frozen=True)
class Chosen:
    """The rows of a ranking that select keeps, best first, and the download index they were
    checked against."""

    order: np.ndarray  # indexes the ranking's `pid`/`scores`
    index: Any = None  # the download's `ok` images by photo id (path, photo_hash, source); None: no --images-root
    require_full_res: bool = False  # low-resolution images were left out
    missing_images: int = 0
    low_res_skipped: int = 0


def choose(r: Ranked, n: int, images_root: Path | None, require_full_res: bool) -> Chosen:
    """The ranking's first `n` whose image the download holds (`ok` in its index.parquet and on
    disk; with `require_full_res`, not only from a `low_res` source); without `images_root`, the
    whole ranking."""
    if images_root is None:
        return Chosen(r.order)
    if not images_root.is_dir():
        raise UserError(f"--images-root {images_root} is not a folder")
    index = imageindex.read(images_root, ["photo_id", "photo_hash", "status", "source", "low_res", "path"]
                            ).to_pandas().set_index("photo_id")
    index = index[index.status == "ok"]
    picked, missing, low_res = [], 0, 0
    for i in r.order:
        p = int(r.pid[i])
        rel = index.path.get(p)
        if rel is None or not (images_root / rel).is_file():
            missing += 1
        elif require_full_res and bool(index.low_res.get(p)):
            low_res += 1
        else:
            picked.append(i)
            if len(picked) == n:
                break
    return Chosen(np.array(picked, np.int64), index, require_full_res, missing, low_res)


def frame(scores: Any, chosen: Chosen, n: int, candidates: Path, host: str) -> tuple[Any, list, list]:
    """(distractors.parquet's rows, the photos' titles, their pages) of the first `n` chosen."""
    import pandas as pd

    sel = scores.iloc[chosen.order[:n]].reset_index(drop=True)
    sel_ids = sel.photo_id.to_numpy(np.int64)
    meta = load_candidate_meta(candidates, sel_ids)
    paths, hashes, sources = _locations(sel_ids, meta, chosen.index)
    urls = [photo_url(host, "b", int(srv), int(p), sec, None, None)
            for p, srv, sec in zip(sel_ids, meta.server_id, meta.secret)]
    method_cols = [c for c in scores.columns if c.startswith("score_")]
    method_cols += [c for c in scores.columns if is_score_column(c)]  # each benchmark's part (several)
    table = pd.DataFrame({
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
    return table, titles, pages


def _locations(ids: np.ndarray, meta: Any, index: Any) -> tuple[list, list, list]:
    """(paths, photo hashes, sources) of the photos: the download index's, or without one where
    `mining download` puts them (its key rule), without knowing whether it did."""
    if index is not None:
        picked = index.loc[ids]
        return list(picked.path), list(picked.photo_hash), list(picked.source)
    named = [named_download_url(int(p), sec, url) for p, sec, url in zip(ids, meta.secret, meta.download_url)]
    paths = [image_relpath(int(p), url) for p, url in zip(ids, named)]
    return paths, [image_key(int(p), url) for p, url in zip(ids, named)], [None] * len(paths)


def write(out: Path, table: Any, titles: list, pages: list) -> None:
    """OUT/distractors.txt, distractors.parquet, ATTRIBUTION.csv and ATTRIBUTION.md."""
    atomic.write_text(out / DISTRACTORS_TXT, "".join(p + "\n" for p in table.path))
    atomic.write_parquet(out / DISTRACTORS, pa.Table.from_pandas(table, preserve_index=False))
    atomic.write_text(out / "ATTRIBUTION.csv", attribution_csv(table, titles, pages))
    atomic.write_text(out / "ATTRIBUTION.md", attribution_md(table, titles, pages))


def summary(scores_dir: Path, r: Ranked, chosen: Chosen, table: Any, options: SelectOptions,
            warning: str | None) -> dict[str, Any]:
    """stats.json: what was dropped, skipped and kept, and the kept set's scores and licences."""
    import pandas as pd

    licences = pd.Series([licence_label(n, u) for n, u in zip(table.license_name, table.license_url)],
                         dtype=object).value_counts().sort_index()
    return {
        "scores_dir": str(scores_dir),
        "landmarks_fingerprint": r.fingerprint,
        "candidates_scored": int(len(r.pid)),
        "decisions": int(len(r.decisions)),
        "confirmed_landmark": int(r.confirmed.size),
        "unclear": int(r.unclear.size),
        "dropped": int(np.isin(r.pid, r.drop).sum()),
        "drop_unclear": bool(options.drop_unclear),
        "missing_images": int(chosen.missing_images),
        "low_res_skipped": int(chosen.low_res_skipped),
        "require_full_res": bool(chosen.require_full_res),
        "n_requested": int(options.n),
        "n_selected": int(len(table)),
        "warning": warning,
        "score_min": float(table.score.min()) if len(table) else None,
        "score_max": float(table.score.max()) if len(table) else None,
        "licences": {str(k): int(v) for k, v in licences.items()},
        "near_duplicates": r.near_duplicates,
        "leak_risk": r.leak_risk,
        "review": r.review,
    }
