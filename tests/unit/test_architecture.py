"""docs/architecture.md's rules, checked on the source: every stage is a package
`mining/stages/<stage>/` with its CLI verb beside it (`cli.py`), and the list of stages is that
layout's (the CLI's verbs, this test, docs/stages.md); a stage imports no other stage, and the
shared code outside `mining/stages/` imports none (only the CLI, which wires verbs to stages,
and `mining/auto_n.py`, select's `n: auto`, may import several). The unit tests mirror the
package (docs/development.md): a module's tests are found by its path."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from mining.cli import build_parser
from mining.stages import names

from paths import ROOT, TESTS

PACKAGE = ROOT / "mining"
STAGES = set(names())
JOINS = {"cli", "auto_n"}  # may import several stages
SHAPE_CHECKS = {"test_architecture.py", "test_code_shape.py", "test_layers.py"}  # of the whole package


def _imported_stages(tree: ast.AST) -> set[tuple[str, int]]:
    found = set()
    for node in ast.walk(tree):
        names_: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "mining.stages":
                names_ = [f"mining.stages.{a.name}" for a in node.names]
            else:
                names_ = [node.module]
        elif isinstance(node, ast.Import):
            names_ = [a.name for a in node.names]
        for name in names_:
            parts = name.split(".")
            if len(parts) >= 3 and parts[:2] == ["mining", "stages"] and parts[2] in STAGES:
                found.add((parts[2], node.lineno))
    return found


def _owner(rel: Path) -> str:
    """The stage a module belongs to, or the shared module's name."""
    return rel.parts[1] if rel.parts[0] == "stages" and len(rel.parts) > 2 else rel.parts[0].removesuffix(".py")


def test_every_stage_is_a_package_with_its_verb_and_the_cli_lists_exactly_those():
    found = {p.parent.name for p in (PACKAGE / "stages").glob("*/cli.py")}
    assert found == STAGES and len(STAGES) >= 14
    assert all((PACKAGE / "stages" / s / "__init__.py").is_file() for s in STAGES)
    verbs = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert list(verbs) == names()
    # no stage package at the top of the package (the shared dataset reader is
    # `mining/datasets/landmarks.py`, its check `datasetcheck.py`, beside the `landmarks` stage's
    # verbs), and no verb outside its stage
    assert not STAGES & {p.name for p in PACKAGE.iterdir() if p.is_dir()}
    assert sorted(p.name for p in (PACKAGE / "cli").glob("*.py")) == ["__init__.py"]
    assert [p for p in PACKAGE.rglob("*.py") if "def register(" in p.read_text() and p.name != "cli.py"] == []


def test_every_stage_has_its_rule_file_and_the_snakefile_includes_them_all():
    """The Snakefile includes workflows/rules/<stage>.smk for every stage (the list is
    mining.stages.names()), so a rule file is one per stage and none lies unread beside them."""
    rules = {p.stem for p in (ROOT / "workflows" / "rules").glob("*.smk")}
    assert rules == STAGES | {"common"}, sorted(rules ^ (STAGES | {"common"}))
    snakefile = (ROOT / "Snakefile").read_text()
    assert 'for _stage in _stages.names():' in snakefile and 'include: f"workflows/rules/{_stage}.smk"' in snakefile
    assert re.findall(r'^\s*include:\s*"([^"]+)"', snakefile, re.M) == ["workflows/rules/common.smk"]


def test_docs_stages_has_a_section_per_stage():
    headings = [line for line in (ROOT / "docs" / "stages.md").read_text().splitlines() if line.startswith("## ")]
    assert {verb for line in headings for verb in re.findall(r"`mining (\w+)", line)} == STAGES


def test_no_stage_imports_another_stage_and_shared_code_imports_none():
    offences = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        owner = _owner(rel)
        if owner in JOINS:
            continue
        for stage, line in _imported_stages(ast.parse(path.read_text(), str(path))):
            if stage != owner:
                offences.append(f"mining/{rel}:{line} imports mining.stages.{stage}")
    assert offences == [], "\n".join(offences)


def test_the_check_sees_an_offence(tmp_path):
    """The scanner finds every import form (a check that cannot fail checks nothing)."""
    src = "import mining.stages.score\nfrom mining.stages import select\nfrom mining.stages.evaluate.metrics import x\n" \
          "def f():\n    from mining.stages.review import database\n"
    assert {s for s, _ in _imported_stages(ast.parse(src))} == {"score", "select", "evaluate", "review"}
    assert _imported_stages(ast.parse("from mining import metrics, flickr\nfrom .score import x\n")) == set()
    assert _owner(Path("stages/select/stage.py")) == "select" and _owner(Path("retrieval.py")) == "retrieval"


def _unmirrored(unit: Path) -> list[str]:
    """Test files under `unit` (tests/unit) whose path is not the path of what they test:
    tests/unit/<path>/test_<x>.py for a module mining/<path>/<x>.py or the package mining/<path>/
    itself (x is its name), tests/unit/benchmarks/test_<x>.py for benchmarks/<x>.py, and the
    checks of the whole package's shape at the top."""
    wrong = []
    for test in sorted(unit.rglob("test_*.py")):
        rel = test.relative_to(unit)
        name = rel.stem.removeprefix("test_")
        if rel.parts[0] == "benchmarks":
            ok = len(rel.parts) == 2 and (ROOT / "benchmarks" / f"{name}.py").is_file()
        elif len(rel.parts) == 1:
            ok = rel.name in SHAPE_CHECKS or (PACKAGE / f"{name}.py").is_file()
        else:
            folder = PACKAGE.joinpath(*rel.parts[:-1])
            ok = (folder / "__init__.py").is_file() and (name == folder.name or (folder / f"{name}.py").is_file())
        if not ok:
            wrong.append(f"tests/unit/{rel.as_posix()}")
    return wrong


def test_the_unit_tests_mirror_the_package_and_every_test_file_name_is_unique():
    """A module's tests are found by its path (docs/development.md); and pytest, in its default
    `prepend` import mode with no __init__.py, imports every test file by its basename: two alike
    would collide."""
    assert _unmirrored(TESTS / "unit") == []
    by_name: dict[str, list[str]] = {}
    for test in sorted(TESTS.rglob("test_*.py")):
        by_name.setdefault(test.name, []).append(test.relative_to(TESTS).as_posix())
    assert {n: paths for n, paths in by_name.items() if len(paths) > 1} == {}
