"""How the review budget was spent (`mining score --review-budget`, `mining.stages.score.budget`):
the items per phase and per landmark, shown at the head of the leak-risk section."""

from __future__ import annotations

import numpy as np

from mining.files.names import STATS
from mining.stages.report.common import Inputs, esc, read_json, table

MAX_ROWS = 40  # landmarks listed (the most items first); the rest summed up


def review_budget(inp: Inputs) -> str:
    """The budget's summary and its items per landmark; "" when the queue was the top K of each."""
    st = read_json(inp.scores / STATS) if inp.scores else None
    b = (st or {}).get("review_budget")
    if not b:
        return ""
    per = sorted(b["per_landmark"].items(), key=lambda kv: (-kv[1], kv[0]))
    counts = np.array([n for _, n in per] or [0])
    cutoff = "—" if b["risk_cutoff"] is None else f"{b['risk_cutoff']:.4f}"
    rows = [["budget (items in all)", b["budget"]], ["items queued", b["items"]],
            ["(landmark, candidate) pairs with a score", b["available"]],
            [f"each landmark's top {b['min_per_landmark']}", b["first_items"]],
            ["then by risk, riskiest first", b["risk_items"]], ["risk of the last item taken by risk", cutoff],
            ["landmarks with items", f"{b['landmarks_with_items']} of {len(per)}"],
            ["items per landmark: min / median / max", f"{counts.min()} / {np.median(counts):g} / {counts.max()}"]]
    shown = per[:MAX_ROWS]
    more = (f"<p>{len(per) - len(shown)} more landmarks hold {sum(n for _, n in per[MAX_ROWS:])} items.</p>"
            if len(per) > len(shown) else "")
    return ("<h3>Review budget</h3><p>risk of a (landmark, candidate) pair = the mean share of the landmark's "
            "positives the candidate outranks (its score for the landmark / the landmark's method × query pairs); "
            f"docs/stages.md, 'Review budget'.</p>{table(rows, ['', 'count'])}"
            + table([[esc(lm), n] for lm, n in shown], ["landmark", "items"]) + more)
