"""Running the workflow from tests: one Snakemake command line (tests/workflow, tests/slurm, tests/unit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pandas as pd

from paths import ROOT as REPO

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
DEMO_MANIFEST = REPO / "manifests" / "demo.yaml"


def path_without_venv() -> str:
    venv_bin = str(Path(sys.executable).parent)
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)


def snakemake_cmd(workdir: Path, *args: str, manifest: Path | None = None) -> list[str]:
    cmd = [*SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir), *args]
    if manifest is not None:
        cmd += ["--config", f"manifest={manifest}"]
    return cmd


def snakemake(workdir: Path, *args: str, manifest: Path | None = None, timeout: int = 1800, env=None, **kw):
    # No virtualenv on PATH, as after `make setup` without activating it: the rules must
    # find `mining` beside Snakemake's own Python.
    env = dict(os.environ if env is None else env, PATH=path_without_venv())
    return subprocess.run(snakemake_cmd(workdir, *args, manifest=manifest), capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


def failure_text(r: subprocess.CompletedProcess, results: Path | None = None) -> str:
    """The end of a failed run's output and of every rule log, for an assertion message."""
    logs = ""
    if results is not None and (results / "logs").exists():
        logs = "".join(f"\n--- {p}\n" + p.read_text()[-1500:] for p in sorted((results / "logs").rglob("*.log")))
    return r.stdout[-4000:] + r.stderr[-4000:] + logs


def wait_for(pred, timeout: float, proc: subprocess.Popen | None = None, what: str = "") -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended ({proc.returncode}) before {what}")
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _download_frame(path: Path) -> pd.DataFrame:
    """A status shard or the download's index.parquet, without what records time (`elapsed`:
    how long each request took) or the demo server's port (new each run) in its URLs."""
    df = pd.read_parquet(path).drop(columns=["elapsed"], errors="ignore").reset_index(drop=True)
    path_of = lambda u: urlsplit(u).path if isinstance(u, str) else u  # noqa: E731
    if "url" in df:
        df["url"] = [path_of(u) for u in df["url"]]
    if "tried" in df:  # [{source, url, status}, ...] per photo
        df["tried"] = [repr([{**t, "url": path_of(t["url"])} for t in ts]) for ts in df["tried"]]
    if "urls" in df:
        df["urls"] = [repr([path_of(u) for u in us]) for us in df["urls"]]
    return df


def _download_summary(path: Path) -> dict:
    # `this_run` (speeds, seconds) and the Dask dashboard's address say how and when, not what
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in ("this_run", "dashboard")}


def _store_info(path: Path, run_dir: Path) -> dict:
    # store.json records the absolute folders it read and learned from; the rest must be equal
    return json.loads(path.read_text().replace(str(run_dir.resolve()), "RUN"))


# JSON keys that record how long or when, not what (stats.json, evaluation.json)
TIME_KEYS = frozenset({"seconds", "elapsed_s", "mtime_ns"})


def _json_without_times(path: Path, run_dir: Path) -> object:
    def strip(x: object) -> object:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in TIME_KEYS}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return strip(json.loads(path.read_text().replace(str(run_dir.resolve()), "RUN")))


def _report_without_timings(path: Path) -> str:
    # the report's last table is the rules' snakemake benchmark files (seconds, RSS); its
    # provenance says when the report and the evaluation were written
    import re

    text = re.sub(r"(report built|evaluation written)</td><td>[^<]*</td>", r"\1</td><td></td>", path.read_text())
    start = text.find("<h3>Timings")
    return text if start < 0 else text[:start] + text[text.find("</table>", start):]


def _review_rows(path: Path) -> dict:
    # every table's rows, without the `created` timestamps of reviewers and votes
    import sqlite3

    con = sqlite3.connect(f"file:{path}?immutable=1", uri=True)  # reads only: no -wal/-shm files left
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        out = {}
        for t in tables:
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")') if r[1] != "created"]
            names = ", ".join(f'"{c}"' for c in cols)
            out[t] = con.execute(f'SELECT {names} FROM "{t}" ORDER BY {names}').fetchall()
        return out
    finally:
        con.close()


def assert_same_outputs(local: Path, other: Path, subdirs: tuple[str, ...] = ("",)) -> None:
    """Byte-identical results (under `subdirs` of results/demo), except fields that record
    time (durations, timestamps, input mtimes, the report's timings table), the run's own
    folder or the demo server's port."""
    a_root, b_root = local / "results" / "demo", other / "results" / "demo"
    differ = []
    for sub in subdirs:
        a_files = {p.relative_to(a_root) for p in (a_root / sub).rglob("*") if p.is_file()}
        b_files = {p.relative_to(b_root) for p in (b_root / sub).rglob("*") if p.is_file()}
        skip = {p for p in a_files | b_files if p.parts[0] in ("logs", "benchmarks")}
        assert a_files - skip == b_files - skip, sorted(map(str, (a_files ^ b_files) - skip))
        for rel in sorted(a_files - skip):
            a, b = a_root / rel, b_root / rel
            if a.read_bytes() == b.read_bytes():
                continue
            if rel.parts[:2] == ("images", "status") or rel.parts == ("images", "index.parquet"):
                if _download_frame(a).equals(_download_frame(b)):
                    continue
            elif rel.parts == ("images", "summary.json"):
                if _download_summary(a) == _download_summary(b):
                    continue
            elif rel.name == "store.json":
                if _store_info(a, local) == _store_info(b, other):
                    continue
            elif rel.suffix == ".json":
                if _json_without_times(a, local) == _json_without_times(b, other):
                    continue
            elif rel.name == "report.html":
                if _report_without_timings(a) == _report_without_timings(b):
                    continue
            elif rel.suffix == ".sqlite":
                if _review_rows(a) == _review_rows(b):
                    continue
            differ.append(str(rel))
    assert not differ, f"files differ from the local run: {differ}"
