"""The mined-vs-random experiment: retrieval metrics with no / random / mined / all distractors.

Why it never ranks the distractors: a distractor only pushes positives down, so with a
distractor set D the 0-based position of positive p (after junk removal) is its position in
the landmark-only ranking plus #{d ∈ D : s(q, d) > s(q, p)}. Each (query, candidate) is
reduced to a bucket = how many of the query's positive similarities it beats, and any D
needs only, per query, the histogram of its members' buckets.

The histograms are tallied in one streamed pass over the candidates: see `histograms`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow.parquet as pq

from mining.errors import UserError
from mining.files.names import DISTRACTORS, SCORES
from mining.stages.evaluate import bootstrap
from mining.stages.evaluate.histograms import MethodData, Ranking
from mining.stages.evaluate.protocols.setups import KAPPAS, setup_gnd
from mining.retrieval.metrics import positions_to_metrics
from mining.publishing.result import row_label
from mining.publishing.text import pct as _pct
from mining.retrieval.methodstores import rank_order
from mining.files.tables import load_decisions

log = logging.getLogger(__name__)


@dataclass
class SetupBase:
    """Per setup: found positives as (query, landmark-only position, threshold index)."""

    qidx: np.ndarray
    pos: np.ndarray
    thr: np.ndarray
    npos: np.ndarray


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


def evaluate_setups(md: MethodData, bases: dict[str, SetupBase], above: np.ndarray | None,
                    kappas: Sequence[int] = KAPPAS, aps: dict[str, np.ndarray] | None = None) -> dict[str, dict[str, float]]:
    """mAP and mP@K per setup with a distractor set given by its `above` counts
    (`MethodData.above`; None: no distractors). The counts do not depend on the setup.
    `aps`, when given, receives each setup's per-query APs (NaN: no positives)."""
    out = {}
    for setup, base in bases.items():
        pos = base.pos.copy()
        if above is not None:
            pos += above[md.hist_off[base.qidx] + base.thr]
        m, q_aps, pr, _ = positions_to_metrics(base.qidx, pos, base.npos, kappas)
        if aps is not None:
            aps[setup] = q_aps
        res = {"mAP": m}
        res.update({f"mP@{k}": float(v) for k, v in zip(kappas, pr)})
        out[setup] = res
    return out


# ----------------------------------------------------------------------------- the experiment
def top_n(photo_ids: np.ndarray, score: np.ndarray, n: int) -> np.ndarray:
    """The N most distracting ids, in `mining select`'s order (score desc, photo id asc)."""
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
    if not path.is_file():
        raise UserError(f"{path}: {what} not found")
    return pq.read_table(path).to_pandas()


def confirmed_landmarks(decisions: Path | None) -> np.ndarray:
    """Photo ids that reviewers confirmed show a landmark (never distractors)."""
    if decisions is None:
        return np.zeros(0, np.int64)
    df, _ = load_decisions(Path(decisions), kind="review")
    return np.unique(df.loc[df["decision"] == "landmark", "photo_id"].to_numpy(np.int64))


def build_sets(scores_dir: Path, selected_dir: Path, decisions: Path | None, n: int | None,
               seeds: Sequence[int], curve_points: int = 5) -> Sets:
    scores = _read_parquet(Path(scores_dir) / SCORES, "scores (run `mining score`)")
    if "photo_id" not in scores.columns or "score" not in scores.columns:
        raise UserError(f"{scores_dir}/{SCORES}: needs columns photo_id and score")
    bad = confirmed_landmarks(decisions)
    keep = ~np.isin(scores["photo_id"].to_numpy(np.int64), bad)
    scores = scores[keep]
    ids = scores["photo_id"].to_numpy(np.int64)
    total = scores["score"].to_numpy(np.float64)
    pool = np.sort(ids)
    sel = _read_parquet(Path(selected_dir) / DISTRACTORS, "selected distractors (run `mining select`)")
    if "photo_id" not in sel.columns:
        raise UserError(f"{selected_dir}/{DISTRACTORS}: missing column 'photo_id'")
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


def mean_std(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each metric's mean and standard deviation over the random draws."""
    out: dict[str, float] = {}
    for key in runs[0]:
        vals = np.array([r[key] for r in runs], dtype=np.float64)
        out[key] = float(vals.mean())
        out[f"{key}_std"] = float(vals.std(ddof=1)) if vals.size > 1 else 0.0
    return out


def rankings_of(sets: Sets) -> tuple[list[Ranking], dict[str, int]]:
    """The rankings whose prefixes the experiment evaluates, and where each kind sits."""
    prefixes = sorted(set(sets.curve_sizes) | {sets.n})
    rankings = [Ranking(sets.pool, [sets.pool.size]), Ranking(sets.mined, prefixes)]
    where = {"all": 0, "mined": 1}
    for i, r in enumerate(sets.random):
        where[f"random:{i}"] = len(rankings)
        rankings.append(Ranking(r, prefixes))
    for removed, ids in sets.ablation.items():
        where[f"ablation:{removed}"] = len(rankings)
        rankings.append(Ranking(ids, [ids.size]))
    return rankings, where


def evaluate_method(md: MethodData, gnd: Sequence[dict[str, Any]], sets: Sets, setups: Sequence[str],
                    where: dict[str, int], boot: "bootstrap.Spec | None" = None) -> dict[str, Any]:
    """All metrics for one method: results per setup, ablation per setup, curve per setup
    (and, with `boot`, their bootstrap intervals over queries: `ci` per setup).
    `md` was loaded with `rankings_of(sets)`, whose positions are `where`."""
    bases = {s: setup_base(md, gnd, s) for s in setups}
    q_aps: dict[tuple[str, int], dict[str, np.ndarray]] = {}  # (kind, size) -> setup -> per-query AP
    done: dict[tuple[str, int], dict[str, dict[str, float]]] = {}

    def ev(kind: str, size: int) -> dict[str, dict[str, float]]:
        """One prefix's metrics per setup, once: the curve's last point is the N of mined and
        random, so those sets come up twice."""
        if (kind, size) not in done:
            done[kind, size] = evaluate_setups(md, bases, md.above(where[kind], size), aps=q_aps.setdefault((kind, size), {}))
        return done[kind, size]

    n_mined = min(sets.n, len(sets.mined))
    none = evaluate_setups(md, bases, None, aps=q_aps.setdefault(("none", 0), {}))
    mined = ev("mined", sets.n)
    alls = ev("all", sets.pool.size)
    randoms = [ev(f"random:{i}", sets.n) for i in range(len(sets.random))]
    ablation = {removed: ev(f"ablation:{removed}", ids.size) for removed, ids in sets.ablation.items()}
    curve_random = {k: [ev(f"random:{i}", k) for i in range(len(sets.random))] for k in sets.curve_sizes}
    curve_mined = {k: ev("mined", k) for k in sets.curve_sizes}
    out: dict[str, Any] = {"results": {}, "ablation": {}, "curve": {}}
    # ids of a set that this method could not describe, and queries it has no descriptor for (AP 0)
    out["missing"] = {"mined": int(n_mined - md.found(where["mined"], sets.n)),
                      "all": int(sets.pool.size - md.found(where["all"], sets.pool.size)),
                      "queries": int((~md.q_present).sum()), "database": int((~np.isfinite(md.sims_db).any(axis=0)).sum())}
    for s in setups:
        out["results"][s] = {"none": none[s], "random": mean_std([r[s] for r in randoms]) if randoms else None,
                             "mined": mined[s], "all": alls[s]}
        out["ablation"][s] = {removed: r[s] for removed, r in ablation.items()}
        rand = [[r[s]["mAP"] for r in curve_random[k]] for k in sets.curve_sizes]
        out["curve"][s] = {
            "sizes": sets.curve_sizes,
            "random": [float(np.mean(v)) if v else None for v in rand],
            "random_std": [float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for v in rand],
            "mined": [curve_mined[k][s]["mAP"] for k in sets.curve_sizes],
        }
    if boot is not None:
        out["ci"] = {s: _intervals(q_aps, s, sets, boot) for s in setups}
    return out


def _intervals(q_aps: dict[tuple[str, int], dict[str, np.ndarray]], s: str, sets: Sets, boot: "bootstrap.Spec") -> dict[str, Any]:
    """One setup's bootstrap intervals (mining.stages.evaluate.bootstrap) from the per-query APs."""
    seeds = range(len(sets.random))
    return bootstrap.method_intervals(
        q_aps[("none", 0)][s], q_aps[("mined", sets.n)][s], [q_aps[(f"random:{i}", sets.n)][s] for i in seeds],
        q_aps[("all", sets.pool.size)][s],
        {removed: q_aps[(f"ablation:{removed}", ids.size)][s] for removed, ids in sets.ablation.items()},
        [q_aps[("mined", k)][s] for k in sets.curve_sizes],
        [[q_aps[(f"random:{i}", k)][s] for i in seeds] for k in sets.curve_sizes], boot)


def experiment_report(dataset: Any, sets: Sets, n: int | None, seeds: Sequence[int], setups: Sequence[str],
                      methods: Iterable[MethodData], sources: Sequence[str] | None = None,
                      boot: "bootstrap.Spec | None" = bootstrap.Spec()) -> dict[str, Any]:
    """evaluation.json's content: every method (loaded one at a time, with `rankings_of(sets)`)
    evaluated on the same sets."""
    _, where = rankings_of(sets)
    report: dict[str, Any] = {
        "landmarks": {"name": dataset.name, "fingerprint": dataset.fingerprint(), "queries": len(dataset.qimlist),
                      "database": len(dataset.imlist)},
        "n_requested": n, "n": sets.n, "pool": int(sets.pool.size), "mined_source": sets.mined_source,
        "seeds": [int(s) for s in seeds], "setups": list(setups), "kappas": list(KAPPAS),
        "methods": [], "results": {}, "ablation": {}, "curve": {}, "missing": {},
    }
    if boot is not None:  # intervals over queries (mining.stages.evaluate.bootstrap)
        report["bootstrap"], report["ci"] = boot.as_json(), {}
    for i, md in enumerate(methods):
        if md.name in report["results"]:
            raise UserError(f"method {md.name!r} given twice" + (f" (--descriptors {sources[i]})" if sources else ""))
        r = evaluate_method(md, dataset.gnd, sets, setups, where, boot)
        report["methods"].append(md.name)
        for key in ("results", "ablation", "curve", "missing"):
            report[key][md.name] = r[key]
        if "ci" in r:
            report["ci"][md.name] = r["ci"]
        del md
    return report


def _result_rows(report: dict[str, Any], row: str, results: dict[str, Any]) -> list[str]:
    """One row's lines of the table: none, random N, mined N and all, mAP and mP@K per setup."""
    lines = []
    for kind, label in (("none", "none"), ("random", f"random {report['n']}"), ("mined", f"mined {report['n']}"),
                        ("all", f"all {report['pool']}")):
        cells = []
        for s in report["setups"]:
            r = results[s][kind]
            for key in ("mAP", "mP@1", "mP@5", "mP@10"):
                v = _pct(r.get(key)) if r else "–"
                if r and kind == "random" and f"{key}_std" in r:
                    v += f" ± {_pct(r[f'{key}_std'])}"
                cells.append(v)
        lines.append(f"| {row_label(report, row)} | {label} | " + " | ".join(cells) + " |")
    return lines


def markdown_table(report: dict[str, Any]) -> str:
    """The evaluation as Markdown: one row per method × distractor set, mAP and mP@10 per setup."""
    setups = report["setups"]
    lines = [f"# Evaluation: {report['landmarks']['name']} ({report['landmarks']['queries']} queries, "
             f"{report['landmarks']['database']} database images)", "",
             f"N = {report['n']} distractors (pool of {report['pool']} candidates; mined set: {report['mined_source']}); "
             f"random: mean ± std over seeds {report['seeds']}. Values in %.", ""]
    head = "| method | distractors | " + " | ".join(f"{s} mAP | {s} mP@1 | {s} mP@5 | {s} mP@10" for s in setups) + " |"
    lines += [head, "|" + "---|" * (2 + 4 * len(setups))]
    variants = report.get("variants") or {}  # rows of a method with steps added (`cnn-gem+αQE`)
    for m in report["methods"]:
        for row, results in [(m, report["results"][m])] + [(v, x["results"]) for v, x in variants.items()
                                                           if x["method"] == m]:
            lines += _result_rows(report, row, results)
    if report.get("held_out"):
        lines += ["", f"Held out: {', '.join(report['held_out'])}: described and evaluated, never scored, so they "
                  "took no part in choosing the set (docs/protocols.md)."]
    for m, c in (report.get("cascade") or {}).items():
        lines += ["", f"Cascade: {m} described {c['described']:,} of {c['of']:,} candidates (the shortlist and "
                  f"{c['check']:,} drawn at random to check it); a candidate it did not describe counts as below "
                  "every positive, which the check measured (docs/cascade.md)."]
    ex = report.get("expansion")
    if ex:  # mining.stages.evaluate.expansion
        lines += ["", f"+αQE: each query plus its top {ex['aqe']['n']} (weights similarity^{ex['aqe']['alpha']:g}); "
                  f"+DBA: each database image and distractor plus its top {ex['dba']['n']} (similarity^"
                  f"{ex['dba']['alpha']:g}); neighbours searched among the database and that row's distractors; "
                  "not evaluated with all candidates (–)."]
    if any(report["ablation"].get(m, {}).get(s) for m in report["methods"] for s in setups):
        lines += ["", f"## Leave-one-method-out selection (mAP in %, N = {report['n']})", ""]
        removed = sorted({r for m in report["methods"] for s in setups for r in report["ablation"][m][s]})
        lines += ["| evaluated with | setup | mined (all methods) | " + " | ".join(f"without {r}" for r in removed) + " |",
                  "|" + "---|" * (3 + len(removed))]
        for m in report["methods"]:
            for s in setups:
                ab = report["ablation"][m][s]
                lines.append(f"| {row_label(report, m)} | {s} | {_pct(report['results'][m][s]['mined']['mAP'])} | "
                             + " | ".join(_pct(ab[r]["mAP"]) if r in ab else "–" for r in removed) + " |")
    lines += bootstrap.markdown(report)
    return "\n".join(lines) + "\n"
