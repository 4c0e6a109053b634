"""The store and retrieval core know no method: what they need from one (a non-global store's
payload reader) is handed to them (`method_of`), never imported."""

from __future__ import annotations

from test_code_shape import import_graph, modules

CORE = ("mining.retrieval.descriptors", "mining.retrieval", "mining.retrieval.kernels", "mining.retrieval.metrics", "mining.retrieval.spatial",
        "mining.retrieval.reranking", "mining.kit")


def method_imports(graph: dict[str, set[str]], core: tuple[str, ...]) -> list[str]:
    """`module -> mining.methods...` for each module of `core` (or under it) that imports a method."""
    return sorted(f"{m} -> {d}" for m, deps in graph.items() if any(m == c or m.startswith(c + ".") for c in core)
                  for d in deps if d == "mining.methods" or d.startswith("mining.methods."))


def test_the_store_and_retrieval_core_know_no_method():
    assert method_imports(import_graph(modules()), CORE) == []


def test_the_check_sees_a_core_module_importing_a_method():
    graph = {"mining.retrieval.descriptors": {"mining.methods", "mining.files.atomic"}, "mining.kit.write": {"mining.methods.base"},
             "mining.stages.score.stage": {"mining.methods"}}
    assert set(method_imports(graph, CORE)) == {"mining.retrieval.descriptors -> mining.methods",
                                                "mining.kit.write -> mining.methods.base"}
