"""Build the API reference (HTML) from the docstrings with pdoc (https://pdoc.dev).

    python docs/build_api.py [OUTPUT_DIR]      (default: docs/api, which git ignores)

``make docs`` runs this; ``tests/test_docs.py`` builds it into a temporary directory so the
reference cannot rot. Docstrings are Google style (``Args:``, ``Raises:``) with reST roles.
"""

from __future__ import annotations

import sys
from pathlib import Path

MODULES = [
    "foundation_ai",
    "foundation_ai.types",
    "foundation_ai.agentic",
    "foundation_ai.backends",
    "foundation_ai.router",
    "foundation_ai.schema",
    "foundation_ai.vectors",
    "foundation_ai.errors",
    "foundation_ai.agentic.errors",  # TurnFailedError and the other errors that carry a Turn
    "foundation_ai.pricing",
    "foundation_ai.memory",  # needs the `memory` extra
    "foundation_ai.durable",  # needs the `durable` extra
    "foundation_ai.serve",  # needs the `serve` extra
    "foundation_ai.telemetry",
    "foundation_ai.cli",
]
"""The public modules documented (each package's ``__all__`` decides what it shows)."""

BUILT_NOT_CONSTRUCTED = {"foundation_ai.agentic.AgentSession"}
"""Classes made by a builder (``AgentSession.builder(...)``): their ``__init__`` is internal and
is left out of the reference, and their methods (``builder``, ``ask``, ``run_turn``, ...) come
before their attributes (state the turn loop and the durable runner keep)."""


def _public_first(module: object) -> None:
    """In every class of ``module`` (a ``pdoc.doc.Module``), the constructor after the public
    names, or gone for :data:`BUILT_NOT_CONSTRUCTED`."""
    import pdoc.doc

    for member in module.flattened_own_members:  # type: ignore[attr-defined]
        if not isinstance(member, pdoc.doc.Class):
            continue
        own = member.own_members
        inits = [m for m in own if m.name == "__init__"]
        own[:] = [m for m in own if m.name != "__init__"]
        if f"{module.modulename}.{member.qualname}" not in BUILT_NOT_CONSTRUCTED:  # type: ignore[attr-defined]
            own.extend(inits)
            continue
        member.members.pop("__init__", None)
        own.sort(key=lambda m: not isinstance(m, pdoc.doc.Function))  # stable: source order kept


def build(output: Path) -> list[Path]:
    """Write the reference into ``output``; returns the HTML files written (the steps of
    ``pdoc.pdoc``, with :func:`_public_first` applied to each module)."""
    import pdoc.doc
    import pdoc.render

    pdoc.render.configure(docformat="google", search=True, show_source=False)
    modules = {name: pdoc.doc.Module.from_name(name) for name in MODULES}
    for module in modules.values():
        _public_first(module)
    for name, module in modules.items():
        page = output / (name.replace(".", "/") + ".html")
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(pdoc.render.html_module(module, modules), "utf-8")
    (output / "index.html").write_text(pdoc.render.html_index(modules), "utf-8")
    (output / "search.js").write_text(pdoc.render.search_index(modules), "utf-8")
    return sorted(output.rglob("*.html"))


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "api")
    files = build(out)
    print(f"API reference: {len(files)} pages in {out} (open {out / 'index.html'})")
