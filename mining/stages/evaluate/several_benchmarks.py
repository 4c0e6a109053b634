"""evaluation.json and evaluation.md of a run mined for several benchmarks (R1M: ROxford and
RParis): one distractor set, evaluated on each benchmark with its own queries, database and
ground truth (each benchmark's report is the one-benchmark report, under `per_benchmark`),
plus how much of the set's score each benchmark contributes (`score_share`: a set that is
hard only for one benchmark shows here first)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow.parquet as pq

from mining.datasets.benchmarks import Benchmark, score_column
from mining.errors import UserError
from mining.files.names import DISTRACTORS, SCORES


def score_share(names: Sequence[str], scores_dir: Path, selected_dir: Path) -> dict[str, dict[str, float | None]]:
    """Per benchmark, its part of the summed score of the selected set and of every scored
    candidate (scores.parquet's benchmark_score_<name> columns; the parts sum to the score)."""
    cols = [score_column(n) for n in names]
    path = Path(scores_dir) / SCORES
    have = set(pq.read_schema(path).names)
    missing = [c for c in cols if c not in have]
    if missing:
        raise UserError(f"{path}: no column {missing[0]!r}: score these benchmarks together (`mining score` "
                        f"with one --landmarks NAME=GND each)")
    scores = pq.read_table(path, columns=["photo_id", *cols]).to_pandas().set_index("photo_id")
    selected = pq.read_table(Path(selected_dir) / DISTRACTORS, columns=["photo_id"]).column(0)
    ids = np.asarray(selected.to_numpy(), np.int64)
    unknown = ids[~np.isin(ids, scores.index.to_numpy())]
    if unknown.size:
        raise UserError(f"{selected_dir}/{DISTRACTORS}: photo {int(unknown[0])} was not scored ({path})")
    chosen = scores.loc[ids]

    def shares(frame: Any) -> dict[str, float | None]:
        parts = {n: float(frame[c].sum()) for n, c in zip(names, cols)}
        total = sum(parts.values())
        return {n: (v / total if total > 0 else None) for n, v in parts.items()}

    return {"selected": shares(chosen), "all": shares(scores)}


def combined_report(benchmarks: Sequence[Benchmark], reports: Sequence[dict[str, Any]], selected_dir: Path,
                    scores_dir: Path) -> dict[str, Any]:
    """evaluation.json with several benchmarks: the sets' common facts, each benchmark's report, the shares."""
    first = reports[0]
    names = [b.name for b in benchmarks]
    return {
        "benchmarks": [{"name": b.name, "gnd": b.gnd} for b in benchmarks],
        **{k: first[k] for k in ("n_requested", "n", "pool", "mined_source", "seeds", "setups")},
        "score_share": score_share(names, scores_dir, selected_dir),
        "per_benchmark": dict(zip(names, reports)),
    }


def combined_markdown(report: dict[str, Any], tables: Sequence[str]) -> str:
    """evaluation.md with several benchmarks: the shares, then each benchmark's tables (headings one level down)."""
    share = report["score_share"]
    pct = lambda v: "–" if v is None else f"{100 * v:.1f}"  # noqa: E731
    lines = [f"# Evaluation: {len(report['benchmarks'])} benchmarks, one distractor set", "",
             f"N = {report['n']} distractors from a pool of {report['pool']} candidates, scored against every "
             "benchmark's queries. Share of the score (%) each benchmark contributes:", "",
             "| benchmark | selected set | all candidates |", "|---|---|---|"]
    lines += [f"| {b['name']} | {pct(share['selected'][b['name']])} | {pct(share['all'][b['name']])} |"
              for b in report["benchmarks"]]
    text = "\n".join(lines) + "\n"
    for table in tables:
        text += "\n" + "\n".join(("#" + line) if line.startswith("#") else line for line in table.splitlines()) + "\n"
    return text
