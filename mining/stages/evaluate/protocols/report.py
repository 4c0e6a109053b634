"""A protocol's report: JSON-ready numbers (nan → None) and the Markdown table printed by the CLI."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np


def finite_or_none(v: float) -> float | None:
    return None if not np.isfinite(v) else float(v)


def protocol_table(report: Mapping[str, Any]) -> str:
    """The report as a Markdown table: rates in % (2 decimals), the UKBench score as 0–4."""
    rows = report["metrics"]
    cols = list(next(iter(rows.values())))
    head = f"{report['protocol']} ({report['variant']}, {report['queries']} queries)"

    def cell(name: str, v: float | None) -> str:
        if v is None:
            return "n/a"
        return f"{v:.3f}" if name == "4-score" else f"{100 * v:.2f}"

    first = "setup" if report["variant"] == "revisited" else "benchmark"
    lines = [head, "", "| " + " | ".join([first, *cols]) + " |", "|" + "---|" * (1 + len(cols))]
    lines += ["| " + " | ".join([name, *(cell(c, vals[c]) for c in cols)]) + " |" for name, vals in rows.items()]
    return "\n".join(lines)
