"""`mining report`: `run` writes the one HTML file (its sections: `SECTIONS`); `inputs_from_run`
finds a run's files through `RunLayout`."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Callable

from mining.files import atomic
from mining.datasets.benchmarks import run_benchmarks
from mining.errors import UserError
from mining.settings.layout import RunLayout
from mining.stages.report.audit import leak_audit
from mining.stages.report.charts import chosen_n, evaluation_section, funnel, score_distribution
from mining.stages.report.common import Inputs, load_manifest, log, read_json
from mining.stages.report.geometric_evidence import geometric_evidence
from mining.stages.report.headline import headline, provenance, title as headline_title
from mining.stages.report.maps import geotags
from mining.stages.report.sections import (agreement, availability, hardest, leak_risk, near_duplicates, review_removed,
                                           settings)


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
            "leakrisk": lay.leakrisk, "audit": lay.audit, "cascade": lay.cascade,
        }
        found = {k: Path(v) for k, v in found.items()}
        world = read_json(Path(lay.world_json)) if Path(lay.world_json).is_file() else None
        several = [(b["name"], Path(lay.world) / b["gnd"]) for b in (world or {}).get("benchmarks", [])]
    manifest = overrides.get("manifest")
    if manifest is not None:
        m = load_manifest(Path(manifest))  # the one validated reading (defaults filled)
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
    return Inputs(**{k: (v if v is not None and Path(v).exists() else None) for k, v in found.items()},
                  ground_truths=tuple(several), run=Path(run) if run is not None else None)


# (anchor, heading, section): the result, where it came from and whether the images live come first
SECTIONS: list[tuple[str, str, Callable[[Inputs], str]]] = [
    ("result", "Result: mined vs random distractors", headline),
    ("provenance", "Provenance", provenance),
    ("availability", "Images still alive, by source", availability),
    ("funnel", "Funnel", funnel),
    ("geotags", "Geotags kept and excluded", geotags),
    ("hardest", "Hardest selected distractors per landmark", hardest),
    ("review", "What the review removed", review_removed),
    ("agreement", "Reviewer agreement", agreement),
    ("geometry", "Geometric evidence of landmark images", geometric_evidence),
    ("scores", "Distractor scores", score_distribution),
    ("neardup", "Near-duplicates and copies of landmark images", near_duplicates),
    ("leakrisk", "Leak risk beyond the review queue", leak_risk),
    ("audit", "Leak rate measured by the audit", leak_audit),
    ("n", "N chosen from the mAP-vs-N curve", chosen_n),
    ("evaluation", "Retrieval with and without distractors", evaluation_section),
    ("settings", "Settings and timings", settings),
]

_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:right}th{background:#eee}td:first-child{text-align:left}
.na{color:#888;font-style:italic}.row{display:flex;flex-wrap:wrap;gap:6px}figure{margin:0;text-align:center;font-size:11px}
figure.query img{outline:3px solid #228833}pre{background:#f6f6f6;padding:1em;font-size:12px;overflow:auto}
p.lead{font-size:1.25em;margin:.3em 0}nav.toc{columns:3;font-size:13px;margin:.5em 0 1em}nav.toc a{display:block}
.charts{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start}.queries{border-right:2px solid #228833;padding-right:6px}
section#result{background:#f3f8f1;border-left:5px solid #228833;padding:.2em 1em}"""


def run(*, inputs: Inputs, out: Path, title: str | None = None) -> dict[str, Any]:
    """Write the HTML file `out` from the files `inputs` names (`inputs_from_run` finds a run's);
    `title`: the page's (default: from the run, `headline.title`). Returns {"missing": the names
    of the sections that were not available}."""
    import matplotlib

    matplotlib.use("Agg")
    body, missing = [], []
    toc = "".join(f'<a href="#{anchor}">{html.escape(name)}</a>' for anchor, name, _ in SECTIONS)
    for anchor, name, fn in SECTIONS:
        try:
            content = fn(inputs)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - one broken input must not lose the whole report
            log.warning("report section %r failed: %s", name, exc)
            content = f'<p class="na">not available ({html.escape(type(exc).__name__)}: {html.escape(str(exc))})</p>'
        if content.startswith('<p class="na">not available'):
            missing.append(name)
        body.append(f'<section id="{anchor}"><h2>{html.escape(name)}</h2>{content}</section>')
        if anchor == "result":  # the table of contents right under the result
            body.append(f'<nav class="toc"><b>Contents</b>{toc}</nav>')
    doc_title = title or headline_title(inputs)
    doc = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(doc_title)}</title>"
           f"<style>{_STYLE}</style></head><body><h1>{html.escape(doc_title)}</h1>{''.join(body)}</body></html>\n")
    atomic.write_text(out, doc)
    return {"missing": missing}

