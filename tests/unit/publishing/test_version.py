"""mining.publishing.version: what made a published file (the card, kit.json, the report)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mining.publishing.version import code_version


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def test_local_changes_anywhere_in_the_checkout_are_said(tmp_path):
    """A change to any tracked file (a rule, not only the package) is a local change; a new
    untracked file (a results folder) is not."""
    repo = tmp_path / "checkout"
    (repo / "mining" / "publishing").mkdir(parents=True)
    (repo / "workflows").mkdir()
    (repo / "mining" / "publishing" / "version.py").write_text("x = 1\n")
    (repo / "workflows" / "score.smk").write_text("rule score:\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    here = repo / "mining" / "publishing"
    clean = code_version(here)
    assert clean["commit"] == _git(repo, "rev-parse", "HEAD").strip()
    assert clean["local_changes"] == "no"
    (repo / "results").mkdir()
    (repo / "results" / "run.txt").write_text("an output\n")
    assert code_version(here)["local_changes"] == "no"
    (repo / "workflows" / "score.smk").write_text("rule score:\n    threads: 2\n")
    assert code_version(here)["local_changes"] == "yes"


def test_outside_a_checkout_there_is_no_commit(tmp_path):
    info = code_version(tmp_path)
    assert info["commit"] is None and info["local_changes"] is None
    assert info["package"].startswith("distractor-mining ")
