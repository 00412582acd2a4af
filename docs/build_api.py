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
    "foundation_ai.cli",
]
"""The public modules documented (each package's ``__all__`` decides what it shows)."""


def build(output: Path) -> list[Path]:
    """Write the reference into ``output``; returns the HTML files written."""
    import pdoc
    import pdoc.render

    pdoc.render.configure(docformat="google", search=True, show_source=False)
    pdoc.pdoc(*MODULES, output_directory=output)
    return sorted(output.rglob("*.html"))


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "api")
    files = build(out)
    print(f"API reference: {len(files)} pages in {out} (open {out / 'index.html'})")
