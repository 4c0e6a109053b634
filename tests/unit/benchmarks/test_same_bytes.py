"""benchmarks/same_bytes.py: two run folders compared file by file."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from paths import ROOT


def _run(root, port: int, seconds: float, score: float) -> None:
    out = root / "results" / "demo"
    (out / "scores").mkdir(parents=True)
    (out / "scores" / "same.txt").write_text("a line\n")
    (out / "scores" / "stats.json").write_text(json.dumps({"seconds": {"total": seconds}, "candidates": 3}))
    (out / "images").mkdir()
    (out / "images" / "where.txt").write_text(f"{root}/results/demo/images http://127.0.0.1:{port}/1_a_b.jpg\n")
    pq.write_table(pa.table({"path": [f"{root}/results/demo/images/1.jpg"]}), out / "images" / "index.parquet",
                   compression="zstd")
    pq.write_table(pa.table({"score": [score]}), out / "scores" / "scores.parquet")


def test_only_real_changes_are_left_and_json_keys_are_named(tmp_path):
    _run(tmp_path / "one", 41463, 1.5, 2.25)
    _run(tmp_path / "two", 39629, 3.0, 2.25)
    r = subprocess.run([sys.executable, "-m", "benchmarks.same_bytes", str(tmp_path / "one/results/demo"),
                        str(tmp_path / "two/results/demo")], cwd=ROOT, capture_output=True, text=True, check=True)
    lines = r.stdout.splitlines()
    assert json.loads(lines[-1]) == {"same": 2, "same_but_run_folder": 1, "same_table_not_bytes": 1, "differ": 1,
                                     "only_a": 0, "only_b": 0}
    assert "DIFFER scores/stats.json keys: seconds.total" in lines and "TABLE-SAME images/index.parquet" in lines
    _run(tmp_path / "three", 41463, 1.5, 2.5)  # a changed score is a change
    (tmp_path / "three/results/demo/scores/extra.txt").write_text("new\n")
    r = subprocess.run([sys.executable, "-m", "benchmarks.same_bytes", str(tmp_path / "one/results/demo"),
                        str(tmp_path / "three/results/demo")], cwd=ROOT, capture_output=True, text=True, check=True)
    lines = r.stdout.splitlines()
    assert "DIFFER scores/scores.parquet" in lines and "ONLY-B scores/extra.txt" in lines
    assert json.loads(lines[-1])["differ"] == 1
