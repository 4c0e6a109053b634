"""The mined-vs-random experiment: retrieval metrics with no / random / mined / all distractors.

Why it never ranks the distractors: a distractor only pushes positives down, so with a
distractor set D the 0-based position of positive p (after junk removal) is its position in
the landmark-only ranking plus #{d ∈ D : s(q, d) > s(q, p)}. Streaming the candidate
similarities once, each (query, candidate) is reduced to a bucket = how many of the query's
positive similarities it beats (`searchsorted`); any D then costs one gather + bincount per
query, exactly. Ties rank the landmark image first, as a stable sort of [database, D] does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mining.errors import UserError
from mining.evaluate.metrics import positions_to_metrics
from mining.evaluate.protocols import setup_gnd

log = logging.getLogger(__name__)

KAPPAS = (1, 5, 10)


@dataclass
class MethodData:
    """One method's similarities, reduced to what any distractor set needs."""

    name: str
    sims_db: np.ndarray  # float32 (n queries, n database), nan where not described
    q_present: np.ndarray  # bool (n queries,)
    thresholds: list[np.ndarray]  # per query: sorted unique similarities of its easy ∪ hard positives
    cand_ids: np.ndarray  # int64 photo ids, store order
    buckets: np.ndarray  # (n queries, n candidates): #thresholds strictly below the candidate's similarity
    _order: np.ndarray | None = field(default=None, repr=False)  # argsort of cand_ids (lazy)
    _sorted: np.ndarray | None = field(default=None, repr=False)


@dataclass
class SetupBase:
    """Per setup: found positives as (query, landmark-only position, threshold index)."""

    qidx: np.ndarray
    pos: np.ndarray
    thr: np.ndarray
    npos: np.ndarray


def reduce_method(
    name: str,
    dataset: Any,
    query_ids: Sequence[str],
    q_matrix_sims_db: tuple[list[str], np.ndarray],
    candidate_blocks: Any,
    progress: bool = False,
) -> MethodData:
    """Build MethodData from query ids, (database ids, sims) and an iterator of (candidate ids, sims)."""
    from mining.score import parse_ids

    nq, ndb = len(dataset.qimlist), len(dataset.imlist)
    q_lookup = {n: i for i, n in enumerate(dataset.qimlist)}
    rows = []
    for i in query_ids:
        if i not in q_lookup:
            raise UserError(f"{name}: query store id {i!r} is not a query of {dataset.path.name}")
        rows.append(q_lookup[i])
    rows_arr = np.array(rows, dtype=np.int64)
    db_lookup = {n: i for i, n in enumerate(dataset.imlist)}
    db_ids, sims = q_matrix_sims_db
    cols = []
    for i in db_ids:
        if i not in db_lookup:
            raise UserError(f"{name}: database store id {i!r} is not in {dataset.path.name}'s imlist")
        cols.append(db_lookup[i])
    sims_db = np.full((nq, ndb), np.nan, dtype=np.float32)
    if rows and cols:
        sims_db[np.ix_(rows_arr, np.array(cols, dtype=np.int64))] = sims
    q_present = np.zeros(nq, dtype=bool)
    q_present[rows_arr] = True
    thresholds = []
    for q in range(nq):
        pos = dataset.positives(q)
        s = sims_db[q, pos] if pos else np.zeros(0, np.float32)
        thresholds.append(np.unique(s[np.isfinite(s)]).astype(np.float32))
    dtype = np.uint16 if max((t.size for t in thresholds), default=0) < np.iinfo(np.uint16).max else np.uint32
    id_parts, bucket_parts = [], []
    for ids, block in candidate_blocks:
        b = np.zeros((nq, len(ids)), dtype=dtype)
        for r, q in enumerate(rows):
            b[q] = np.searchsorted(thresholds[q], block[r], side="left")
        id_parts.append(parse_ids(ids, f"{name}/candidates"))
        bucket_parts.append(b)
    cand_ids = np.concatenate(id_parts) if id_parts else np.zeros(0, np.int64)
    buckets = np.concatenate(bucket_parts, axis=1) if bucket_parts else np.zeros((nq, 0), dtype)
    return MethodData(name, sims_db, q_present, thresholds, cand_ids, buckets)


def load_method(method_dir: Path, dataset: Any, progress: bool = False) -> MethodData:
    """Stream DESC/<method>/{queries,database,candidates} into MethodData."""
    from mining.descriptors import iter_similarities, open_store
    from mining.progress import bar

    stores = {}
    for part in ("queries", "database", "candidates"):
        if not (method_dir / part).is_dir():
            raise UserError(f"{method_dir}: missing {part}/ store (expected DESC/<method>/{{queries,database,candidates}})")
        stores[part] = open_store(method_dir / part)
    q_ids = stores["queries"].ids()
    db_ids: list[str] = []
    db_blocks = []
    for ids, s in iter_similarities(stores["queries"], stores["database"]):
        db_ids.extend(ids)
        db_blocks.append(s)
    db_sims = np.concatenate(db_blocks, axis=1) if db_blocks else np.zeros((len(q_ids), 0), np.float32)
    cands = iter_similarities(stores["queries"], stores["candidates"])
    if progress:
        cands = bar(cands, total=len(stores["candidates"].shard_names()), desc=f"evaluate {stores['candidates'].method}", unit="shard")
    return reduce_method(stores["candidates"].method, dataset, q_ids, (db_ids, db_sims), cands)


def setup_base(md: MethodData, gnd: Sequence[dict[str, Any]], setup: str) -> SetupBase:
    """Landmark-only positions of every found positive, junk removed, for one setup."""
    sg = setup_gnd(gnd, setup)
    nq, ndb = md.sims_db.shape
    npos = np.array([g["ok"].size for g in sg], dtype=np.int64)
    q_parts, p_parts, t_parts = [], [], []
    for q in range(nq):
        if npos[q] == 0 or not md.q_present[q]:
            continue
        s = md.sims_db[q]
        present = np.flatnonzero(np.isfinite(s))
        order = present[np.argsort(-s[present], kind="stable")]
        lab = np.zeros(ndb, dtype=np.int8)
        lab[sg[q]["junk"][sg[q]["junk"] < ndb]] = 2
        lab[sg[q]["ok"][sg[q]["ok"] < ndb]] = 1
        ranked = lab[order]
        is_junk = ranked == 2
        junk_before = np.cumsum(is_junk) - is_junk
        hit = np.flatnonzero(ranked == 1)
        q_parts.append(np.full(hit.size, q, dtype=np.int64))
        p_parts.append(hit - junk_before[hit])
        t_parts.append(np.searchsorted(md.thresholds[q], s[order[hit]], side="left"))
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64)  # noqa: E731
    return SetupBase(cat(q_parts), cat(p_parts), cat(t_parts), npos)


def columns_of(md: MethodData, photo_ids: np.ndarray) -> np.ndarray:
    """Candidate columns of this method's store holding the given photo ids (absent ones dropped)."""
    if md.cand_ids.size == 0:
        return np.zeros(0, np.int64)
    if md._order is None or md._sorted is None:
        md._order = np.argsort(md.cand_ids, kind="stable")
        md._sorted = md.cand_ids[md._order]
    order, sorted_ids = md._order, md._sorted
    photo_ids = np.asarray(photo_ids, dtype=np.int64)
    idx = np.minimum(np.searchsorted(sorted_ids, photo_ids), sorted_ids.size - 1)
    return order[idx[sorted_ids[idx] == photo_ids]]


def evaluate_setups(md: MethodData, bases: dict[str, SetupBase], cols: np.ndarray,
                    kappas: Sequence[int] = KAPPAS) -> dict[str, dict[str, float]]:
    """mAP and mP@K per setup with the candidates in `cols` appended to the landmark database.

    The per-query counts of distractors above each positive similarity do not depend on the
    setup, so they are computed once and shared.
    """
    queries = np.unique(np.concatenate([b.qidx for b in bases.values()])) if bases else []
    above = {}
    for q in queries:
        hist = np.bincount(md.buckets[q][cols], minlength=md.thresholds[q].size + 1)
        above[int(q)] = hist.sum() - np.cumsum(hist)  # above[k] = #{d: bucket > k} = #{d: s > threshold k}
    out = {}
    for setup, base in bases.items():
        pos = base.pos.copy()
        for q in np.unique(base.qidx):
            sel = base.qidx == q
            pos[sel] += above[int(q)][base.thr[sel]]
        m, _, pr, _ = positions_to_metrics(base.qidx, pos, base.npos, kappas)
        res = {"mAP": m}
        res.update({f"mP@{k}": float(v) for k, v in zip(kappas, pr)})
        out[setup] = res
    return out


def evaluate_columns(md: MethodData, base: SetupBase, cols: np.ndarray, kappas: Sequence[int] = KAPPAS) -> dict[str, float]:
    """mAP and mP@K for one setup (see `evaluate_setups`)."""
    return evaluate_setups(md, {"_": base}, cols, kappas)["_"]


# ----------------------------------------------------------------------------- the experiment
def top_n(photo_ids: np.ndarray, score: np.ndarray, n: int) -> np.ndarray:
    """The N most distracting ids, in `mining select`'s order (score desc, photo id asc)."""
    from mining.select import rank_order

    return photo_ids[rank_order(photo_ids, score)[: max(0, n)]]


@dataclass
class Sets:
    """The distractor sets (photo ids) every method is evaluated with."""

    n: int
    pool: np.ndarray  # all candidates minus confirmed landmark images
    random: list[np.ndarray]  # one full permutation of the pool per seed (prefixes = nested sets)
    mined: np.ndarray  # ranked: prefixes are the mined sets of smaller N
    mined_source: str
    ablation: dict[str, np.ndarray]  # method removed -> its top N
    curve_sizes: list[int]


def _read_parquet(path: Path, what: str) -> Any:
    import pyarrow.parquet as pq

    if not path.is_file():
        raise UserError(f"{path}: {what} not found")
    return pq.read_table(path).to_pandas()


def confirmed_landmarks(decisions: Path | None) -> np.ndarray:
    """Photo ids that reviewers confirmed show a landmark (never distractors)."""
    from mining.select import load_decisions

    if decisions is None:
        return np.zeros(0, np.int64)
    df, _ = load_decisions(Path(decisions))
    return np.unique(df.loc[df["decision"] == "landmark", "photo_id"].to_numpy(np.int64))


def build_sets(scores_dir: Path, selected_dir: Path, decisions: Path | None, n: int | None,
               seeds: Sequence[int], curve_points: int = 5) -> Sets:
    scores = _read_parquet(Path(scores_dir) / "scores.parquet", "scores (run `mining score`)")
    if "photo_id" not in scores.columns or "score" not in scores.columns:
        raise UserError(f"{scores_dir}/scores.parquet: needs columns photo_id and score")
    bad = confirmed_landmarks(decisions)
    keep = ~np.isin(scores["photo_id"].to_numpy(np.int64), bad)
    scores = scores[keep]
    ids = scores["photo_id"].to_numpy(np.int64)
    total = scores["score"].to_numpy(np.float64)
    pool = np.sort(ids)
    sel = _read_parquet(Path(selected_dir) / "distractors.parquet", "selected distractors (run `mining select`)")
    if "photo_id" not in sel.columns:
        raise UserError(f"{selected_dir}/distractors.parquet: missing column 'photo_id'")
    if "rank" in sel.columns:
        sel = sel.sort_values("rank", kind="stable")
    elif "score" in sel.columns:
        sel = sel.sort_values(["score", "photo_id"], ascending=[False, True], kind="stable")
    selected = sel["photo_id"].to_numpy(np.int64)
    if n is not None and n < 0:
        raise UserError("--n must be ≥ 0")
    n_req = len(selected) if n is None else int(n)
    n_eff = min(n_req, pool.size)
    if n_req <= len(selected):
        mined, source = selected, "selected"
    else:  # a bigger N than select kept: the same rule, applied to the scores
        mined, source = top_n(ids, total, n_eff), "reselected from scores (N > selected set)"
    rngs = [np.random.default_rng(int(s)) for s in seeds]
    random = [r.permutation(pool) for r in rngs]
    ablation = {}
    for col in scores.columns:
        if col.startswith("score_"):
            ablation[col[len("score_"):]] = top_n(ids, total - scores[col].to_numpy(np.float64), n_eff)
    sizes = sorted({int(round(n_eff * f)) for f in np.geomspace(1 / 2 ** (curve_points - 1), 1, curve_points)} | {0, n_eff})
    return Sets(n_eff, pool, random, mined, source, ablation, [s for s in sizes if s <= n_eff])


def _mean_std(runs: list[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in runs[0]:
        vals = np.array([r[key] for r in runs], dtype=np.float64)
        out[key] = float(vals.mean())
        out[f"{key}_std"] = float(vals.std(ddof=1)) if vals.size > 1 else 0.0
    return out


def evaluate_method(md: MethodData, gnd: Sequence[dict[str, Any]], sets: Sets, setups: Sequence[str]) -> dict[str, Any]:
    """All metrics for one method: results per setup, ablation per setup, curve per setup."""
    n = sets.n
    bases = {s: setup_base(md, gnd, s) for s in setups}
    ev = lambda ids: evaluate_setups(md, bases, columns_of(md, ids))  # noqa: E731
    cols_mined = columns_of(md, sets.mined[:n])
    cols_all = columns_of(md, sets.pool)
    none = evaluate_setups(md, bases, np.zeros(0, np.int64))
    mined = evaluate_setups(md, bases, cols_mined)
    alls = evaluate_setups(md, bases, cols_all)
    randoms = [ev(r[:n]) for r in sets.random]
    ablation = {removed: ev(ids) for removed, ids in sets.ablation.items()}
    curve_random = {k: [ev(r[:k]) for r in sets.random] for k in sets.curve_sizes}
    curve_mined = {k: ev(sets.mined[:k]) for k in sets.curve_sizes}
    out: dict[str, Any] = {"results": {}, "ablation": {}, "curve": {}}
    # ids of a set that this method could not describe, and queries it has no descriptor for (AP 0)
    out["missing"] = {"mined": int(min(n, len(sets.mined)) - cols_mined.size), "all": int(sets.pool.size - cols_all.size),
                      "queries": int((~md.q_present).sum()), "database": int((~np.isfinite(md.sims_db).any(axis=0)).sum())}
    for s in setups:
        out["results"][s] = {"none": none[s], "random": _mean_std([r[s] for r in randoms]) if randoms else None,
                             "mined": mined[s], "all": alls[s]}
        out["ablation"][s] = {removed: r[s] for removed, r in ablation.items()}
        rand = [[r[s]["mAP"] for r in curve_random[k]] for k in sets.curve_sizes]
        out["curve"][s] = {
            "sizes": sets.curve_sizes,
            "random": [float(np.mean(v)) if v else None for v in rand],
            "random_std": [float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for v in rand],
            "mined": [curve_mined[k][s]["mAP"] for k in sets.curve_sizes],
        }
    return out


def run_evaluate(landmarks: Path, descriptors: Sequence[Path], scores_dir: Path, selected_dir: Path,
                 decisions: Path | None, out: Path, n: int | None = None, seeds: Sequence[int] = (0, 1, 2),
                 setups: Sequence[str] = ("medium", "hard"), progress: bool = True) -> dict[str, Any]:
    """`mining evaluate`: write OUT/evaluation.json and OUT/evaluation.md; return the JSON."""
    import json
    import time

    from mining import atomic
    from mining.landmarks import load_landmarks

    t0 = time.perf_counter()
    if not descriptors:
        raise UserError("give at least one --descriptors DESC/<method> folder")
    for s in setups:
        setup_gnd([], s)  # validates the name
    dataset = load_landmarks(landmarks)
    stats_path = Path(scores_dir) / "stats.json"
    if stats_path.is_file():
        fp = json.loads(stats_path.read_text()).get("landmarks_fingerprint")
        if fp and fp != dataset.fingerprint():
            raise UserError(f"{stats_path}: scores were computed for other landmarks (fingerprint {fp} ≠ {dataset.fingerprint()})")
    sets = build_sets(Path(scores_dir), Path(selected_dir), decisions, n, seeds)
    report: dict[str, Any] = {
        "landmarks": {"name": dataset.name, "fingerprint": dataset.fingerprint(), "queries": len(dataset.qimlist),
                      "database": len(dataset.imlist)},
        "n_requested": n, "n": sets.n, "pool": int(sets.pool.size), "mined_source": sets.mined_source,
        "seeds": [int(s) for s in seeds], "setups": list(setups), "kappas": list(KAPPAS),
        "methods": [], "results": {}, "ablation": {}, "curve": {}, "missing": {},
    }
    for d in descriptors:
        md = load_method(Path(d), dataset, progress=progress)
        if md.name in report["results"]:
            raise UserError(f"method {md.name!r} given twice (--descriptors {d})")
        r = evaluate_method(md, dataset.gnd, sets, setups)
        report["methods"].append(md.name)
        for key in ("results", "ablation", "curve", "missing"):
            report[key][md.name] = r[key]
        del md
    report["seconds"] = round(time.perf_counter() - t0, 3)
    out = Path(out)
    atomic.write_json(out / "evaluation.json", report)
    atomic.write_text(out / "evaluation.md", markdown_table(report))
    return report


def _pct(v: Any) -> str:
    return "–" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{100 * v:.2f}"


def markdown_table(report: dict[str, Any]) -> str:
    """The evaluation as Markdown: one row per method × distractor set, mAP and mP@10 per setup."""
    setups = report["setups"]
    lines = [f"# Evaluation: {report['landmarks']['name']} ({report['landmarks']['queries']} queries, "
             f"{report['landmarks']['database']} database images)", "",
             f"N = {report['n']} distractors (pool of {report['pool']} candidates; mined set: {report['mined_source']}); "
             f"random: mean ± std over seeds {report['seeds']}. Values in %.", ""]
    head = "| method | distractors | " + " | ".join(f"{s} mAP | {s} mP@1 | {s} mP@5 | {s} mP@10" for s in setups) + " |"
    lines += [head, "|" + "---|" * (2 + 4 * len(setups))]
    for m in report["methods"]:
        for kind, label in (("none", "none"), ("random", f"random {report['n']}"), ("mined", f"mined {report['n']}"),
                            ("all", f"all {report['pool']}")):
            cells = []
            for s in setups:
                r = report["results"][m][s][kind]
                for key in ("mAP", "mP@1", "mP@5", "mP@10"):
                    v = _pct(r.get(key)) if r else "–"
                    if r and kind == "random" and f"{key}_std" in r:
                        v += f" ± {_pct(r[f'{key}_std'])}"
                    cells.append(v)
            lines.append(f"| {m} | {label} | " + " | ".join(cells) + " |")
    if any(report["ablation"].get(m, {}).get(s) for m in report["methods"] for s in setups):
        lines += ["", f"## Leave-one-method-out selection (mAP in %, N = {report['n']})", ""]
        removed = sorted({r for m in report["methods"] for s in setups for r in report["ablation"][m][s]})
        lines += ["| evaluated with | setup | mined (all methods) | " + " | ".join(f"without {r}" for r in removed) + " |",
                  "|" + "---|" * (3 + len(removed))]
        for m in report["methods"]:
            for s in setups:
                ab = report["ablation"][m][s]
                lines.append(f"| {m} | {s} | {_pct(report['results'][m][s]['mined']['mAP'])} | "
                             + " | ".join(_pct(ab[r]["mAP"]) if r in ab else "–" for r in removed) + " |")
    return "\n".join(lines) + "\n"
