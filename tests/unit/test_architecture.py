"""docs/architecture.md's rule, checked on the source: a stage imports no other stage (only the
CLI, which wires verbs to stages, may import several)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mining"
STAGES = {"ingest", "geofilter", "download", "describe", "score", "review", "select", "audit", "neardup", "leakrisk",
          "evaluate", "report", "release"}


def _imported_stages(tree: ast.AST) -> set[tuple[str, int]]:
    found = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "mining":
                names = [f"mining.{a.name}" for a in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if len(parts) >= 2 and parts[0] == "mining" and parts[1] in STAGES:
                found.add((parts[1], node.lineno))
    return found


def test_no_stage_imports_another_stage():
    offences = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        owner = rel.parts[0].removesuffix(".py")
        if owner == "cli":
            continue
        for stage, line in _imported_stages(ast.parse(path.read_text(), str(path))):
            if stage != owner:
                offences.append(f"mining/{rel}:{line} imports mining.{stage}")
    assert offences == [], "\n".join(offences)


def test_the_check_sees_an_offence(tmp_path):
    """The scanner finds every import form (a check that cannot fail checks nothing)."""
    src = "import mining.score\nfrom mining import select\nfrom mining.evaluate.metrics import x\n" \
          "def f():\n    from mining.review import db\n"
    assert {s for s, _ in _imported_stages(ast.parse(src))} == {"score", "select", "evaluate", "review"}
    assert _imported_stages(ast.parse("from mining import metrics, flickr\nfrom .score import x\n")) == set()
