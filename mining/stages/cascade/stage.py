"""The cascade: an expensive method described only for the candidates that cheaper methods
rank high for some landmark (the shortlist), and a seeded random sample of the others (the
check) that measures what the shortlist missed.

Why leaving a candidate out is exact when it is far: its score for a method is the share of
positives it outranks (docs/architecture.md "The distractor score"), and its effect on a query's
AP is to push down the positives below it. A candidate below every positive of every query adds
nothing to either. The cascade assumes this of every candidate off the shortlist; `run_check`
measures the assumption on the check sample: the share of the method's score that lies off the
shortlist (with a one-sided upper bound), refused above `max_missed`. score and evaluate then read the cascaded store as they read any store: a
candidate it lacks counts for nothing.

- `run_shortlist`: the `by` methods' stores → SHORTLIST/shortlist.parquet (photo_id, check) and
  SHORTLIST/shortlist.json. Per `by` method and landmark: the `shortlist` candidates of highest
  similarity to any of the landmark's queries (ties: lower photo id first); their union, then
  `check` more drawn from the rest with `seed`.
- `run_check`: each cascaded method's stores + the shortlist → OUT/check.json (per method: the
  check sample described, how many outrank a positive, and the share of the method's score that
  lies off the shortlist, each with an upper bound; refused above `max_missed`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from mining.console.progress import bar as progress_bar
from mining.datasets.benchmarks import as_list, load_all, qualify
from mining.errors import UserError
from mining.files import atomic
from mining.files.names import CASCADE_CHECK, SHORTLIST, SHORTLIST_STATS
from mining.files.tables import load_shortlist
from mining.methods import get_method
from mining.publishing.leakbound import clopper_pearson_upper
from mining.retrieval.counting import Counters
from mining.retrieval.descriptors import open_store
from mining.retrieval.methodstores import open_method
from mining.settings.options import CascadeOptions

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- the shortlist
def top_per_landmark(method_dir: Path, benchmarks: Sequence, datasets: Sequence, k: int,
                     progress: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per landmark (`<benchmark>/<name>` with several), the photo ids of the method's `k`
    candidates most similar to any of its queries (similarity desc, photo id asc), and every
    candidate id the method has."""
    several = len(benchmarks) > 1
    out: dict[str, np.ndarray] = {}
    pool = np.zeros(0, np.int64)
    for b, ds in zip(benchmarks, datasets):
        stores = open_method(method_dir, benchmark=b.name if several else None, spatial=False,
                             method_of=get_method)
        rows = stores.landmark_similarities(ds).query_index  # dataset query of each query-store row
        groups = {lm: np.flatnonzero(np.isin(rows, [ds.qimlist.index(q) for q in qs]))
                  for lm, qs in ds.landmark_queries().items()}
        best = {lm: (np.zeros(0, np.float32), np.zeros(0, np.int64)) for lm in groups}
        ids_all = stores.candidate_ids()
        pool = np.union1d(pool, ids_all)
        bar = progress_bar(total=len(ids_all), unit="cand", desc=f"shortlist {stores.name}", disable=not progress,
                           mininterval=2)
        at = 0
        for ids, sims in stores.candidate_similarities():
            pid = ids_all[at:at + len(ids)]
            at += len(ids)
            for lm, r in groups.items():
                if not r.size:
                    continue
                s = np.concatenate([best[lm][0], np.max(sims[r], axis=0).astype(np.float32)])
                p = np.concatenate([best[lm][1], pid])
                keep = np.lexsort((p, -s))[:k]
                best[lm] = (s[keep], p[keep])
            bar.update(len(ids))
        bar.close()
        for lm, (_, p) in best.items():
            out[qualify(b.name, lm, several)] = np.sort(p)
    return out, pool


def run_shortlist(*, landmarks: Sequence[str], descriptors: Sequence[Path], out: Path, options: CascadeOptions,
                  progress: bool = True) -> dict[str, Any]:
    """`mining cascade shortlist`: the `by` methods' stores (`descriptors`, one DESC/<method>
    folder each) → OUT/shortlist.parquet and OUT/shortlist.json."""
    if not descriptors:
        raise UserError("cascade shortlist: give the cheaper methods' stores (--descriptors DESC/<method> ...)")
    benchmarks = as_list(landmarks)
    datasets = load_all(benchmarks)
    chosen: set[int] = set()
    per_method: dict[str, Any] = {}
    pool = np.zeros(0, np.int64)
    for d in descriptors:
        tops, ids = top_per_landmark(Path(d), benchmarks, datasets, options.shortlist, progress)
        pool = np.union1d(pool, ids)
        mine = set(np.concatenate(list(tops.values())).tolist()) if tops else set()
        per_method[Path(d).name] = {"candidates": int(ids.size), "shortlisted": len(mine)}
        chosen |= mine
    short = np.array(sorted(chosen), np.int64)
    rest = np.setdiff1d(pool, short)
    n_check = min(options.check, rest.size)
    check = np.sort(np.random.default_rng(options.seed).choice(rest, n_check, replace=False)) if n_check else rest[:0]
    photo_id = np.concatenate([short, check])
    order = np.argsort(photo_id, kind="stable")
    is_check = np.concatenate([np.zeros(short.size, bool), np.ones(check.size, bool)])
    out.mkdir(parents=True, exist_ok=True)
    table = pa.table({"photo_id": pa.array(photo_id[order], pa.int64()), "check": pa.array(is_check[order])})
    atomic.write_parquet(out / SHORTLIST, table)
    stats = {
        "candidates": int(pool.size), "shortlisted": int(short.size), "check": int(check.size),
        "described": int(photo_id.size), "share": round(photo_id.size / pool.size, 6) if pool.size else 0.0,
        "per_landmark": options.shortlist, "landmarks": sum(len(ds.landmarks) for ds in datasets),
        "by": per_method, "methods": options.methods, "seed": options.seed,
    }
    atomic.write_json(out / SHORTLIST_STATS, stats)
    return stats


# ----------------------------------------------------------------------------- the check
def below_positive_scores(method_dir: Path, benchmarks: Sequence, datasets: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Every candidate of the method's store (photo ids, store order) and its score by this method
    alone: Σ_q frac(d; q), the share of q's positives it outranks, a tie counting one half
    (docs/architecture.md "The distractor score"); the similarities are the score's (+SP when
    the stores keep keypoints), and so is the count (`mining.retrieval.counting`). With several
    benchmarks, the sum over them."""
    several = len(benchmarks) > 1
    total: np.ndarray | None = None
    ids_all = np.zeros(0, np.int64)
    for b, ds in zip(benchmarks, datasets):
        stores = open_method(method_dir, benchmark=b.name if several else None, spatial=None, method_of=get_method)
        positives, _ = stores.landmark_similarities(ds).positives(ds)  # per query-store row
        rows = np.arange(len(positives), dtype=np.int64)
        counters = Counters.build(positives, rows, np.zeros(rows.size, np.int64))  # one group: the method's sum
        ids_all = stores.candidate_ids()
        score = np.zeros(ids_all.size)
        at = 0
        for ids, sims in stores.candidate_similarities():
            n = len(ids)
            counters.count_block(np.ascontiguousarray(sims.T, dtype=np.float32), 0, n, np.zeros(n, np.int64),
                                 score[at:at + n], np.zeros((1, 1)))
            at += n
        total = score if total is None else total + score
    return ids_all, total if total is not None else np.zeros(0)


def missed_share(method_dir: Path, benchmarks: Sequence, datasets: Sequence, check_ids: np.ndarray,
                 off_shortlist: int, options: CascadeOptions) -> dict[str, Any]:
    """What the shortlist missed for one cascaded method, from its check sample: the share of
    check candidates that outrank some positive (`escaped`, with a Clopper–Pearson bound), and
    the share of the method's whole score that lies off the shortlist (`missed`: the check
    sample's mean score times the `off_shortlist` candidates, over that plus the shortlist's
    score), with a seeded bootstrap bound on the mean."""
    ids, score = below_positive_scores(method_dir, benchmarks, datasets)
    is_check = np.isin(ids, check_ids)
    checked = score[is_check]
    on = float(score[~is_check].sum())
    n = checked.size
    escaped = int(np.count_nonzero(checked > 0))
    if n:
        rng = np.random.default_rng(options.seed)
        means = np.stack([checked[rng.integers(0, n, n)].mean() for _ in range(BOOTSTRAP)])
        upper_mean = float(np.quantile(means, options.confidence))
    mean = float(checked.mean()) if n else 0.0

    def share(m: float) -> float:
        off = m * off_shortlist
        return off / (off + on) if off + on > 0 else 0.0

    return {"described": int(n), "escaped": escaped, "escaped_rate": round(escaped / n, 6) if n else None,
            "escaped_upper": round(clopper_pearson_upper(escaped, n, options.confidence), 6) if n else 1.0,
            "off_shortlist": int(off_shortlist), "score_on_shortlist": round(on, 6),
            "missed": round(share(mean), 6), "missed_upper": round(share(upper_mean), 6) if n else 1.0}


BOOTSTRAP = 2000  # resamples of the check sample's mean score


def run_check(*, landmarks: Sequence[str], descriptors: Sequence[Path], shortlist: Path, out: Path,
              options: CascadeOptions) -> dict[str, Any]:
    """`mining cascade check`: each cascaded method's stores (`descriptors`) + the shortlist →
    OUT/check.json; refuses a method whose missed share's upper bound exceeds `max_missed`."""
    benchmarks = as_list(landmarks)
    datasets = load_all(benchmarks)
    ids, is_check = load_shortlist(shortlist)
    check_ids = ids[is_check]
    result: dict[str, Any] = {"shortlist": str(shortlist), "check": int(check_ids.size),
                              "max_missed": options.max_missed, "confidence": options.confidence, "methods": {}}
    failed = []
    for d in descriptors:
        name = Path(d).name
        cascade = open_store(Path(d) / "candidates").info.get("cascade") or {}
        if "of" not in cascade:
            raise UserError(f"{d}/candidates: not described on a shortlist (describe it with --shortlist {shortlist})")
        off = cascade["of"] - (cascade["described"] - cascade["check"])
        r = missed_share(Path(d), benchmarks, datasets, check_ids, off, options)
        if check_ids.size and r["described"] < 0.5 * check_ids.size:
            raise UserError(f"{d}: only {r['described']} of the {check_ids.size} check candidates were described; "
                            f"describe it with --shortlist {shortlist} (see its failures.parquet)")
        r["passes"] = r["missed_upper"] <= options.max_missed
        result["methods"][name] = r
        if not r["passes"]:
            failed.append(f"{name}: the candidates off the shortlist hold up to {r['missed_upper']:.1%} of its score "
                          f"({r['escaped']} of {r['described']} check candidates outrank a positive; max_missed "
                          f"{options.max_missed:.1%})")
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_json(out / CASCADE_CHECK, result)
    if failed:
        raise UserError("cascade check: " + "; ".join(failed) + ": raise cascade.shortlist, or describe the method "
                        "in full (leave it out of cascade.methods)")
    return result
