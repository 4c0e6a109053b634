"""`snakemake --report report.zip` on the demo run (the session's shared `demo_run`, tests/conftest.py):
the key outputs are marked `report(...)` in workflows/rules/*.smk, so the zip holds the run's report,
evaluation.md, the dataset card and the selection's stats.json, each under its category."""

from __future__ import annotations

import zipfile

from snakerun import DEMO_MANIFEST, failure_text, snakemake


def test_snakemake_report_holds_the_key_outputs(demo_run, tmp_path):
    out = tmp_path / "report.zip"
    r = snakemake(demo_run, "--report", str(out), manifest=DEMO_MANIFEST, timeout=600)
    assert r.returncode == 0, failure_text(r)
    names = zipfile.ZipFile(out).namelist()
    for key in ("results/demo/report.html", "results/demo/evaluation/evaluation.md",
                "results/demo/release/README.md", "results/demo/selected/stats.json"):
        assert any(n.endswith(key) for n in names), (key, names)
    # the categories and captions reach the report's index
    index = "".join(zipfile.ZipFile(out).read(n).decode("utf-8", "replace") for n in names
                    if n.endswith((".html", ".js")) and "results/demo" not in n)
    for category in ("Result", "Release", "Selection"):
        assert category in index, category
