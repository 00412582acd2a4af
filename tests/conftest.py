"""Shared fixtures, and the suite's own data directories.

**The user's data is never touched.** Before any test runs, ``FOUNDATION_AI_HOME`` (the
directory of the default session store, see ``foundation_ai.agentic.stores.default_store_path``)
and ``XDG_DATA_HOME`` / ``XDG_CONFIG_HOME`` / ``XDG_STATE_HOME`` (what ``platformdirs`` uses on
Linux) point into one temporary directory for the whole session; subprocesses inherit them. An
audit hook records every attempt of this process to open for writing, or to connect SQLite to,
anything under the user's real foundation-ai data or config directory, and the session fails at
its end if there was one (``tests/test_user_data_dir.py`` checks the guard itself).

``llama_server``: one real llama.cpp HTTP server (xllamacpp) on 127.0.0.1 for the whole test
session, serving the bundled SmolLM2-135M GGUF. Outside CI a machine without xllamacpp skips
the tests that need it; under CI (``CI=true``) that is a failure, so a broken install cannot
hide behind skips.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import platformdirs
import pytest

# ---- the suite's data directories (before anything computes a default path) -------------------

REAL_DIRS: tuple[Path, ...] = (
    Path(platformdirs.user_data_dir("foundation-ai", appauthor=False)),
    Path(platformdirs.user_config_dir("foundation-ai", appauthor=False)),
)
"""The user's real foundation-ai directories, resolved before the suite redirects them."""

SUITE_HOME = Path(tempfile.mkdtemp(prefix="foundation-ai-suite-"))
os.environ["FOUNDATION_AI_HOME"] = str(SUITE_HOME / "home")
for _var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
    os.environ[_var] = str(SUITE_HOME / _var.lower())

REAL_DIR_WRITES: list[str] = []
"""Every attempt of this process to write to (or open SQLite in) a real directory."""

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_REAL_PREFIXES = tuple(str(p.resolve()) + os.sep for p in REAL_DIRS) + tuple(
    str(p.resolve()) for p in REAL_DIRS
)


def _under_real_dir(path: Any) -> bool:
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str) or not path or path == ":memory:":
        return False
    full = os.path.abspath(path)
    return any(full == p or full.startswith(p) for p in _REAL_PREFIXES)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if writing and _under_real_dir(path):
            REAL_DIR_WRITES.append(f"open({path!r}, {mode or flags!r})")
    elif event == "sqlite3.connect":
        if _under_real_dir(args[0]):
            REAL_DIR_WRITES.append(f"sqlite3.connect({args[0]!r})")
    elif event in ("os.mkdir", "os.rename", "os.remove", "shutil.rmtree") and _under_real_dir(args[0]):
        REAL_DIR_WRITES.append(f"{event}({args[0]!r})")


sys.addaudithook(_audit)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if anything tried to write to the user's real directories; remove the
    suite's temporary home."""
    if REAL_DIR_WRITES:
        lines = "\n  ".join(REAL_DIR_WRITES[:20])
        sys.stderr.write(
            f"\nFAILED: the test suite wrote to the user's real data/config directory:\n  {lines}\n"
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    shutil.rmtree(SUITE_HOME, ignore_errors=True)


# ---- fixtures -----------------------------------------------------------------------------------

from tests._llama_server import LlamaServerHandle, LlamaServerUnavailable, start_llama_server  # noqa: E402


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServerHandle]:
    """A running loopback llama.cpp server; ``.base_url`` is ``http://127.0.0.1:PORT``."""
    try:
        handle = start_llama_server(n_ctx=2048)
    except LlamaServerUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"llama.cpp server unavailable in CI: {exc}")
        pytest.skip(str(exc))
    with handle:
        yield handle
