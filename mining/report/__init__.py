"""`mining report`: one static HTML file (plots and thumbnails embedded) that tells a run's story.

Why one self-contained file: it is what a user mails around or opens on a laptop without the
run folder; every image is a base64 PNG/JPEG. Each section reads one stage's output and says
"not available" when that output is missing, so a partial run still gets a report.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import functools
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mining import atomic
from mining.benchmarks import prefixed_datasets, run_benchmarks
from mining.errors import UserError
from mining.layout import RunLayout

log = logging.getLogger(__name__)

THUMB = 160
SCATTER_SAMPLE = 20000


@dataclass
class Inputs:
    """Where each stage's output is; None = not given and not found."""

    metadata: Path | None = None  # METADATA folder (stats.json, part-*.parquet)
    candidates: Path | None = None  # CANDIDATES folder (stats.json, candidates.parquet)
    images: Path | None = None  # IMAGES folder (summary.json, jpg/)
    descriptors: Path | None = None  # DESC folder holding <method>/<set>/store.json
    scores: Path | None = None  # SCORES folder
    decisions: Path | None = None  # decisions.parquet
    selected: Path | None = None  # SELECTED folder
    evaluation: Path | None = None  # evaluation.json
    landmarks: Path | None = None  # gnd_*.pkl or its folder
    manifest: Path | None = None
    benchmarks: Path | None = None  # folder of snakemake benchmark TSVs
    neardup: Path | None = None  # NEARDUP folder (neardup.parquet, stats.json)
    leakrisk: Path | None = None  # LEAKRISK folder (leakrisk.parquet, stats.json)
    extra: dict[str, Any] = field(default_factory=dict)


def inputs_from_run(run: Path | None, **overrides: Path | None) -> Inputs:
    """The workflow's run layout (RUN/metadata, RUN/candidates, ...); explicit paths win."""
    found: dict[str, Path | None] = {}
    several: list[tuple[str, Path]] = []
    if run is not None:
        r = Path(run)
        if not r.is_dir():
            raise UserError(f"{r}: run folder not found")
        lay = RunLayout(str(r))  # the workflow's own layout (workflows/rules/common.smk)
        found = {
            "metadata": lay.metadata, "candidates": lay.candidates, "images": lay.images,
            "descriptors": lay.descriptors, "scores": lay.scores, "decisions": lay.decisions,
            "selected": lay.selected, "evaluation": lay.evaluation_json,
            "landmarks": lay.world_landmarks, "benchmarks": lay.benchmarks, "neardup": lay.neardup,
            "leakrisk": lay.leakrisk,
        }
        found = {k: Path(v) for k, v in found.items()}
        world = _json(Path(lay.world_json)) if Path(lay.world_json).is_file() else None
        several = [(b["name"], Path(lay.world) / b["gnd"]) for b in (world or {}).get("benchmarks", [])]
    manifest = overrides.get("manifest")
    if manifest is not None:
        from mining import manifest as manifests

        m = manifests.load(manifest)  # the one validated reading (defaults filled)
        several = run_benchmarks(m, RunLayout(str(run)) if run is not None else None)
        if several:  # several benchmarks: each one's ground truth (landmark names <benchmark>/<name>)
            found["landmarks"] = None
        elif m["landmarks"] != "demo":
            found["landmarks"] = Path(m["landmarks"])
        if m.review["decisions"]:
            found["decisions"] = Path(m.review["decisions"])
    for k, v in overrides.items():
        if v is not None:
            found[k] = Path(v)
    inp = Inputs(**{k: (v if v is not None and Path(v).exists() else None) for k, v in found.items()})
    if several:
        inp.extra["benchmarks"] = several
    return inp


def _landmark_sets(inp: Inputs) -> list[tuple[str, Any]]:
    """(name prefix, LandmarkDataset) of each benchmark (mining.benchmarks.prefixed_datasets)."""
    return prefixed_datasets(inp.extra.get("benchmarks") or [], inp.landmarks)


# ----------------------------------------------------------------------------- helpers
def _json(path: Path | None) -> dict[str, Any] | None:
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        log.warning("%s: not valid JSON; section skipped", path)
        return None


def _table(rows: list[list[Any]], head: list[str]) -> str:
    th = "".join(f"<th>{html.escape(str(h))}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _thumb(path: Path, box: tuple[float, float, float, float] | None = None) -> str:
    from mining.imagedecode import open_upright

    try:
        with open_upright(path, "RGB") as im:
            if box is not None:
                im = im.crop(tuple(int(round(v)) for v in box))
            im.thumbnail((THUMB, THUMB))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=80)
    except (OSError, ValueError):
        return '<span class="na">missing</span>'
    return f'<img alt="{html.escape(path.name)}" src="data:image/jpeg;base64,{base64.b64encode(buf.getvalue()).decode()}">'


@functools.lru_cache(maxsize=4)
def _image_paths(images: Path) -> dict[int, str]:
    """The download's {photo id: image path} ({} without an index.parquet)."""
    from mining import imageindex

    try:
        return imageindex.stored(images)
    except UserError as exc:
        log.warning("%s; thumbnails skipped", exc)
        return {}


def _candidate_thumb(inp: Inputs, photo_id: Any) -> str:
    """A candidate's thumbnail from the run's image folder ("missing" without one)."""
    rel = _image_paths(inp.images).get(int(photo_id)) if inp.images else None
    return _thumb(inp.images / rel) if rel else "<span class=na>missing</span>"


NA = '<p class="na">not available</p>'


# ----------------------------------------------------------------------------- sections
def funnel(inp: Inputs) -> str:
    """metadata rows → geofilter reasons → downloads by status → described → reviewed → selected."""
    rows: list[list[Any]] = []
    meta = _json(inp.metadata / "stats.json") if inp.metadata else None
    if meta:
        rows += [["metadata", "rows read", meta.get("rows_in", "?")], ["metadata", "rows rejected", meta.get("rows_rejected", "?")],
                 ["metadata", "rows kept", meta.get("rows_out", "?")]]
    cand = _json(inp.candidates / "stats.json") if inp.candidates else None
    if cand:
        rows.append(["geofilter", "rows in", cand.get("rows_in", "?")])
        if "photos_in" in cand:  # the funnel counts photos: one photo id may sit on several rows
            rows.append(["geofilter", "photos in", cand["photos_in"]])
            dup = cand.get("duplicate_ids") or {}
            if dup.get("photos"):
                rows.append(["geofilter", "photo ids on several rows", f"{dup['photos']} ({dup.get('rows')} rows)"])
        rows += [["geofilter", f"excluded: {k}", v] for k, v in (cand.get("excluded") or {}).items()]
        rows.append(["geofilter", "candidates", cand.get("photos_out", cand.get("rows_out", "?"))])
    summ = _json(inp.images / "summary.json") if inp.images else None
    if summ:
        rows += [["download", f"status: {k}", v] for k, v in (summ.get("counts") or {}).items() if v]
    if inp.descriptors:
        for info in sorted(inp.descriptors.glob("*/candidates/store.json")):
            st = _json(info) or {}
            n = st.get("count")
            if n is None:
                import pyarrow.parquet as pq

                n = sum(pq.read_metadata(p).num_rows for p in (info.parent / "shards").glob("*.ids.parquet"))
            rows.append(["describe", f"candidates described ({info.parent.parent.name})", n])
    if inp.decisions:
        import pyarrow.parquet as pq

        dec = pq.read_table(inp.decisions, columns=["decision"]).column("decision").to_pylist()
        for k in ("landmark", "not_landmark", "unclear"):
            rows.append(["review", f"decided {k}", sum(1 for d in dec if d == k)])
    if inp.selected and (inp.selected / "distractors.parquet").is_file():
        import pyarrow.parquet as pq

        rows.append(["select", "distractors", pq.read_metadata(inp.selected / "distractors.parquet").num_rows])
    if not rows:
        return NA
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.3 * len(rows) + 1))
    labels = [f"{r[0]}: {r[1]}" for r in rows][::-1]
    vals = [float(r[2]) if isinstance(r[2], (int, float)) else 0.0 for r in rows][::-1]
    ax.barh(labels, vals, color="#4477aa")
    if max(vals, default=0) > 0:
        ax.set_xscale("symlog")
    ax.set_xlabel("rows / images")
    return _table(rows, ["stage", "step", "count"]) + _png(fig)


def availability(inp: Inputs) -> str:
    """What is still alive: per image source, photos asked / served / final failures by kind;
    for the run, alive at full resolution, alive only at low resolution, gone everywhere."""
    summ = _json(inp.images / "summary.json") if inp.images else None
    if not summ or "sources" not in summ:
        return NA
    photos = summ.get("photos") or 0
    share = (lambda n: f"{n} ({100 * n / photos:.1f} %)") if photos else str
    run = [["alive at full resolution", share(summ.get("alive_full_res", 0))],
           ["alive only at low resolution", share(summ.get("alive_low_res_only", 0))],
           ["gone everywhere", share(summ.get("gone_everywhere", 0))],
           ["candidates", photos]]
    rows = [[name, d.get("asked", 0), d.get("served", 0),
             ", ".join(f"{k} {v}" for k, v in sorted((d.get("failed") or {}).items()) if v) or "none"]
            for name, d in summ["sources"].items()]
    return (_table(run, ["photos", "count"])
            + "<p>Each photo is asked of the next source only after a final failure at the previous one "
              "(gone, placeholder, too small, corrupt); throttling and time-outs stay on the same source.</p>"
            + _table(rows, ["source", "asked", "served", "final failures"]))


def geotags(inp: Inputs) -> str:
    """Lat/lon scatter of a sample of kept (candidates) vs excluded (metadata not kept) geotags."""
    if not inp.candidates or not (inp.candidates / "candidates.parquet").is_file():
        return NA
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    kept = pq.read_table(inp.candidates / "candidates.parquet", columns=["photo_id", "longitude", "latitude"]).to_pandas()
    kept_ids = np.unique(kept["photo_id"].to_numpy(np.int64))  # a Python set of 5M ids would cost ~0.5 GB
    kept = kept.dropna()
    if len(kept) > SCATTER_SAMPLE:
        kept = kept.iloc[rng.choice(len(kept), SCATTER_SAMPLE, replace=False)]
    excl = None
    parts = sorted(inp.metadata.rglob("*.parquet")) if inp.metadata else []
    if parts:
        meta = ds.dataset([str(p) for p in parts], format="parquet").head(20 * SCATTER_SAMPLE, columns=["photo_id", "longitude", "latitude"]).to_pandas()
        meta = meta.dropna()
        excl = meta[~np.isin(meta["photo_id"].to_numpy(np.int64), kept_ids)]
        if len(excl) > SCATTER_SAMPLE:
            excl = excl.iloc[rng.choice(len(excl), SCATTER_SAMPLE, replace=False)]
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    if excl is not None:
        ax.scatter(excl["longitude"], excl["latitude"], s=2, c="#cc3311", alpha=0.5, label=f"excluded (sample of {len(excl)})")
    ax.scatter(kept["longitude"], kept["latitude"], s=2, c="#0077bb", alpha=0.5, label=f"kept (sample of {len(kept)})")
    ax.set_xlim(-180, 180)
    ax.set_ylim(-90, 90)
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
    ax.legend(loc="lower left", markerscale=4)
    note = "" if excl is not None else '<p class="na">excluded geotags: not available (no metadata parquet)</p>'
    return _png(fig) + note


def score_distribution(inp: Inputs) -> str:
    if not inp.scores or not (inp.scores / "scores.parquet").is_file():
        return NA
    import matplotlib.pyplot as plt
    import pyarrow.parquet as pq

    score = pq.read_table(inp.scores / "scores.parquet", columns=["score"]).column("score").to_numpy()
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.hist(score, bins=100, color="#4477aa")
    ax.set_yscale("log")
    ax.set_xlabel("distractor score (Σ over methods and queries of the below-positive fraction)")
    ax.set_ylabel("candidates")
    sel = inp.selected / "distractors.parquet" if inp.selected else None
    if sel is not None and sel.is_file():
        t = pq.read_table(sel)
        if "score" in t.column_names and t.num_rows:
            cut = float(np.min(t.column("score").to_numpy()))
            ax.axvline(cut, color="#cc3311", label=f"lowest selected score {cut:.3g}")
            ax.legend()
    return _png(fig) + f"<p>{len(score)} candidates scored.</p>"


def hardest(inp: Inputs, per_landmark: int = 10) -> str:
    """Per landmark: its queries, its first query's crop and its hardest selected distractors as thumbnails."""
    if not (inp.landmarks or inp.extra.get("benchmarks")) or not inp.selected or not (inp.selected / "distractors.parquet").is_file():
        return NA
    import pyarrow.parquet as pq

    path = inp.selected / "distractors.parquet"
    wanted = [c for c in ("photo_id", "closest_landmark", "score") if c in pq.read_schema(path).names]
    sel = pq.read_table(path, columns=wanted).to_pandas()  # not the 1M rows' URLs, owners and licences
    if "closest_landmark" not in sel.columns and inp.scores and (inp.scores / "scores.parquet").is_file():
        sc = pq.read_table(inp.scores / "scores.parquet", columns=["photo_id", "closest_landmark", "score"]).to_pandas()
        sel = sel[["photo_id"]].merge(sc, on="photo_id", how="left")
    if "closest_landmark" not in sel.columns:
        return '<p class="na">not available (no closest_landmark in the selection or the scores)</p>'
    if "score" in sel.columns:
        sel = sel.sort_values(["score", "photo_id"], ascending=[False, True])
    parts = []
    for prefix, ds, lm, queries in ((p, d, lm, qs) for p, d in _landmark_sets(inp) for lm, qs in d.groups):
        q = queries[0]
        ids = sel.loc[sel["closest_landmark"] == prefix + lm, "photo_id"].head(per_landmark).tolist()
        thumbs = "".join(
            f'<figure>{_candidate_thumb(inp, p)}<figcaption>{int(p)}</figcaption></figure>' for p in ids)
        query = _thumb(ds.image_path(ds.qimlist[q]), ds.bbox(q))
        names = ", ".join(html.escape(ds.qimlist[i]) for i in queries)
        parts.append(f'<h3>{html.escape(prefix + lm)}</h3><p>{len(queries)} queries: {names}</p><div class="row"><figure class="query">{query}<figcaption>query '
                     f'{html.escape(ds.qimlist[q])}</figcaption></figure>{thumbs or "<p class=na>no selected distractor is closest to it</p>"}</div>')
    return "".join(parts)


def near_duplicates(inp: Inputs, groups: int = 6, per_group: int = 5) -> str:
    """mining neardup's counts and thresholds, what select dropped because of them, the
    largest groups and the probable landmark images beside the landmark image they copy."""
    st = _json(inp.neardup / "stats.json") if inp.neardup else None
    if not st or not (inp.neardup / "neardup.parquet").is_file():
        return NA
    import pyarrow.parquet as pq

    th = st["thresholds"]
    parts = [f"<p>Criterion: dHash (64 bits) within {th['max_hash_distance']} bits and {html.escape(st['method'])} "
             f"cosine ≥ {th['min_cosine']} (candidate pairs); within {th['landmark_max_hash_distance']} bits and "
             f"cosine ≥ {th['landmark_min_cosine']} (a candidate vs a landmark query or database image).</p>"]
    rows = [["candidates hashed and compared", st["candidates"]], ["near-duplicate pairs", st["pairs"]],
            ["groups (2 or more images)", st["groups"]], ["redundant images (group members beyond the first)", st["redundant"]],
            ["near-copies of landmark images (probable landmark)", st["copies_of_landmark_images"]]]
    sel = _json(inp.selected / "stats.json") if inp.selected else None
    nd_sel = (sel or {}).get("near_duplicates")
    if nd_sel:
        rows += [[f"select ({nd_sel['policy']}): redundant images dropped", nd_sel["redundant_dropped"]],
                 ["select: probable landmark images dropped (not reviewed not_landmark)", nd_sel["probable_landmark_dropped"]],
                 ["select: probable landmark images cleared by review", nd_sel["probable_landmark_cleared_by_review"]]]
    parts.append(_table(rows, ["", "count"]))
    t = pq.read_table(inp.neardup / "neardup.parquet").to_pandas()
    big = t[t["group_size"] > 1].sort_values(["group_size", "group", "photo_id"], ascending=[False, True, True])
    for g in big["group"].drop_duplicates().head(groups).tolist():
        members = big.loc[big["group"] == g, "photo_id"].tolist()
        figs = "".join(f"<figure>{_candidate_thumb(inp, p)}<figcaption>{int(p)}</figcaption></figure>" for p in members[:per_group])
        parts.append(f'<h3>group {int(g)} ({len(members)} images)</h3><div class="row">{figs}</div>')
    copies = t[t["copy_of"].notna()].sort_values("photo_id")
    sets = _landmark_sets(inp) if len(copies) else []
    if sets:
        def image(name: str) -> Path:  # a landmark image by its name in neardup.parquet (<benchmark>/<name> with several)
            prefix, ds = next((p, d) for p, d in sets if name.startswith(p))
            return ds.image_path(name[len(prefix):])

        figs = "".join(
            f'<figure class="query">{_thumb(image(c))}<figcaption>{html.escape(c)}</figcaption></figure>'
            f"<figure>{_candidate_thumb(inp, p)}<figcaption>{int(p)}: probable {html.escape(str(lm))}</figcaption></figure>"
            for p, c, lm in zip(copies["photo_id"].head(groups), copies["copy_of"], copies["probable_landmark"]))
        parts.append(f'<h3>Probable landmark images (landmark image, then the candidate copying it)</h3><div class="row">{figs}</div>')
    return "".join(parts)


def leak_risk(inp: Inputs, examples: int = 10) -> str:
    """mining leakrisk: how many candidates are at high risk of showing a landmark, how many of
    them lie outside the review queue, what select did with them, and the riskiest of those."""
    st = _json(inp.leakrisk / "stats.json") if inp.leakrisk else None
    if not st:
        return NA
    rows = [["candidates", st["candidates"]], ["high risk (risk ≥ the landmark's threshold)", st["high_risk"]],
            ["high risk, in the review queue", st["high_risk_in_queue"]],
            ["high risk, outside the review queue", st["high_risk_outside_queue"]]]
    sel = _json(inp.selected / "stats.json") if inp.selected else None
    lr = (sel or {}).get("leak_risk")
    if lr:
        rows.append([f"select ({lr['policy']}): high-risk candidates nobody reviewed, left out", lr["left_out"]])
    parts = [f"<p>risk = best {html.escape(st['method'])} cosine of a candidate to a landmark's query crops and "
             "positives; high when it reaches the landmark's threshold (the median cosine of its positives to their "
             "nearest other image of the landmark).</p>", _table(rows, ["", "count"]),
             _table([[lm, f"{t:.3f}"] for lm, t in st["thresholds"].items()], ["landmark", "threshold"])]
    ex = st.get("outside_queue_examples") or []
    if ex:
        figs = "".join(
            f'<figure>{_candidate_thumb(inp, e["photo_id"])}'
            f'<figcaption>{int(e["photo_id"])}: {html.escape(e["landmark"])} {e["risk"]:.3f} (#{e["risk_rank"]})</figcaption></figure>'
            for e in ex[:examples])
        parts.append(f'<h3>Riskiest candidates outside the review queue</h3><div class="row">{figs}</div>')
    return "".join(parts)


def chosen_n(inp: Inputs) -> str:
    """select n: auto (mining/evaluate/choose_n.py): the rule, the curves relative to all candidates, and N."""
    if not inp.selected:
        return NA
    auto = _json(inp.selected / "auto_n.json")
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
    return (f"<p>N = {auto['n']} of {auto['available']} usable candidates: {html.escape(auto['rule'])}; binding: "
            f"{html.escape(', '.join(auto['binding']))}.</p>"
            + _table(rows, ["method", "setup", "smallest N that holds", "all-candidates mAP (%)"]) + _png(fig))


def evaluation_section(inp: Inputs) -> str:
    rep = _json(inp.evaluation)
    if not rep:
        return NA
    # evaluate writes its tables as evaluation.md beside evaluation.json: the report shows
    # that file (one source for both, and no import of the evaluate stage)
    md = inp.evaluation.with_name("evaluation.md") if inp.evaluation else None
    if md is None or not md.is_file():
        return f"<p>{html.escape(str(md))} not found: the tables are in evaluation.md beside evaluation.json.</p>" + _curve(rep)
    return _markdown_tables(md.read_text(encoding="utf-8")) + _curves(rep)


def _curves(rep: dict[str, Any]) -> str:
    """The mAP-vs-N plot; one per benchmark of a run with several."""
    per = rep.get("per_benchmark")
    if not per:
        return _curve(rep)
    return "".join(f"<h4>{html.escape(name)}</h4>" + _curve(r) for name, r in per.items())


def _markdown_tables(md: str) -> str:
    """Markdown from `evaluate` (headings, paragraphs, pipe tables) as HTML: one source for both."""
    out, table = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                table.append(cells)
            continue
        if table:
            out.append(_table(table[1:], table[0]))
            table = []
        if line.startswith("#"):
            level = min(4, line.count("#", 0, line.index(" ")) + 2)
            out.append(f"<h{level}>{html.escape(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            out.append(f"<p>{html.escape(line)}</p>")
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
            ax.plot(x, r, "--o", color=color, label=f"{m} random")
            ax.fill_between(x, r - sd, r + sd, color=color, alpha=0.15)
            ax.plot(x, 100 * np.array(c["mined"], dtype=float), "-s", color=color, label=f"{m} mined")
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
    return _png(fig)


def settings(inp: Inputs) -> str:
    parts = []
    if inp.manifest and inp.manifest.is_file():
        parts.append(f"<h3>Manifest</h3><pre>{html.escape(inp.manifest.read_text())}</pre>")
    rows = []
    if inp.benchmarks:
        for tsv in sorted(inp.benchmarks.rglob("*.tsv")):
            with open(tsv, newline="") as f:
                recs = list(csv.DictReader(f, delimiter="\t"))
            for r in recs[-1:]:  # the latest run of the rule
                rows.append([str(tsv.relative_to(inp.benchmarks).with_suffix("")), r.get("s", "?"), r.get("h:m:s", "?"), r.get("max_rss", "?"), r.get("cpu_time", "?")])
    if rows:
        parts.append("<h3>Timings (snakemake benchmark files)</h3>" + _table(rows, ["rule", "seconds", "h:m:s", "max RSS (MB)", "CPU s"]))
    return "".join(parts) or NA


SECTIONS: list[tuple[str, Callable[[Inputs], str]]] = [
    ("Funnel", funnel),
    ("Images still alive, by source", availability),
    ("Geotags kept and excluded", geotags),
    ("Distractor scores", score_distribution),
    ("Hardest selected distractors per landmark", hardest),
    ("Near-duplicates and copies of landmark images", near_duplicates),
    ("Leak risk beyond the review queue", leak_risk),
    ("N chosen from the mAP-vs-N curve", chosen_n),
    ("Retrieval with and without distractors", evaluation_section),
    ("Settings and timings", settings),
]

_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:right}th{background:#eee}
.na{color:#888;font-style:italic}.row{display:flex;flex-wrap:wrap;gap:6px}figure{margin:0;text-align:center;font-size:11px}
figure.query img{outline:3px solid #228833}pre{background:#f6f6f6;padding:1em;font-size:12px;overflow:auto}"""


def build_report(inp: Inputs, out: Path, title: str = "distractor-mining run report") -> list[str]:
    """Write the HTML; return the names of the sections that were not available."""
    import matplotlib

    matplotlib.use("Agg")
    body, missing = [], []
    for name, fn in SECTIONS:
        try:
            content = fn(inp)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - one broken input must not lose the whole report
            log.warning("report section %r failed: %s", name, exc)
            content = f'<p class="na">not available ({html.escape(type(exc).__name__)}: {html.escape(str(exc))})</p>'
        if content.startswith('<p class="na">not available'):
            missing.append(name)
        body.append(f"<section><h2>{html.escape(name)}</h2>{content}</section>")
    doc = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{''.join(body)}</body></html>\n")
    atomic.write_text(out, doc)
    return missing
