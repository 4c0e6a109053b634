"""`snakemake --report report.zip` on the demo run (the session's shared `demo_run`, tests/conftest.py):
the key outputs are marked `report(...)` in workflows/rules/*.smk, so the zip holds the run's report,
evaluation.md, the dataset card and the selection's stats.json, byte for byte, each under its
category and with its caption (workflows/report/*.rst)."""

from __future__ import annotations

import re
import zipfile

from snakerun import DEMO_MANIFEST, failure_text, snakemake

KEY_OUTPUTS = {"report.html": "Result", "evaluation/evaluation.md": "Result", "evaluation/summary.md": "Result",
               "release/README.md": "Release",
               "selected/stats.json": "Selection"}


def test_snakemake_report_holds_the_key_outputs(demo_run, tmp_path):
    out = tmp_path / "report.zip"
    r = snakemake(demo_run, "--report", str(out), manifest=DEMO_MANIFEST, timeout=600)
    assert r.returncode == 0, failure_text(r)
    root = demo_run / "results/demo"
    with zipfile.ZipFile(out) as z:
        raw = {n: z.read(n) for n in z.namelist() if n.startswith("report/data/raw/")}  # raw/<hash>/<file name>
        index = z.read("report/report.html").decode("utf-8")
    for rel, category in KEY_OUTPUTS.items():
        data = (root / rel).read_bytes()
        assert any(n.endswith("/" + rel.rsplit("/", 1)[-1]) and b == data for n, b in raw.items()), (rel, list(raw))
        # the report's index files each output under its category
        assert re.search(rf'"{category}": \{{"Other": \[[^\]]*"results/demo/{re.escape(rel)}"', index), (rel, category)
    assert "The dataset card of the released set" in index  # workflows/report/card.rst, rendered
