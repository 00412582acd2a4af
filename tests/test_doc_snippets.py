"""The code in the docs says what exists: the opening examples of docs/json-format.md and
docs/memory.md run as pasted (in a fresh interpreter, in an empty folder), and the tool names
docs/tools.md gives are the ones the library's FileToolset and the CLI's ``--tools files`` offer."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from foundation_ai.agentic.toolsets import FileToolset, MemoryFileSystem
from foundation_ai.agentic.toolsets.builtin import files_tools

DOCS = Path(__file__).resolve().parent.parent / "docs"


def first_python_block(page: str) -> str:
    found = re.search(r"```python\n(.*?)\n```", (DOCS / page).read_text(encoding="utf-8"), re.S)
    assert found is not None, f"{page} has no python block"
    return found.group(1)


def run_as_pasted(code: str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=600, check=False
    )


def test_the_json_format_example_runs_as_pasted(tmp_path: Path) -> None:
    done = run_as_pasted(first_python_block("json-format.md"), tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_memory_example_runs_as_pasted(tmp_path: Path) -> None:
    if importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("wordllama") is None:
        pytest.skip("the example runs the bundled model with the memory engines")
    code = first_python_block("memory.md")
    assert 'builder("local")' in code
    done = run_as_pasted(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "SessionEnding" in done.stdout
    assert (tmp_path / "chat.db").is_file()


def table_names(section: str, header: str) -> list[str]:
    """The backticked names in the first column of the table under ``header`` in ``section``."""
    text = (DOCS / "tools.md").read_text(encoding="utf-8")
    body = text.split(section, 1)[1]
    table = body.split(header, 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", table, re.M)


def test_the_tools_page_names_the_library_file_tools() -> None:
    offered = [t.declaration.name() for t in FileToolset(MemoryFileSystem({})).tools()]
    assert table_names("## Files", "| tool | arguments | notes |") == offered


def test_the_tools_page_names_exactly_the_cli_file_tools(tmp_path: Path) -> None:
    offered = [t.definition.name for t in files_tools(tmp_path)]
    assert offered == ["read_file", "write_file", "edit_file", "list_dir"]
    documented = table_names("### The CLI's file tools", "| CLI tool | arguments | library equivalent |")
    assert documented == offered
