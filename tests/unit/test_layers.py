"""The layers of the package (docs/architecture.md, "Layers"): each part of `mining/` imports only
what its row of the table names, every part has a row, and the store and retrieval core know no
method. The rule is the table itself, read from the page."""

from __future__ import annotations

import re

from test_code_shape import ROOT, import_graph, modules

ANY = None  # a part that may import anything (the CLI, auto_n.py)


def layer_rules(text: str) -> dict[str, set[str] | None]:
    """part -> the parts it may import, from the "may import" column of the Layers table."""
    section = text.split("### Layers", 1)[1].split("\n### ", 1)[0]
    rules: dict[str, set[str] | None] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        part = cells[0].strip("`").removesuffix("/").removesuffix(".py")
        rules[part] = ANY if cells[2] == "anything" else set(re.findall(r"`([\w]+)`", cells[2]))
    return rules


def part_of(module: str) -> str:
    """The part of `mining/` a module belongs to: its package under mining (`files`, `stages`, ...)
    or its own name for a top-level module (`errors`, `auto_n`); `mining` for the package root, and
    `cli` for `python -m mining`."""
    parts = module.split(".")
    part = parts[1] if len(parts) > 1 else parts[0]
    return "cli" if part == "__main__" else part


def offences(graph: dict[str, set[str]], rules: dict[str, set[str] | None]) -> list[str]:
    """`module imports target (part may import: ...)` for every import its part's row does not allow."""
    found = []
    for module, deps in sorted(graph.items()):
        here = part_of(module)
        allowed = rules.get(here, set())
        for dep in sorted(deps):
            there = part_of(dep)
            if dep.split(".")[0] != "mining" or there in (here, "mining") or allowed is ANY or there in allowed:
                continue
            found.append(f"{module} imports {dep} ({here} may import: {', '.join(sorted(allowed)) or 'nothing'})")
    return found


def reach(rules: dict[str, set[str] | None], start: str) -> set[str]:
    """Every part `start` may reach through the table's rows (what it can load, directly or not)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in rules.get(todo.pop()) or set():
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def the_rules() -> dict[str, set[str] | None]:
    return layer_rules((ROOT / "docs" / "architecture.md").read_text())


def test_every_import_is_one_its_layer_allows():
    found = offences(import_graph(modules()), the_rules())
    assert found == [], "docs/architecture.md, \"Layers\":\n" + "\n".join(found)


def test_every_part_of_the_package_has_a_row():
    rules = the_rules()
    parts = {part_of(m) for m in modules()}
    assert parts - set(rules) == set(), "give these a row in docs/architecture.md's Layers table"
    assert set(rules) - parts == set(), "the Layers table names parts that do not exist"
    named = set().union(*(r for r in rules.values() if r is not ANY))
    assert named - set(rules) == set(), "a row allows a part the table does not have"


def test_the_layers_have_no_cycle_and_the_core_knows_no_method():
    rules = the_rules()
    assert [p for p in rules if rules[p] is not ANY and p in reach(rules, p)] == []
    for core in ("retrieval", "kit"):
        assert {"methods", "settings", "stages", "cli", "auto_n"} & reach(rules, core) == set(), core
    assert "stages" not in set().union(*(reach(rules, p) for p in rules if p not in ("stages", "cli", "auto_n")))


def test_the_checks_see_an_offence():
    table = ("### Layers\n| part | what | may import |\n|---|---|---|\n| `errors.py` | x | nothing |\n"
             "| `files/` | y | `errors` |\n| `retrieval/` | z | `errors` `files` |\n| `methods/` | m | `retrieval` |\n"
             "| `cli/` | c | anything |\n\n### Next\n| `late/` | no | `cli` |\n")
    rules = layer_rules(table)
    assert rules == {"errors": set(), "files": {"errors"}, "retrieval": {"errors", "files"}, "methods": {"retrieval"},
                     "cli": ANY}
    graph = {"mining.retrieval.descriptors": {"mining.methods.base", "mining.files.atomic", "numpy", "mining"},
             "mining.files.atomic": {"mining.errors"}, "mining.cli": {"mining.methods", "mining.retrieval.kernels"},
             "mining.errors": {"mining.files.atomic"}}
    assert offences(graph, rules) == [
        "mining.errors imports mining.files.atomic (errors may import: nothing)",
        "mining.retrieval.descriptors imports mining.methods.base (retrieval may import: errors, files)"]
    assert reach(rules, "methods") == {"retrieval", "errors", "files"} and "methods" not in reach(rules, "retrieval")
    assert part_of("mining.stages.score.stage") == "stages" and part_of("mining.auto_n") == "auto_n"
    assert part_of("mining.__main__") == "cli" and part_of("mining") == "mining"
