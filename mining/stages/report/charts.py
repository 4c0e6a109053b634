"""Sections that are mostly plots: the funnel (one unit per chart), the scores, N chosen, the evaluation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow.parquet as pq

from mining.files.names import DISTRACTORS, EVALUATION, EVALUATION_MD, IMAGES_SUMMARY, SCORES, STATS, STORE
from mining.publishing.result import row_label
from mining.stages.report.common import NA, Inputs, esc, png, read_json, table


def _bars(title: str, unit: str, steps: list[tuple[str, float]]) -> str:
    """One horizontal bar chart on a linear axis: every bar counts the same unit."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.35 * len(steps) + 1.1))
    labels = [s for s, _ in steps][::-1]
    vals = [float(v) for _, v in steps][::-1]
    bars = ax.barh(labels, vals, color="#4477aa")
    ax.bar_label(bars, labels=[f"{int(v):,}" for v in vals], padding=3, fontsize=8)
    ax.set_xlabel(unit)
    ax.set_title(title, fontsize=10)
    ax.margins(x=0.12)
    return png(fig)


def _described(inp: Inputs) -> list[tuple[str, int]]:
    out = []
    if inp.descriptors:
        for info in sorted(inp.descriptors.glob(f"*/candidates/{STORE}")):
            n = (read_json(info) or {}).get("count")
            if n is None:
                n = sum(pq.read_metadata(p).num_rows for p in (info.parent / "shards").glob("*.ids.parquet"))
            out.append((info.parent.parent.name, int(n)))
    return out


def _learning_notes(inp: Inputs) -> str:
    """Methods that learned nothing on this pool (too small to whiten), decided before describing."""
    notes = []
    if inp.descriptors:
        for info in sorted(inp.descriptors.glob(f"*/candidates/{STORE}")):
            why = (read_json(info) or {}).get("small_pool")
            if why:
                notes.append(f"<p>{esc(info.parent.parent.name)}: {esc(why)}.</p>")
    return "".join(notes)


# long: one short section per stage's stats, in the funnel's order, over the same rows and charts
def funnel(inp: Inputs) -> str:
    """metadata rows → photos after the geofilter → images downloaded and described → the pool
    after review → selected; review items apart. One unit per chart, linear axes."""
    rows: list[list[Any]] = []  # stage, step, count, unit
    rows_chart: list[tuple[str, float]] = []
    photos_chart: list[tuple[str, float]] = []
    review_chart: list[tuple[str, float]] = []
    meta = read_json(inp.metadata / STATS) if inp.metadata else None
    if meta:
        for step, key in (("rows read", "rows_in"), ("rows rejected", "rows_rejected"), ("rows kept", "rows_out")):
            rows.append(["metadata", step, meta.get(key, "?"), "rows"])
            if isinstance(meta.get(key), int):
                rows_chart.append((f"metadata: {step}", meta[key]))
    cand = read_json(inp.candidates / STATS) if inp.candidates else None
    if cand:
        rows.append(["geofilter", "rows in", cand.get("rows_in", "?"), "rows"])
        if "photos_in" in cand:  # the funnel counts photos: one photo id may sit on several rows
            rows.append(["geofilter", "photos in", cand["photos_in"], "photos"])
            photos_chart.append(("photos in (geofilter)", cand["photos_in"]))
            dup = cand.get("duplicate_ids") or {}
            if dup.get("photos"):
                rows.append(["geofilter", "photo ids on several rows", f"{dup['photos']} ({dup.get('rows')} rows)", "photos"])
        rows += [["geofilter", f"excluded: {k}", v, "photos"] for k, v in (cand.get("excluded") or {}).items()]
        n_cand = cand.get("photos_out", cand.get("rows_out", "?"))
        rows.append(["geofilter", "candidates", n_cand, "photos"])
        if isinstance(n_cand, int):
            photos_chart.append(("candidates", n_cand))
    summ = read_json(inp.images / IMAGES_SUMMARY) if inp.images else None
    if summ:
        rows += [["download", f"status: {k}", v, "photos"] for k, v in (summ.get("counts") or {}).items() if v]
        ok = (summ.get("counts") or {}).get("ok")
        if isinstance(ok, int):
            photos_chart.append(("images downloaded", ok))
    described = _described(inp)
    rows += [["describe", f"candidates described ({m})", n, "images"] for m, n in described]
    if described:
        photos_chart.append(("images described", min(n for _, n in described)))
    dates = ((read_json(inp.scores / STATS) if inp.scores else None) or {}).get("since")
    if dates:  # landmarks that exist from a date: photos taken before it need no review for them (mining/evidence/since.py)
        rows.append(["score", "candidates taken before a landmark existed (not reviewed for it)",
                     dates["candidates_exempt_for_some_landmark"], "photos"])
        late = "; later than every candidate, allowed"  # score.late_since: allow (mining/evidence/since.py)
        rows += [["score", f"taken before {lm} ({d['since']}{late if d.get('late') else ''})", d["candidates_before"],
                  "photos"] for lm, d in dates["landmarks"].items()]
    if inp.decisions:
        dec = pq.read_table(inp.decisions, columns=["decision"]).column("decision").to_pylist()
        for k in ("landmark", "not_landmark", "unclear"):
            n = sum(1 for d in dec if d == k)
            rows.append(["review", f"decided {k}", n, "review items"])
            review_chart.append((f"decided {k}", n))
    pool = (read_json(inp.evaluation) or {}).get("pool")
    sel_stats = read_json(inp.selected / STATS) if inp.selected else None
    if pool is None and sel_stats and isinstance(sel_stats.get("candidates_scored"), int):
        pool = sel_stats["candidates_scored"] - int(sel_stats.get("dropped") or 0)
    if isinstance(pool, int):
        rows.append(["review", "pool after review (usable candidates)", pool, "images"])
        photos_chart.append(("pool after review", pool))
    if inp.selected and (inp.selected / DISTRACTORS).is_file():
        n = pq.read_metadata(inp.selected / DISTRACTORS).num_rows
        rows.append(["select", "distractors", n, "images"])
        photos_chart.append(("selected", n))
    if not rows:
        return NA
    charts = ""
    if photos_chart:
        charts += _bars("From photos to distractors (one photo = one image)", "photos / images", photos_chart)
    if rows_chart:
        charts += _bars("Metadata rows", "rows", rows_chart)
    if review_chart:
        charts += _bars("Review (one item = one candidate for one landmark)", "review items", review_chart)
    return ('<div class="charts">' + charts + "</div>" + table(rows, ["stage", "step", "count", "unit"])
            + _learning_notes(inp))


def score_distribution(inp: Inputs) -> str:
    if not inp.scores or not (inp.scores / SCORES).is_file():
        return NA
    import matplotlib.pyplot as plt

    score = pq.read_table(inp.scores / SCORES, columns=["score"]).column("score").to_numpy()
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.hist(score, bins=100, color="#4477aa")
    ax.set_yscale("log")
    ax.set_xlabel("distractor score (Σ over methods and queries of the below-positive fraction)")
    ax.set_ylabel("candidates")
    sel = inp.selected / DISTRACTORS if inp.selected else None
    if sel is not None and sel.is_file() and "score" in pq.read_schema(sel).names:
        s = pq.read_table(sel, columns=["score"]).column("score").to_numpy()
        if len(s):
            cut = float(np.min(s))
            ax.axvline(cut, color="#cc3311", label=f"lowest selected score {cut:.3g}")
            ax.legend()
    return png(fig) + f"<p>{len(score)} candidates scored.</p>"


def chosen_n(inp: Inputs) -> str:
    """select n: auto (mining/stages/evaluate/choose_n.py): the rule, the curves relative to all candidates, and N."""
    if not inp.selected:
        return NA
    auto = read_json(inp.selected / "auto_n.json")
    if not auto:
        return "<p>N was set by the manifest (select.n), not chosen from the curve (select: {n: auto}).</p>"
    import matplotlib.pyplot as plt

    tol = auto["tolerance"]
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, (m, per) in enumerate(auto["curves"].items()):
        for j, (s, c) in enumerate(per.items()):
            rel = np.array(c["mined"], dtype=float) / c["all"] if c["all"] else np.ones(len(c["mined"]))
            ax.plot(auto["sizes"], rel, ["-", "--", ":"][j % 3], color=f"C{i}", label=f"{m} {s}")
    ax.axhline(1 + tol, color="k", lw=0.8, label=f"1 + tolerance ({tol:g})")
    ax.axvline(auto["n"], color="#cc3311", lw=1.2, label=f"N = {auto['n']}")
    ax.set_xscale("log")
    ax.set_xlabel("mined distractors N")
    ax.set_ylabel("mined mAP / all-candidates mAP")
    ax.legend(fontsize=7)
    rows = [[m, s, v if v is not None else "never", f"{100 * auto['curves'][m][s]['all']:.2f}"]
            for m, per in auto["first_ok"].items() for s, v in per.items()]
    return (f"<p>N = {auto['n']} of {auto['available']} usable candidates: {esc(auto['rule'])}; binding: "
            f"{esc(', '.join(auto['binding']))}.</p>"
            + table(rows, ["method", "setup", "smallest N that holds", "all-candidates mAP (%)"]) + png(fig))


def evaluation_section(inp: Inputs) -> str:
    rep = read_json(inp.evaluation)
    if not rep:
        return NA
    # evaluate writes its tables as evaluation.md beside evaluation.json: the report shows
    # that file (one source for both, and no import of the evaluate stage)
    md = inp.evaluation.with_name(EVALUATION_MD) if inp.evaluation else None
    if md is None or not md.is_file():
        return f"<p>{esc(md)} not found: the tables are in {EVALUATION_MD} beside {EVALUATION}.</p>" + _curve(rep)
    return _markdown_tables(md.read_text(encoding="utf-8")) + _curves(rep)


def _curves(rep: dict[str, Any]) -> str:
    """The mAP-vs-N plot; one per benchmark of a run with several."""
    per = rep.get("per_benchmark")
    if not per:
        return _curve(rep)
    return "".join(f"<h4>{esc(name)}</h4>" + _curve(r) for name, r in per.items())


def _markdown_tables(md: str) -> str:
    """Markdown from `evaluate` (headings, paragraphs, pipe tables) as HTML: one source for both."""
    out, rows = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                rows.append(cells)
            continue
        if rows:
            out.append(table(rows[1:], rows[0]))
            rows = []
        if line.startswith("#"):
            level = min(4, line.count("#", 0, line.index(" ")) + 2)
            out.append(f"<h{level}>{esc(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            out.append(f"<p>{esc(line)}</p>")
    return "".join(out)


def _curve(rep: dict[str, Any]) -> str:
    import matplotlib.pyplot as plt

    methods, setups = rep.get("methods", []), rep.get("setups", [])
    if not methods or not setups:
        return ""
    fig, axes = plt.subplots(1, len(setups), figsize=(5 * len(setups), 3.8), squeeze=False)
    for ax, s in zip(axes[0], setups):
        for i, m in enumerate(methods):
            c = rep["curve"][m][s]
            x = np.array(c["sizes"], dtype=float)
            color = f"C{i}"
            r = np.array([np.nan if v is None else 100 * v for v in c["random"]])
            sd = 100 * np.array(c.get("random_std") or [0] * len(r), dtype=float)
            m_label = row_label(rep, m)
            ax.plot(x, r, "--o", color=color, label=f"{m_label} random")
            ax.fill_between(x, r - sd, r + sd, color=color, alpha=0.15)
            ax.plot(x, 100 * np.array(c["mined"], dtype=float), "-s", color=color, label=f"{m_label} mined")
            ci = (rep.get("ci") or {}).get(m, {}).get(s, {}).get("curve_mined")
            if ci and len(ci) == len(x):  # the bootstrap interval over queries of each mined point
                band = 100 * np.array([[np.nan if v is None else v for v in b] for b in ci], dtype=float)
                ax.fill_between(x, band[:, 0], band[:, 1], color=color, alpha=0.25, hatch="//", lw=0)
            ax.axhline(100 * rep["results"][m][s]["all"]["mAP"], color=color, lw=0.8, ls=":")
        ax.set_xscale("symlog", linthresh=max(1.0, float(x[1]) if len(x) > 1 else 1.0))
        ax.set_title(f"{s}")
        ax.set_xlabel("distractors")
        ax.set_ylabel("mAP (%)")
        ax.legend(fontsize=7)
    level = f" and its {100 * rep['bootstrap']['level']:g} % interval over queries (hatched)" if rep.get("ci") else ""
    fig.suptitle(f"mAP vs number of distractors: random (dashed, ± std over seeds) vs mined (solid{level}); "
                 "dotted: all candidates", fontsize=10)
    return png(fig)
