"""`mining landmarks`: `run_check` (validate landmark datasets and find their landmarks) and
`run_build` (a landmark dataset from a CSV table of annotations), over the shared readers
`mining.datasets.datasetcheck` and `mining.datasets.landmarkbuild`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from mining.datasets.benchmarks import Benchmark, as_list, load_all, qualify
from mining.datasets.landmarkbuild import build_landmarks
from mining.datasets.datasetcheck import CheckReport, check_dataset


@dataclass(frozen=True)
class Checked:
    """What `run_check` found: the report in words and as JSON, each dataset's report, and
    the benchmarks checked together (None: one dataset)."""

    text: str
    doc: dict[str, Any]
    reports: list[tuple[Path, CheckReport]]
    benchmarks: list[Benchmark] | None

    def raise_errors(self) -> None:
        """UserError naming the first error of the first dataset that has one; with several
        benchmarks, also the same ground truth under two names."""
        for gnd, report in self.reports:
            report.raise_errors(gnd)
        if self.benchmarks is not None:
            load_all(self.benchmarks)


def run_check(*, gnd: Sequence[str], images: bool = True) -> Checked:
    """Check one landmark dataset (gnd_<name>.pkl, .mat or its folder), or several benchmarks
    of one run (`[NAME=]GND` each: each checked, and together); `images`: look for the query
    and database images on disk. Problems are collected; `Checked.raise_errors` raises the first."""
    if len(gnd) == 1:
        path = Path(gnd[0])
        report = check_dataset(path, images=images)
        return Checked(report.text(path), report.as_dict(), [(path, report)], None)
    benchmarks = as_list(gnd)  # distinct names
    reports = [check_dataset(b.gnd, images=images) for b in benchmarks]
    doc = {"benchmarks": [{"name": b.name, "gnd": b.gnd, **r.as_dict()} for b, r in zip(benchmarks, reports)],
           "landmarks": [{"name": qualify(b.name, lm["name"], True),
                          "queries": [qualify(b.name, q, True) for q in lm["queries"]]}
                         for b, r in zip(benchmarks, reports) for lm in r.landmarks],
           "queries": sum(r.queries for r in reports), "database": sum(r.database for r in reports)}
    text = "\n".join(f"[{b.name}] {r.text(b.gnd)}" for b, r in zip(benchmarks, reports))
    return Checked(text, doc, [(Path(b.gnd), r) for b, r in zip(benchmarks, reports)], benchmarks)


def run_build(*, table: str | Path, out: str | Path, name: str | None = None,
              images: str | Path | None = None) -> tuple[Path, CheckReport]:
    """Write OUT/jpg/ and OUT/gnd_<name>.pkl (name: OUT's folder name by default) from the CSV
    table (relative image paths from `images`, default the table's folder); return the gnd
    file and the check's report on it."""
    return build_landmarks(table, out, name, images)
