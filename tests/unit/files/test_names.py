"""Each file between stages is named once (`mining/files/names.py`): no other module of `mining/`
and no workflow rule (the Snakefile, `workflows/rules/*.smk`) spells one of its names in a string,
a path or a sentence of a help text or a message alike (docstrings and comments may mention
them). The run layout, the stages, the report and the kit take the name from the constant."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from mining.files import names

from paths import ROOT

OWNER = ROOT / "mining" / "files" / "names.py"


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that stand alone as a statement (docstrings, attribute notes)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def python_strings(text: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant of a Python module but its docstrings (the parts
    of an f-string and the strings inside its fields included)."""
    tree = ast.parse(text)
    skip = _docstrings(tree)
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip)


def rule_strings(text: str) -> list[tuple[int, str]]:
    """(line, text) of every string token of a Snakemake rule file but one that stands alone as
    a statement (a docstring); comments are not tokens of this kind."""
    out, before = [], tokenize.NEWLINE
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING and before not in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL):
            out.append((tok.start[0], tok.string))
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            before = tok.type
    return out


def spelled(text: str, outputs=names.OUTPUTS) -> list[str]:
    """The output names a string spells: as itself, in a path or in a sentence (`a/scores.parquet`,
    `{out}/stats.json`, `reads scores.parquet`), not a longer name that ends in one
    (`shortlist_stats.json`) nor a name with one inside (`audit.json.bak` is a name of its own)."""
    return [n for n in outputs if re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-]|\.\w)", text)]


def offences(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted((root / "mining").rglob("*.py")):
        if path.resolve() == OWNER.resolve():
            continue
        found += [f"{path.relative_to(root)}:{line}: {n}" for line, s in python_strings(path.read_text()) for n in spelled(s)]
    for path in [root / "Snakefile", *sorted((root / "workflows" / "rules").glob("*.smk"))]:
        found += [f"{path.relative_to(root)}:{line}: {n}" for line, s in rule_strings(path.read_text()) for n in spelled(s)]
    return found


def test_no_module_spells_a_name_the_owner_holds():
    found = offences()
    assert found == [], "take these names from mining/files/names.py:\n" + "\n".join(found)


def test_the_owner_names_each_file_once():
    assert len(set(names.OUTPUTS)) == len(names.OUTPUTS)
    constants = {k: v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)}
    assert sorted(constants.values()) == sorted(names.OUTPUTS), "every constant of names.py is in OUTPUTS"


def test_the_run_layout_builds_its_paths_from_the_names():
    from mining.settings.layout import RunLayout

    L = RunLayout("R")
    assert L.scores_table == f"R/scores/{names.SCORES}" and L.shortlist_stats == f"R/cascade/{names.SHORTLIST_STATS}"
    assert L.cascade_check.endswith("/" + names.CASCADE_CHECK) and L.store("m", "s").endswith("/" + names.STORE)


def test_the_check_sees_an_offence():
    module = ('"""Writes scores.parquet (a docstring may say so)."""\n'
              'X = "scores.parquet"  # a comment may too\n'
              'def f(out):\n    """stats.json"""\n    return f"{out}/stats.json", out / "x_stats.json", "a/leakrisk.parquet"\n'
              'raise UserError(f"{p}: no store.json; run it") from None  # scores.parquet.bak\n')
    hits = [(line, n) for line, s in python_strings(module) for n in spelled(s)]
    assert hits == [(2, "scores.parquet"), (5, "stats.json"), (5, "leakrisk.parquet"), (6, "store.json")]
    assert spelled("see scores.parquet.") == ["scores.parquet"] and spelled("scores.parquet.bak x_stats.json") == []
    rules = ('rule a:\n    """neardup.parquet"""\n    output: L.neardup_table, "b/neardup.parquet"  # c/stats.json\n'
             'X = "store.json"\n')
    assert [(line, n) for line, s in rule_strings(rules) for n in spelled(s)] == [(3, "neardup.parquet"), (4, "store.json")]
