"""The command line's modules import each other one way only: no import cycle between
``foundation_ai.cli`` and the modules of ``foundation_ai._cli``, counting imports inside
functions too (a lazy import still ties two modules together)."""

from __future__ import annotations

import ast
from pathlib import Path

import foundation_ai

SRC = Path(foundation_ai.__file__).parent
PACKAGE = "foundation_ai"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _known_modules() -> set[str]:
    return {_module_name(p) for p in SRC.rglob("*.py")}


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (module level and inside functions)."""
    known = _known_modules()
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        name = _module_name(path)
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in known)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = package.split(".")
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join([*base_parts, node.module] if node.module else base_parts)
                else:
                    base = node.module or ""
                if base in known:
                    edges.add(base)
                for alias in node.names:  # `from . import commands`: a submodule
                    if f"{base}.{alias.name}" in known:
                        edges.add(f"{base}.{alias.name}")
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]], nodes: set[str]) -> list[str] | None:
    """A cycle among ``nodes`` (edges leaving ``nodes`` are ignored), or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if m not in nodes:
                continue
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state and (found := visit(m)) is not None:
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(nodes):
        if n not in state and (found := visit(n)) is not None:
            return found
    return None


def _cli_modules(graph: dict[str, set[str]]) -> set[str]:
    return {m for m in graph if m == f"{PACKAGE}.cli" or m.startswith(f"{PACKAGE}._cli")}


def test_the_cli_modules_form_no_import_cycle() -> None:
    graph = import_graph()
    nodes = _cli_modules(graph)
    assert {f"{PACKAGE}.cli", f"{PACKAGE}._cli.commands", f"{PACKAGE}._cli.chat"} <= nodes
    assert find_cycle(graph, nodes) is None, " -> ".join(find_cycle(graph, nodes) or [])


def test_no_cli_module_imports_the_entry_point() -> None:
    """``foundation_ai.cli`` is the top: the pieces under ``_cli`` never import it back."""
    graph = import_graph()
    back = sorted(m for m in _cli_modules(graph) if f"{PACKAGE}.cli" in graph[m])
    assert back == []


def test_the_checker_sees_lazy_imports_and_finds_a_cycle() -> None:
    """The checker itself: it follows imports inside functions, and reports a planted cycle."""
    graph = import_graph()
    assert f"{PACKAGE}._cli.commands" in graph[f"{PACKAGE}.cli"]  # imported inside main()
    planted = {k: set(v) for k, v in graph.items()}
    planted[f"{PACKAGE}._cli.status"].add(f"{PACKAGE}._cli.commands")
    cycle = find_cycle(planted, _cli_modules(planted))
    assert cycle is not None and cycle[0] == cycle[-1]


def test_a_piped_local_run_does_not_import_the_markdown_renderer(tmp_path: Path) -> None:
    """``run`` piped (no terminal) prints plain text: rich's Markdown renderer and markdown-it,
    a tenth of a second of imports, are not loaded before the model (issue 31, the cold run).
    With ``-q`` nothing is rendered at all, so rich is not loaded; and a local model needs no
    HTTP client library: httpx2 (and httpcore2, which loads trio when it is installed) stay
    unloaded, as do the built-in tools nobody asked for and the modules of other commands."""
    import subprocess
    import sys

    import pytest

    pytest.importorskip("xllamacpp")
    from tests._cli_helpers import cli_env

    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "foundation_ai", "run", "-q", "--max-tokens", "4", "hi"],
        capture_output=True, text=True, env=cli_env(tmp_path), timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip()
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "foundation_ai._cli.run_output" in imported
    assert not {"rich.markdown", "markdown_it"} & imported
    unneeded = {"rich", "httpx2", "httpcore2", "trio", "foundation_ai.agentic.toolsets.builtin"}
    unneeded |= {"foundation_ai._cli.serve_cmd", "foundation_ai._cli.durable_cmds"}  # other commands
    assert not unneeded & imported, sorted(unneeded & imported)


def test_the_http_layer_loads_each_re_exported_name_on_use() -> None:
    """``backends._http`` re-exports lazily: every name in ``__all__`` resolves, and the names
    the CLI needs before any model call (``mask_url``, ``resolve_endpoint``) do not load httpx."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from foundation_ai.backends._http import mask_url, resolve_endpoint\n"
        "assert 'httpx2' not in sys.modules, 'httpx2 loaded'\n"
        "import foundation_ai.backends._http as h\n"
        "missing = [n for n in h.__all__ if getattr(h, n, None) is None]\n"
        "assert not missing, missing\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
