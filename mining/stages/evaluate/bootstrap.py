"""Error bars for the distractor experiment: bootstrap confidence intervals over queries.

Why over queries: a landmark benchmark has few queries (55-70), and mAP is their mean AP,
so the uncertainty that matters when a paper says "mined distractors cost 8 points more than
random ones" is which queries happened to be in the benchmark. The percentile bootstrap
resamples the queries with replacement B times and takes the mean AP of each resample; the
interval is the (1-level)/2 and (1+level)/2 quantiles of those means.

Why paired: mined and random are evaluated on the same queries, so their difference is
resampled per query (the same resampled query indices for both): the interval of
mean(AP_mined - AP_random) is much narrower than the two intervals side by side would
suggest, because a hard query is hard for both. `p_not_lower` is the fraction of resamples
where the mined set does not lower mAP below the other (a one-sided bootstrap p-value).

Random sets: the per-query AP of "random N" is the mean over the random seeds, so its
interval covers query sampling; the spread over seeds (set sampling) stays the `_std` of
evaluation.json. Queries without positives in a setup have no AP (NaN) and are left out, as
they are of the mAP itself.

Deterministic: the resampled indices come from numpy's PCG64 seeded with `seed` and depend
only on (seed, samples, number of queries); the same inputs give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from mining.errors import UserError
from mining.publishing.text import fmt_interval

DEFAULT_SAMPLES = 2000
DEFAULT_LEVEL = 0.95
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Spec:
    """How the intervals are computed (evaluation.json's `bootstrap`)."""

    samples: int = DEFAULT_SAMPLES
    seed: int = DEFAULT_SEED
    level: float = DEFAULT_LEVEL

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise UserError(f"bootstrap samples must be at least 1, not {self.samples}")
        if not 0 < self.level < 1:
            raise UserError(f"confidence level must be between 0 and 1 (exclusive), not {self.level}")

    def as_json(self) -> dict[str, Any]:
        return {"samples": int(self.samples), "seed": int(self.seed), "level": float(self.level),
                "unit": "query", "interval": "percentile"}


def resample_indices(n: int, spec: Spec) -> np.ndarray:
    """(samples, n) int64 indices into n queries, drawn with replacement."""
    rng = np.random.default_rng(int(spec.seed))
    return rng.integers(0, n, size=(int(spec.samples), n), dtype=np.int64) if n else np.zeros((spec.samples, 0), np.int64)


def _quantiles(means: np.ndarray, level: float) -> list[float | None]:
    if means.size == 0 or not np.isfinite(means).all():
        return [None, None]
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return [float(lo), float(hi)]


def interval(aps: np.ndarray, idx: np.ndarray, level: float) -> list[float | None]:
    """[lo, hi] of the bootstrap distribution of mean(aps) (aps: the valid queries' APs)."""
    aps = np.asarray(aps, dtype=np.float64)
    if aps.size == 0:
        return [None, None]
    return _quantiles(aps[idx].mean(axis=1), level)


def paired(a: np.ndarray, b: np.ndarray, idx: np.ndarray, level: float) -> dict[str, Any]:
    """mean(a - b) over the queries, its interval and the share of resamples with a ≥ b."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.size == 0:
        return {"diff": None, "ci": [None, None], "p_not_lower": None}
    means = d[idx].mean(axis=1)
    return {"diff": float(d.mean()), "ci": _quantiles(means, level), "p_not_lower": float(np.mean(means >= 0))}


def valid_queries(aps: np.ndarray) -> np.ndarray:
    """The queries that count in the mAP (those with positives: finite AP)."""
    return np.flatnonzero(np.isfinite(np.asarray(aps, dtype=np.float64)))


def method_intervals(none: np.ndarray, mined: np.ndarray, random: Sequence[np.ndarray], alls: np.ndarray,
                     ablation: Mapping[str, np.ndarray], curve_mined: Sequence[np.ndarray],
                     curve_random: Sequence[Sequence[np.ndarray]], spec: Spec) -> dict[str, Any]:
    """Every interval of one method and setup, from per-query AP arrays (NaN: no positives).

    `random`: one AP array per seed; `curve_*`: one entry per curve size (random: per seed).
    All intervals use the same resampled queries, so they are paired with one another."""
    keep = valid_queries(none)
    idx = resample_indices(keep.size, spec)
    sub = lambda a: np.asarray(a, dtype=np.float64)[keep]  # noqa: E731
    seed_mean = lambda runs: np.mean([sub(r) for r in runs], axis=0) if len(runs) else None  # noqa: E731
    rand = seed_mean(random)
    ci = lambda a: interval(sub(a), idx, spec.level) if a is not None else [None, None]  # noqa: E731
    out: dict[str, Any] = {
        "queries": int(keep.size),
        "none": ci(none), "mined": ci(mined), "all": ci(alls),
        "random": interval(rand, idx, spec.level) if rand is not None else [None, None],
        "mined_minus_random": paired(sub(mined), rand, idx, spec.level) if rand is not None else None,
        "mined_minus_all": paired(sub(mined), sub(alls), idx, spec.level),
        "ablation": {k: ci(v) for k, v in ablation.items()},
        "curve_mined": [ci(v) for v in curve_mined],
        "curve_random": [interval(seed_mean(runs), idx, spec.level) if len(runs) else [None, None]
                         for runs in curve_random],
    }
    return out


def markdown(report: Mapping[str, Any]) -> list[str]:
    """evaluation.md's section of intervals (empty when the report has none)."""
    spec, cis = report.get("bootstrap"), report.get("ci")
    if not spec or not cis:
        return []
    level = round(100 * spec["level"], 1)
    level_s = f"{level:g}"
    lines = ["", f"## {level_s} % confidence intervals over queries (bootstrap)", "",
             f"Percentile bootstrap over the queries with positives ({spec['samples']} resamples, seed {spec['seed']}); "
             "random: per-query AP averaged over the seeds. mined − random and mined − all are paired "
             "(the same resampled queries for both); p = share of resamples where mined is not lower. Values in %.", "",
             "| method | setup | queries | none | random | mined | all | mined − random | p | mined − all |",
             "|" + "---|" * 10]
    for m in report["methods"]:
        for s in report["setups"]:
            c = cis.get(m, {}).get(s)
            if not c:
                continue
            d = c.get("mined_minus_random")
            da = c.get("mined_minus_all")
            diff = lambda x: "–" if not x or x["diff"] is None else f"{100 * x['diff']:+.2f} {fmt_interval(x['ci'])}"  # noqa: E731
            p = "–" if not d or d["p_not_lower"] is None else f"{d['p_not_lower']:.3f}"
            lines.append(f"| {m} | {s} | {c['queries']} | {fmt_interval(c['none'])} | {fmt_interval(c['random'])} | "
                         f"{fmt_interval(c['mined'])} | {fmt_interval(c['all'])} | {diff(d)} | {p} | {diff(da)} |")
    return lines
