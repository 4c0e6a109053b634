"""The message a run prints when it stops for the human review: only when the queue is
there, and its commands work as printed in a fresh shell (no virtualenv activated)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from mining.stages.review.gate import next_steps
from mining.console.shell import mining_command, mining_executable

from paths import ROOT as REPO


def _paths(root: Path) -> dict[str, Path]:
    run = root / "my run"
    return {"queue": run / "scores/review_queue.parquet", "db": run / "review/review.sqlite",
            "images": run / "images", "landmarks": run / "world/landmarks/gnd_demo.pkl",
            "decisions": run / "review/decisions.parquet"}


def _fresh_shell_env() -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)
    return {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}


def test_nothing_is_said_until_the_queue_is_there_nor_after_the_decisions(tmp_path):
    p = _paths(tmp_path)
    assert next_steps(**p) is None  # a run stopped before score (e.g. --until geofilter)
    p["queue"].parent.mkdir(parents=True)
    p["queue"].write_bytes(b"x")
    assert next_steps(**p) is None  # queue written, review database not yet
    p["db"].parent.mkdir(parents=True)
    p["db"].write_bytes(b"x")
    assert "The review queue is ready" in next_steps(**p)
    p["decisions"].write_bytes(b"x")
    assert next_steps(**p) is None


def test_printed_commands_run_in_a_fresh_shell(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    p = _paths(tmp_path)
    for f in (p["queue"], p["db"]):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x")
    message = next_steps(**p)
    lines = [l.strip() for l in message.splitlines() if l.strip().startswith(mining_executable())]
    assert len(lines) == 2, message
    if (REPO / ".venv/bin/mining").is_file() and Path(sys.executable).parent == REPO / ".venv/bin":
        assert all(l.startswith(".venv/bin/mining review ") for l in lines), lines
    serve = shlex.split(lines[0])
    assert serve[serve.index("--db") + 1] == str(p["db"])  # the space survives the shell
    for line in lines:
        r = subprocess.run(["bash", "-c", line + " --help"], cwd=REPO, env=_fresh_shell_env(),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "usage: mining review" in r.stdout, (line, r.stderr[-1000:])


def test_mining_command_quotes_every_argument():
    line = mining_command("review", "export", "--out", "a b;touch X")
    assert shlex.split(line)[1:] == ["review", "export", "--out", "a b;touch X"]
