"""`mining evaluate`, its three modes, one entry point each (every parameter by keyword):

- `run`: the pipeline's evaluation, the mined set against random sets of the same size and no
  distractors (`experiment`, `histograms`, `bootstrap`; several benchmarks: `several`);
- `run_kit`: a release's evaluation kit reproduces the run's table, or ranks a user's queries (`kit`);
- `run_protocol`: a user's own results on a standard benchmark (`protocols/`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow.parquet as pq

from mining import pins
from mining.files import atomic
from mining.datasets.benchmarks import as_list, fingerprint, load_all
from mining.errors import UserError
from mining.files.names import EVALUATION, EVALUATION_MD, EVALUATION_SUMMARY, SCORES, STATS
from mining.settings.options import EvaluateOptions
from mining.publishing.result import summary_markdown
from mining.retrieval.descriptors import open_store
from mining.stages.evaluate import bootstrap, expansion
from mining.stages.evaluate.experiment import build_sets, experiment_report, markdown_table, rankings_of
from mining.stages.evaluate.histograms import load_method, method_variants
from mining.stages.evaluate.from_kit import run_kit
from mining.stages.evaluate.protocols.dispatch import evaluate_protocol
from mining.stages.evaluate.protocols.readers import Results
from mining.stages.evaluate.protocols.setups import SETUPS, setup_gnd
from mining.stages.evaluate.several_benchmarks import combined_markdown, combined_report

__all__ = ["Inputs", "run", "run_kit", "run_protocol"]


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """What `mining evaluate` reads: the landmarks, every method's stores, and the sets to compare."""

    landmarks: Sequence[str]  # [NAME=]GND, one ground truth or several benchmarks (`benchmarks.as_list`)
    descriptors: Sequence[Path]  # one DESC/<method> folder per method
    scores: Path  # `mining score`'s folder: the pool the random sets are drawn from
    selected: Path  # `mining select`'s folder: the mined set
    decisions: Path | None = None  # review decisions: confirmed landmarks leave the random sets too


def run(*, inputs: Inputs, out: Path, options: EvaluateOptions, progress: bool = True,
        boot: bootstrap.Spec | None = bootstrap.Spec()) -> dict[str, Any]:
    """`mining evaluate`: write OUT/evaluation.json and OUT/evaluation.md; return the JSON.

    With several benchmarks (`inputs.landmarks`), the same sets (one pool, one selection) are
    evaluated on each benchmark (`mining.stages.evaluate.several_benchmarks`). `options.n`: the set size
    (None: the selection's)."""
    t0 = time.perf_counter()
    descriptors = inputs.descriptors
    check_settings(descriptors, options.setups, options.random_seeds)
    benchmarks = as_list(inputs.landmarks)
    datasets = load_all(benchmarks)
    check_scores_landmarks(Path(inputs.scores), benchmarks, datasets)
    held_out = held_out_methods(descriptors, Path(inputs.scores), options.held_out)
    cascaded = cascaded_methods(descriptors)
    sets = build_sets(Path(inputs.scores), Path(inputs.selected), inputs.decisions, options.n, options.random_seeds)
    rankings, _ = rankings_of(sets)
    reports = []
    for b, dataset in zip(benchmarks, datasets):
        bench = b.name if len(benchmarks) > 1 else None
        rows = method_variants(descriptors, bench)  # each method, and its +SP ranking where it has one
        loaded = (load_method(d, dataset, rankings, progress=progress, benchmark=bench, spatial=sp) for d, sp in rows)
        report = experiment_report(dataset, sets, options.n, options.random_seeds, options.setups, loaded,
                                   [str(d) for d, _ in rows], boot)
        expansion.add_rows(report, descriptors, dataset, sets, options.setups, expansion.Expansion.of(options), bench)
        report["held_out"] = [m for m in report["methods"] if m.split("+")[0] in held_out]  # rows never mined
        if cascaded:
            report["cascade"] = cascaded
        reports.append(report)
    if len(benchmarks) == 1:
        report, text = reports[0], markdown_table(reports[0])
    else:
        report = combined_report(benchmarks, reports, Path(inputs.selected), Path(inputs.scores))
        report["held_out"] = reports[0]["held_out"]
        if cascaded:
            report["cascade"] = cascaded
        text = combined_markdown(report, [markdown_table(r) for r in reports])
    report["seconds"] = round(time.perf_counter() - t0, 3)
    report["pins"] = pins.fingerprint()
    atomic.write_json(Path(out) / EVALUATION, report)
    atomic.write_text(Path(out) / EVALUATION_MD, text)
    atomic.write_text(Path(out) / EVALUATION_SUMMARY, summary_markdown(report))
    return report


def check_settings(descriptors: Sequence[Path], setups: Sequence[str], seeds: Sequence[int]) -> None:
    """One line for what cannot be evaluated, before anything is read."""
    if not descriptors:
        raise UserError("give at least one --descriptors DESC/<method> folder")
    for s in setups:
        setup_gnd([], s)  # validates the name
    if not seeds or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in seeds):
        raise UserError(f"--random-seeds: give whole numbers ≥ 0 (numpy's seeds), got {' '.join(map(str, seeds)) or 'none'}")


def check_scores_landmarks(scores: Path, benchmarks: Sequence[Any], datasets: Sequence[Any]) -> None:
    """The scores were computed for these landmarks (their stats.json's fingerprint), or one line."""
    run_fp = fingerprint([(b.name, ds.fingerprint()) for b, ds in zip(benchmarks, datasets)])
    stats_path = scores / STATS
    if stats_path.is_file():
        fp = json.loads(stats_path.read_text()).get("landmarks_fingerprint")
        if fp and fp != run_fp:
            raise UserError(f"{stats_path}: scores were computed for other landmarks (fingerprint {fp} ≠ {run_fp})")


def cascaded_methods(descriptors: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """The methods described on a cascade's shortlist only (their candidates store.json's
    `cascade`, docs/cascade.md): how many candidates each described, of how many."""
    out = {}
    for d in descriptors:
        info = open_store(Path(d) / "candidates").info
        c = info.get("cascade")
        if c:
            out[info["method"]] = {"described": c["described"], "of": c["of"], "check": c["check"]}
    return out


def held_out_methods(descriptors: Sequence[Path], scores: Path, declared: Sequence[str]) -> list[str]:
    """The evaluated methods that took no part in mining (not among the scores' methods): the
    manifest's `evaluate: held_out` and any other method given only here. A declared one that
    score used, or that has no --descriptors folder, is one line."""
    given = [Path(d).name for d in descriptors]
    stats_path = scores / STATS
    mined = set(json.loads(stats_path.read_text()).get("methods") or {}) if stats_path.is_file() else set()
    if not mined:  # an older score folder: its per-method columns
        names = pq.read_schema(scores / SCORES).names if (scores / SCORES).is_file() else []
        mined = {c[len("score_"):] for c in names if c.startswith("score_")}
    for m in declared:
        if m in mined:
            raise UserError(f"held-out method {m!r} took part in mining ({stats_path} lists it): a held-out method "
                            "must never be scored; remove it from methods or from evaluate: held_out")
        if m not in given:
            raise UserError(f"held-out method {m!r}: give its folder too (--descriptors DESC/{m})")
    if not mined:  # nothing says which methods mined: only those declared held out are said to be
        return [m for m in given if m in declared]
    return [m for m in given if m not in mined]


def run_protocol(*, protocol: str, gt: Path, results: Results, out: Path | None = None,
                 setups: Sequence[str] = SETUPS) -> dict[str, Any]:
    """`mining evaluate --protocol`: one benchmark's metrics on a user's own results
    (JSON-ready); also the JSON file `out` when given. `protocol`: a name of
    `protocols/registry.py`'s REGISTRY; `gt`: the benchmark's ground truth (gnd_*.pkl, GLDv2's
    CSVs, Holidays' or UKBench's images); `results`: the user's rankings or descriptors (and
    their name lists); `setups`: the revisited setups reported for a gnd ground truth."""
    report = evaluate_protocol(protocol, gt, results, setups)
    if out is not None:
        atomic.write_json(out, report)
    return report
