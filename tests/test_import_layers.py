"""The layers of docs/concepts.md ("Layers") hold for the import graph: no module imports one of a
package that (directly or through others) imports it back, unless both belong to one package. The
layer order itself is the import-linter contract in ``pyproject.toml`` (run by ``make check``)."""

from __future__ import annotations

import sys

import grimp


def _package_of(module: str, modules: set[str]) -> str:
    """A package's ``__init__`` belongs to the package itself, any other module to its parent."""
    is_package = any(m.startswith(module + ".") for m in modules)
    return module if is_package else module.rpartition(".")[0]


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_between_modules_of_different_packages() -> None:
    """Every import statement counts, type-only and function-level ones included (grimp reads
    them all); a cycle among the modules of one package (a package's ``__init__`` loading its
    own modules lazily) is allowed."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    graph = grimp.build_graph("foundation_ai", cache_dir=None)
    modules = set(graph.modules)
    crossing = []
    for component in _cycles(graph):
        packages = {_package_of(m, modules) for m in component}
        if len(packages) > 1:
            crossing.append((sorted(packages), component))
    assert crossing == []


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("foundation_ai", cache_dir=None)


def test_the_agent_layer_imports_neither_memory_nor_telemetry() -> None:
    """Memory and tracing plug into the session through ``agentic/plugins.py`` (issue 24)."""
    graph = _graph()
    for above in ("foundation_ai.memory", "foundation_ai.telemetry"):
        chain = graph.find_shortest_chain(importer="foundation_ai.agentic", imported=above, as_packages=True)
        assert chain is None, chain


def test_the_root_errors_import_nothing_that_knows_a_turn() -> None:
    graph = _graph()
    chain = graph.find_shortest_chain(
        importer="foundation_ai.errors", imported="foundation_ai.agentic", as_packages=True
    )
    assert chain is None, chain


def test_the_server_does_not_import_the_command_line() -> None:
    """The built-in tools the server offers live in ``agentic/toolsets/builtin.py``."""
    graph = _graph()
    chain = graph.find_shortest_chain(
        importer="foundation_ai.serve", imported="foundation_ai._cli", as_packages=True
    )
    assert chain is None, chain


def test_the_cycle_finder_finds_a_cycle_across_packages() -> None:
    """The check above can fail: a graph with ``a.x -> b.y -> a.x`` is reported."""
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.a.x", "pkg.b", "pkg.b.y", "pkg.b.z"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a.x", imported="pkg.b.y")
    graph.add_import(importer="pkg.b.y", imported="pkg.a.x")
    graph.add_import(importer="pkg.b.y", imported="pkg.b.z")
    modules = set(graph.modules)
    components = _cycles(graph)
    assert components == [["pkg.a.x", "pkg.b.y"]]
    assert {_package_of(m, modules) for m in components[0]} == {"pkg.a", "pkg.b"}
