"""The user documentation cannot rot: the API reference builds from the docstrings (pdoc, into a
temporary directory), and every relative link in the README, ``docs/`` and ``examples/`` points
at a file that exists."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_api_reference_builds_from_the_docstrings(tmp_path: Path) -> None:
    builder = runpy.run_path(str(ROOT / "docs" / "build_api.py"))
    pages = builder["build"](tmp_path)
    names = {p.relative_to(tmp_path).as_posix() for p in pages}
    for module in builder["MODULES"]:
        assert module.replace(".", "/") + ".html" in names, module
    agentic = (tmp_path / "foundation_ai" / "agentic.html").read_text()
    for public in ("AgentSession", "TurnEvent", "SqliteSessionStore", "Raises"):
        assert public in agentic, public
    assert "run_turn_stream" in agentic
    assert (tmp_path / "index.html").exists() and (tmp_path / "search.js").exists()


def test_api_reference_covers_memory_durable_serve_and_telemetry_with_public_names_first(
    tmp_path: Path,
) -> None:
    builder = runpy.run_path(str(ROOT / "docs" / "build_api.py"))
    builder["build"](tmp_path)
    for module, public in (
        ("memory", "MemoryManager"),
        ("durable", "DurableClient"),
        ("serve", "create_app"),
        ("telemetry", "Raises"),
    ):
        page = (tmp_path / "foundation_ai" / f"{module}.html").read_text()
        assert public in page, (module, public)
    agentic = (tmp_path / "foundation_ai" / "agentic.html").read_text()
    members = re.findall(r'id="AgentSession\.([A-Za-z_]+)"', agentic)
    assert members[0] == "builder", members[:5]  # not the internal constructor, not its state
    assert "__init__" not in members
    assert members.index("run_turn") < members.index("replay")  # methods before internal state


def test_readme_names_the_extra_each_feature_needs_and_the_chromium_the_webchat_tests_need() -> None:
    import tomllib

    readme = (ROOT / "README.md").read_text()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for feature, extra in (
        ("`foundation-ai serve`", "serve"),
        ("`foundation-ai worker`", "durable"),
        ("`--mcp SERVER`", "mcp"),
        ("memory (", "memory"),
    ):
        row = next(line for line in readme.splitlines() if line.startswith(f"| {feature}"))
        assert f"'foundation-ai[{extra}]'" in row and extra in extras, (feature, row)
    assert "chromium-driver" in readme and "skipped without" in readme


def _relative_links(markdown: str) -> list[str]:
    links = re.findall(r"\]\(([^)\s]+)\)", markdown)
    return [
        link.split("#")[0] for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")
    ]


def test_relative_links_in_the_docs_point_at_files() -> None:
    pages = [ROOT / "README.md", ROOT / "examples" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        for link in _relative_links(page.read_text()):
            target = (page.parent / link).resolve()
            assert target.exists(), f"{page.relative_to(ROOT)} links to missing {link}"
            checked += 1
    assert checked >= 5


PRIVATE_CITATION = re.compile(
    r"seed 0\d\d|seed section|the seed's|wire-notes|wire-cases|\bcases? C\d\d|\(C\d\d|\bC\d\d[,;:)]|\.\./shared",
    re.IGNORECASE,
)
"""Citations of documents users do not have (the project's private spec, notes and case list)."""


def test_docstrings_and_docs_cite_only_what_users_have() -> None:
    """Docstrings and pages point at docs/ pages or providers' public docs, never at private
    documents; test names say the behaviour, not a case id."""
    files = [*sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE_CITATION.search(line)
    ]
    assert found == []
    case_named = [
        f"{path.name}: {name}"
        for path in sorted((ROOT / "tests").glob("test_*.py"))
        for name in re.findall(r"def (test_\w+)", path.read_text())
        if re.search(r"(^test_|_)c\d\d(_|$)", name)
    ]
    assert case_named == []
