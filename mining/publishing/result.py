"""The result in words and one table, from evaluation.json (shared by evaluate and report): the
report's first sentence(s), and `evaluation/summary.md`, the Markdown a document can take as it
is (docs/demo.md is the demo run's, copied by `make demo`, never typed)."""

from __future__ import annotations

from typing import Any

from mining.files.names import EVALUATION
from mining.publishing.text import fmt_interval, fmt_p
from mining.publishing.text import pct as _pct


def per_benchmark(rep: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """{benchmark name: its evaluation} (evaluation.json's `per_benchmark`, else the one)."""
    if not rep:
        return {}
    if rep.get("per_benchmark"):
        return dict(rep["per_benchmark"])
    return {str((rep.get("landmarks") or {}).get("name") or "benchmark"): rep}


def row_label(rep: dict[str, Any], row: str) -> str:
    """A row's method as the tables print it: `(held out)` after a method that never mined
    (evaluation.json's `held_out`; `cnn-gem+αQE` is its method's row), `(cascade)` after one
    described on a cascade's shortlist only (`cascade`, docs/cascade.md)."""
    method = row.split("+")[0]
    marks = [m for m, on in (("held out", method in (rep.get("held_out") or ())),
                             ("cascade", method in (rep.get("cascade") or {}))) if on]
    return f"{row} ({', '.join(marks)})" if marks else row


def mined_minus_random(rep: dict[str, Any], method: str, setup: str) -> dict[str, Any] | None:
    """The bootstrap's paired mined − random mAP ({diff, ci, p_not_lower}), when there is one."""
    d = ((rep.get("ci") or {}).get(method, {}).get(setup) or {}).get("mined_minus_random")
    return d if d and d.get("diff") is not None else None


def sentence(name: str, rep: dict[str, Any], method: str | None = None) -> str | None:
    """One plain sentence: `method` (default the first) on the Medium setup (else the first
    setup); a held-out method is said to be one."""
    methods, setups = rep.get("methods") or [], rep.get("setups") or []
    if not methods or not setups:
        return None
    m = method or methods[0]
    s = "medium" if "medium" in setups else setups[0]
    d = mined_minus_random(rep, m, s)
    n = rep.get("n")
    if not d:
        return None
    cost = -100 * d["diff"]
    more = "more" if cost >= 0 else "less"
    lo, hi = sorted(-100 * v for v in d["ci"]) if None not in d["ci"] else (None, None)
    ci = f"95 % interval {lo:.1f} to {hi:.1f}; " if lo is not None else ""
    p = fmt_p(d.get("p_not_lower"))
    who = f"{m}, which took no part in mining (held out)," if m in (rep.get("held_out") or ()) else m
    return (f"On {name}, the mined {n} cost {who} {abs(cost):.1f} {s.capitalize()} mAP points {more} than a random {n} "
            f"({ci}p {p if p.startswith('<') else '= ' + p}).")


def sentences(name: str, rep: dict[str, Any]) -> list[str]:
    """The first method's sentence and, when the run has one, the first held-out method's."""
    first = [*(rep.get("methods") or [])[:1], *(rep.get("held_out") or [])[:1]]
    return [x for x in (sentence(name, rep, m) for m in dict.fromkeys(first)) if x]


def _table(rep: dict[str, Any]) -> list[str]:
    n, pool = rep["n"], rep["pool"]
    level = f"{100 * (rep.get('bootstrap') or {}).get('level', 0.95):g}"
    lines = [f"| method | setup | none | random {n} | mined {n} | all {pool} | mined − random | {level} % interval | p |",
             "|" + "---|" * 9]
    for m in rep["methods"]:
        for s in rep["setups"]:
            r = rep["results"][m][s]
            rnd = r["random"] or {}
            random = _pct(rnd.get("mAP")) + (f" ± {_pct(rnd['mAP_std'])}" if rnd.get("mAP_std") is not None else "")
            d = mined_minus_random(rep, m, s)
            diff = [f"{100 * d['diff']:+.2f}", fmt_interval(d["ci"]), fmt_p(d.get("p_not_lower"))] if d else ["–"] * 3
            lines.append(f"| {row_label(rep, m)} | {s.capitalize()} | {_pct((r['none'] or {}).get('mAP'))} | {random} | "
                         f"{_pct((r['mined'] or {}).get('mAP'))} | {_pct((r['all'] or {}).get('mAP'))} | "
                         + " | ".join(diff) + " |")
    return lines


def summary_markdown(evaluation: dict[str, Any]) -> str:
    """evaluation/summary.md: per benchmark, its size, the sentence and mAP (%) with none / random N /
    mined N / all candidates and mined − random with its interval and p. Nothing that changes
    between two runs of the same inputs (no time, no path): same evaluation, same bytes."""
    benches = per_benchmark(evaluation)
    lines = [f"<!-- written by `mining evaluate` from {EVALUATION}; do not edit (rerun instead) -->", "",
             f"# Distractors mined for {', '.join(benches)}: the result"]
    for name, rep in benches.items():
        lm = rep.get("landmarks") or {}
        seeds = ", ".join(map(str, rep.get("seeds") or []))
        lines += ["", f"## {name}: {lm.get('queries')} queries, {lm.get('database')} database images", "",
                  f"N = {rep['n']} distractors of {rep['pool']} usable candidates (mined set: "
                  f"{rep.get('mined_source')}); random = mean ± std over seeds {seeds}; mAP in %; mined − random "
                  "is paired over the queries (bootstrap), p the share of resamples where mined is not lower.", ""]
        said = " ".join(sentences(name, rep))
        lines += [said, ""] if said else []
        lines += _table(rep)
    return "\n".join(lines) + "\n"
