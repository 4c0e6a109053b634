"""The report's leak-audit section: the selection's measured leak rate with its bound (AUDIT/audit.json,
mining/stages/audit/stage.py), the sample per stratum, and the landmark images the audit found."""

from __future__ import annotations

import re

from mining.files.names import AUDIT, DISTRACTORS
from mining.settings import options
from mining.errors import UserError
from mining.publishing.leakbound import recompute, sentence
from mining.files.tables import read_table
from mining.stages.report.common import NA, Inputs, candidate_thumb, esc, figure, read_json, run_manifest, table

SHOWN = 24  # leaks found shown as thumbnails


def checked(audit: dict, inp: Inputs) -> dict:
    """audit.json recomputed (mining.publishing.leakbound.recompute) for the set it left (AUDIT/distractors.parquet),
    at the manifest's audit target and confidence (their defaults without one)."""
    m = run_manifest(inp)
    target = options.of(m, "audit") if m is not None else options.defaults("audit")
    ids = read_table(inp.audit / DISTRACTORS, ("photo_id",), "audited set").column("photo_id").to_numpy()
    return recompute(audit, ids, target.max_leak_rate, target.confidence)


def leak_audit(inp: Inputs) -> str:
    a = read_json(inp.audit / AUDIT) if inp.audit else None
    if not a:
        return NA
    try:  # the bound from the audit's counts, against the run's target, as the release gate has it
        a = checked(a, inp)
    except UserError as exc:
        return f"<p>{esc(str(exc))}</p>"
    words = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", esc(sentence(a)))  # the card's Markdown bold, as HTML
    bands = [0.0, *a["bands"]]
    rows = [[f"ranks {100 * lo:.0f}–{100 * hi:.0f} %", s["size"], s["sampled"], s["leaks"],
             f"{s['size'] / s['sampled']:.1f}"] for lo, hi, s in zip(bands, bands[1:], a["strata"])]
    parts = [f"<p>{words}</p>", table(rows, ["stratum (of the set, hardest first)", "images", "sampled",
                                             "landmark images found", "weight"])]
    if a["leaks_found"]:
        figs = "".join(figure(candidate_thumb(inp, p), str(p)) for p in a["leaks_found"][:SHOWN])
        parts.append(f'<h3>Landmark images the audit found (removed)</h3><div class="row">{figs}</div>')
    return "".join(parts)
