"""Where the tests find the repository's files, whatever folder a test file sits in:
ROOT (the repository), TESTS (tests/), DATA (tests/data, real files with their PROVENANCE.txt)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
DATA = TESTS / "data"
OXFORD = DATA / "oxford5k_gt"  # the real Oxford 5k ground truth; see PROVENANCE.txt there
