"""mining.settings.layout.RunLayout is the run's real layout: every path it names exists after the
session's local demo run (tests/conftest.py), and the report finds every stage through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mining.settings.layout import RunLayout
from mining.stages.report.stage import inputs_from_run

pytestmark = pytest.mark.slow

# paths only a manifest with `cascade:` makes (docs/cascade.md); the demo has none
CASCADE = {"cascade", "shortlist", "shortlist_stats", "cascade_check"}


def _paths(lay: RunLayout) -> dict[str, str]:
    names = [n for n, v in vars(RunLayout).items() if isinstance(v, property)]
    return {n: getattr(lay, n) for n in names}


def test_every_layout_path_exists_after_a_demo_run(demo_run):
    lay = RunLayout(str(demo_run / "results/demo"))
    paths = _paths(lay)
    assert len(paths) >= 40
    missing = {n: p for n, p in paths.items() if not Path(p).exists()}
    assert set(missing) == CASCADE, missing
    for method in ("cnn-gem", "rsift-asmk", "rsift-vlad"):
        for set_name in ("queries", "database", "candidates"):
            assert Path(lay.store(method, set_name)).is_file()
    for rule in ("ingest", "geofilter", "download", "score", "select", "evaluate", "report", "release"):
        assert Path(lay.log(rule)).is_file() and Path(lay.bench(rule)).is_file(), rule


def test_the_report_finds_every_stage_of_a_run_through_the_layout(demo_run):
    inp = inputs_from_run(demo_run / "results/demo")
    found = {k: v for k, v in vars(inp).items() if k not in ("extra", "manifest", "cascade")}
    assert all(v is not None for v in found.values()), found
    assert inp.cascade is None  # a run without a cascade has no CASCADE folder
    assert inp.evaluation == Path(RunLayout(str(demo_run / "results/demo")).evaluation_json)
