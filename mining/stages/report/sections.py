"""Sections of tables and thumbnails: availability, hardest distractors, what the review removed
and how much the reviewers agreed, near-duplicates, leak risk, settings. Galleries are capped so the
file stays bounded at R1M scale (benchmarks/report_size.py)."""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from mining.files.names import DECISIONS, DISTRACTORS, IMAGES_SUMMARY, NEARDUP, SCORES, STATS
from mining.stages.report.review_budget import review_budget
from mining.stages.report.common import NA, Inputs, candidate_thumb, esc, figure, landmark_sets, read_json, table, thumb

MAX_LANDMARKS = 40  # hardest: landmarks shown (each: its queries and its hardest distractors)
MAX_QUERIES = 5  # query crops beside a landmark's distractors
REMOVED_SHOWN = 48  # review gallery
AGREEMENT_ROWS = 60


def availability(inp: Inputs) -> str:
    """What is still alive: per image source, photos asked / served / final failures by kind;
    for the run, alive at full resolution, alive only at low resolution, gone everywhere."""
    summ = read_json(inp.images / IMAGES_SUMMARY) if inp.images else None
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
    return (table(run, ["photos", "count"])
            + "<p>Each photo is asked of the next source only after a final failure at the previous one "
              "(gone, placeholder, too small, corrupt); throttling and time-outs stay on the same source.</p>"
            + table(rows, ["source", "asked", "served", "final failures"]))


def _selection(inp: Inputs) -> Any:
    """The selection's photo_id, rank, score, closest_landmark (from the scores when select did not keep it)."""
    path = inp.selected / DISTRACTORS
    wanted = [c for c in ("photo_id", "rank", "closest_landmark", "score") if c in pq.read_schema(path).names]
    sel = pq.read_table(path, columns=wanted).to_pandas()  # not the 1M rows' URLs, owners and licences
    if "rank" not in sel.columns:
        sel["rank"] = range(1, len(sel) + 1)
    if "closest_landmark" not in sel.columns and inp.scores and (inp.scores / SCORES).is_file():
        sc = pq.read_table(inp.scores / SCORES, columns=["photo_id", "closest_landmark", "score"]).to_pandas()
        sel = sel[["photo_id", "rank"]].merge(sc, on="photo_id", how="left")
    return sel


def hardest(inp: Inputs, per_landmark: int = 8) -> str:
    """Per landmark: every query's crop, then its hardest selected distractors with their rank and score."""
    if not (inp.landmarks or inp.ground_truths) or not inp.selected or not (inp.selected / DISTRACTORS).is_file():
        return NA
    sel = _selection(inp)
    if "closest_landmark" not in sel.columns:
        return '<p class="na">not available (no closest_landmark in the selection or the scores)</p>'
    sel = sel.sort_values(["score", "photo_id"], ascending=[False, True]) if "score" in sel.columns else sel.sort_values("rank")
    groups = {lm: g.head(per_landmark) for lm, g in sel.groupby("closest_landmark", sort=False)}
    parts, shown = [], 0
    for prefix, ds, lm, queries in ((p, d, lm, qs) for p, d in landmark_sets(inp) for lm, qs in d.groups):
        if shown == MAX_LANDMARKS:
            parts.append(f"<p>… landmarks beyond the first {MAX_LANDMARKS} are not shown.</p>")
            break
        shown += 1
        g = groups.get(prefix + lm)
        thumbs = "".join(
            figure(candidate_thumb(inp, r.photo_id), f"#{int(r.rank)}" + (f" · score {r.score:.3g}" if "score" in sel.columns else "")
                   + f" · {int(r.photo_id)}")
            for r in (g.itertuples() if g is not None else []))
        crops = "".join(figure(thumb(ds.image_path(ds.qimlist[q]), ds.bbox(q)), f"query {ds.qimlist[q]}", "query")
                        for q in queries[:MAX_QUERIES])
        more = f"<p>+ {len(queries) - MAX_QUERIES} more queries</p>" if len(queries) > MAX_QUERIES else ""
        names = ", ".join(esc(ds.qimlist[i]) for i in queries)
        parts.append(f'<h3>{esc(prefix + lm)}</h3><p>{len(queries)} queries: {names}</p><div class="row">'
                     f'<div class="row queries">{crops}{more}</div>'
                     f'{thumbs or "<p class=na>no selected distractor is closest to it</p>"}</div>')
    return ("<p>Green frames: the landmark's queries (their crops); beside them the selected distractors closest "
            "to this landmark, hardest first (# = rank in the selection, score = distractor score).</p>" + "".join(parts))


def _decisions(inp: Inputs) -> Any:
    cols = [c for c in ("landmark", "photo_id", "rank", "votes", "n_votes", "decision") if c in pq.read_schema(inp.decisions).names]
    return pq.read_table(inp.decisions, columns=cols).to_pandas()


def review_removed(inp: Inputs) -> str:
    """A gallery of the candidates the review decided `landmark` (dropped from the set)."""
    if not inp.decisions:
        return NA
    d = _decisions(inp)
    gone = d[d["decision"] == "landmark"]
    if not len(gone):
        return "<p>The review removed no candidate (no decision `landmark`).</p>"
    gone = gone.sort_values([c for c in ("landmark", "rank", "photo_id") if c in gone.columns])
    photos = gone.groupby("photo_id", sort=False)["landmark"].agg(lambda s: ", ".join(sorted(set(s))))
    figs = "".join(figure(candidate_thumb(inp, p), f"{int(p)}: {lms}") for p, lms in photos.head(REMOVED_SHOWN).items())
    rest = f"<p>… and {len(photos) - REMOVED_SHOWN} more images.</p>" if len(photos) > REMOVED_SHOWN else ""
    return (f"<p>{len(gone)} review items decided <code>landmark</code> (images of the landmark: never distractors): "
            f"{len(photos)} images, over {gone['landmark'].nunique()} landmarks.</p><div class=\"row\">{figs}</div>{rest}")


def agreement(inp: Inputs) -> str:
    """Share of unanimous decisions, overall and per landmark, where items had several reviewers."""
    if not inp.decisions:
        return NA
    d = _decisions(inp)
    if "votes" not in d.columns:
        return f'<p class="na">not available (no votes column in {DECISIONS})</p>'
    total: Counter[str] = Counter()
    per: dict[str, Counter[str]] = defaultdict(Counter)
    reviewers: set[str] = set()
    for lm, votes in zip(d["landmark"], d["votes"]):
        try:
            v = json.loads(votes) if isinstance(votes, str) else (votes or {})
        except ValueError:
            continue
        if len(v) < 2:
            continue
        reviewers.update(v)
        key = "unanimous" if len(set(v.values())) == 1 else "split"
        total[key] += 1
        per[lm][key] += 1
    n = total["unanimous"] + total["split"]
    if not n:
        return "<p>One reviewer per item: no agreement to measure.</p>"
    rows = [[lm, c["unanimous"] + c["split"], f"{100 * c['unanimous'] / (c['unanimous'] + c['split']):.1f} %"]
            for lm, c in sorted(per.items(), key=lambda kv: (kv[1]["unanimous"] / sum(kv[1].values()), kv[0]))]
    rest = f"<p>… {len(rows) - AGREEMENT_ROWS} more landmarks (least unanimous shown first).</p>" if len(rows) > AGREEMENT_ROWS else ""
    return (f"<p>{total['unanimous']} of {n} items seen by several reviewers ({len(reviewers)} reviewers in all) were "
            f"decided unanimously: {100 * total['unanimous'] / n:.1f} %.</p>"
            + table(rows[:AGREEMENT_ROWS], ["landmark", "items with several votes", "unanimous"]) + rest)


def near_duplicates(inp: Inputs, groups: int = 6, per_group: int = 5) -> str:
    """mining neardup's counts and thresholds, what select dropped because of them, the
    largest groups and the probable landmark images beside the landmark image they copy."""
    st = read_json(inp.neardup / STATS) if inp.neardup else None
    if not st or not (inp.neardup / NEARDUP).is_file():
        return NA

    th = st["thresholds"]
    parts = [f"<p>Criterion: dHash (64 bits) within {th['max_hash_distance']} bits and {esc(st['method'])} "
             f"cosine ≥ {th['min_cosine']} (candidate pairs); within {th['landmark_max_hash_distance']} bits and "
             f"cosine ≥ {th['landmark_min_cosine']} (a candidate vs a landmark query or database image).</p>"]
    rows = [["candidates hashed and compared", st["candidates"]], ["near-duplicate pairs", st["pairs"]],
            ["groups (2 or more images)", st["groups"]], ["redundant images (group members beyond the first)", st["redundant"]],
            ["near-copies of landmark images (probable landmark)", st["copies_of_landmark_images"]]]
    sel = read_json(inp.selected / STATS) if inp.selected else None
    nd_sel = (sel or {}).get("near_duplicates")
    if nd_sel:
        rows += [[f"select ({nd_sel['policy']}): redundant images dropped", nd_sel["redundant_dropped"]],
                 ["select: probable landmark images dropped (not reviewed not_landmark)", nd_sel["probable_landmark_dropped"]],
                 ["select: probable landmark images cleared by review", nd_sel["probable_landmark_cleared_by_review"]]]
    parts.append(table(rows, ["", "count"]))
    t = pq.read_table(inp.neardup / NEARDUP).to_pandas()
    big = t[t["group_size"] > 1].sort_values(["group_size", "group", "photo_id"], ascending=[False, True, True])
    for g in big["group"].drop_duplicates().head(groups).tolist():
        members = big.loc[big["group"] == g, "photo_id"].tolist()
        figs = "".join(figure(candidate_thumb(inp, p), str(int(p))) for p in members[:per_group])
        parts.append(f'<h3>group {int(g)} ({len(members)} images)</h3><div class="row">{figs}</div>')
    copies = t[t["copy_of"].notna()].sort_values("photo_id")
    sets = landmark_sets(inp) if len(copies) else []
    if sets:
        def image(name: str) -> Path:  # a landmark image by its name in neardup.parquet (<benchmark>/<name> with several)
            prefix, ds = next((p, d) for p, d in sets if name.startswith(p))
            return ds.image_path(name[len(prefix):])

        figs = "".join(figure(thumb(image(c)), c, "query") + figure(candidate_thumb(inp, p), f"{int(p)}: probable {lm}")
                       for p, c, lm in zip(copies["photo_id"].head(groups), copies["copy_of"], copies["probable_landmark"]))
        parts.append(f'<h3>Probable landmark images (landmark image, then the candidate copying it)</h3><div class="row">{figs}</div>')
    return "".join(parts)


def leak_risk(inp: Inputs, examples: int = 10) -> str:
    """mining leakrisk: how many candidates are at high risk of showing a landmark, how many of
    them lie outside the review queue, what select did with them, and the riskiest of those;
    headed by how a review budget was spent over the landmarks (`mining.stages.report.review_budget`)."""
    budget = review_budget(inp)  # how the queue was spread over the landmarks, when by a budget
    st = read_json(inp.leakrisk / STATS) if inp.leakrisk else None
    if not st:
        return budget or NA
    rows = [["candidates", st["candidates"]], ["high risk (risk ≥ the landmark's threshold)", st["high_risk"]],
            ["high risk, in the review queue", st["high_risk_in_queue"]],
            ["high risk, outside the review queue", st["high_risk_outside_queue"]]]
    sel = read_json(inp.selected / STATS) if inp.selected else None
    lr = (sel or {}).get("leak_risk")
    if lr:
        rows.append([f"select ({lr['policy']}): high-risk candidates nobody reviewed, left out", lr["left_out"]])
    parts = [budget, f"<p>risk = best {esc(st['method'])} cosine of a candidate to a landmark's query crops and "
             "positives; high when it reaches the landmark's threshold (the median cosine of its positives to their "
             "nearest other image of the landmark).</p>", table(rows, ["", "count"]),
             table([[lm, f"{t:.3f}"] for lm, t in st["thresholds"].items()], ["landmark", "threshold"])]
    ex = st.get("outside_queue_examples") or []
    if ex:
        figs = "".join(figure(candidate_thumb(inp, e["photo_id"]),
                              f'{int(e["photo_id"])}: {e["landmark"]} {e["risk"]:.3f} (#{e["risk_rank"]})')
                       for e in ex[:examples])
        parts.append(f'<h3>Riskiest candidates outside the review queue</h3><div class="row">{figs}</div>')
    return "".join(parts)


def settings(inp: Inputs) -> str:
    parts = []
    if inp.manifest and inp.manifest.is_file():
        parts.append(f"<h3>Manifest</h3><pre>{esc(inp.manifest.read_text())}</pre>")
    rows = []
    if inp.benchmarks:
        for tsv in sorted(inp.benchmarks.rglob("*.tsv")):
            with open(tsv, newline="") as f:
                recs = list(csv.DictReader(f, delimiter="\t"))
            for r in recs[-1:]:  # the latest run of the rule
                rows.append([str(tsv.relative_to(inp.benchmarks).with_suffix("")), r.get("s", "?"), r.get("h:m:s", "?"), r.get("max_rss", "?"), r.get("cpu_time", "?")])
    if rows:
        parts.append("<h3>Timings (snakemake benchmark files)</h3>" + table(rows, ["rule", "seconds", "h:m:s", "max RSS (MB)", "CPU s"]))
    return "".join(parts) or NA
