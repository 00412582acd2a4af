"""The test suite never touches the user's data (issue 11, section 4): the default session
store and the platform data/config directories point into the suite's temporary home
(``FOUNDATION_AI_HOME``, ``XDG_*``, set in tests/conftest.py), subprocesses inherit that, and the
audit-hook guard that fails the run on any write to the real directories works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import platformdirs

from foundation_ai import AgentSession
from foundation_ai.agentic import ScriptedModel, SqliteSessionStore, say
from foundation_ai.agentic.stores import HOME_ENV, default_store_path

from . import conftest

ROOT = Path(__file__).resolve().parent.parent


def is_under(path: Path, parent: Path) -> bool:
    return path.resolve().is_relative_to(parent.resolve())


def test_default_store_is_in_the_suite_home_not_the_users_data_dir() -> None:
    path = default_store_path()
    assert is_under(path, conftest.SUITE_HOME)
    assert path == Path(os.environ[HOME_ENV]) / "sessions.sqlite3"
    for real in conftest.REAL_DIRS:
        assert not is_under(path, real)


def test_platform_directories_point_into_the_suite_home() -> None:
    if sys.platform.startswith("linux"):
        assert is_under(Path(platformdirs.user_data_dir("foundation-ai")), conftest.SUITE_HOME)
        assert is_under(Path(platformdirs.user_config_dir("foundation-ai")), conftest.SUITE_HOME)


def test_a_session_with_the_default_store_writes_into_the_suite_home() -> None:
    agent = AgentSession.builder(ScriptedModel([say("ok")])).with_store(SqliteSessionStore()).build()
    assert agent.run_turn("hi").text() == "ok"
    agent.close()
    assert default_store_path().exists()
    assert conftest.REAL_DIR_WRITES == []


def test_a_cli_subprocess_uses_the_suite_home() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    code = "from foundation_ai.agentic.stores import default_store_path; print(default_store_path())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert is_under(Path(out.stdout.strip()), conftest.SUITE_HOME)
    proc = subprocess.run(
        [sys.executable, "-m", "foundation_ai", "sessions"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert default_store_path().exists()


def test_the_guard_records_writes_to_the_real_directories() -> None:
    real = conftest.REAL_DIRS[0] / "sessions.sqlite3"
    before = len(conftest.REAL_DIR_WRITES)
    try:
        conftest._audit("open", (str(real), "ab", 0))
        conftest._audit("sqlite3.connect", (str(real),))
        conftest._audit("open", (str(real), "r", os.O_RDONLY))  # reading is not recorded
        conftest._audit("open", (str(conftest.SUITE_HOME / "x"), "w", 0))  # the suite home is fine
        assert len(conftest.REAL_DIR_WRITES) == before + 2
    finally:
        del conftest.REAL_DIR_WRITES[before:]


def test_nothing_was_written_to_the_real_directories_so_far() -> None:
    assert conftest.REAL_DIR_WRITES == []
