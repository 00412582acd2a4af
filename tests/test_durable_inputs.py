"""What ``foundation-ai worker`` and ``submit`` (and ``DurableClient.enqueue_turn``) refuse at
once, with a clear message and exit status 2: an agent factory that does not give an agent,
and a turn id already taken by another session or prompt. Real CLI subprocesses on embedded
SQLite databases in ``tmp_path``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dbos")

from foundation_ai.durable import DurableClient, DurableConfig, TurnIdConflictError
from foundation_ai.errors import ConfigurationError

from ._durable_pool import ROOT


def _cli(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "FOUNDATION_AI_HOME": str(tmp_path / "home"),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
    }
    return subprocess.run(
        [sys.executable, "-m", "foundation_ai", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("factory", "says"),
    [
        ("os:getcwd", "agent factory os:getcwd: returned str, not an AgentSessionBuilder"),
        ("json:dumps", "agent factory json:dumps: calling it raised TypeError"),
    ],
)
def test_worker_exits_2_at_start_when_the_agent_factory_gives_no_agent_builder(
    tmp_path: Path, factory: str, says: str
) -> None:
    db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
    r = _cli(tmp_path, "worker", "--db", db, "--agent", factory, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"foundation-ai: error: {says}"), r.stderr
    assert "worker ready" not in r.stderr


def test_submit_refuses_a_turn_id_taken_by_another_session_or_prompt(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
    first = _cli(tmp_path, "submit", "sessG", "the prompt", "--turn-id", "tF", "--db", db)
    assert first.returncode == 0 and first.stdout.strip() == "tF", first.stderr
    again = _cli(tmp_path, "submit", "sessG", "the prompt", "--turn-id", "tF", "--db", db)
    assert again.returncode == 0 and again.stdout.strip() == "tF", again.stderr  # idempotent
    other_prompt = _cli(tmp_path, "submit", "sessG", "DIFFERENT prompt", "--turn-id", "tF", "--db", db)
    assert other_prompt.returncode == 2 and other_prompt.stdout == "", other_prompt.stderr
    assert (
        "turn id 'tF' is already taken by a turn of this session with another prompt" in other_prompt.stderr
    )
    other_session = _cli(tmp_path, "submit", "sessH", "the prompt", "--turn-id", "tF", "--db", db)
    assert other_session.returncode == 2 and other_session.stdout == "", other_session.stderr
    assert "turn id 'tF' is already taken by a turn of session 'sessG'" in other_session.stderr
    with DurableClient(DurableConfig(db)) as client:
        [row] = client.turns()
        assert (row["turn_id"], row["session_id"], row["status"]) == ("tF", "sessG", "ENQUEUED")
        assert (
            client.handle("tF").prompt_id
            == client.enqueue_turn("sessG", "the prompt", turn_id="tF").prompt_id
        )


def test_enqueue_turn_with_a_taken_turn_id_raises_a_typed_error(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
    with DurableClient(DurableConfig(db)) as client:
        h = client.enqueue_turn("s1", ["part one", "part two"], turn_id="t1")
        assert client.enqueue_turn("s1", ["part one", "part two"], turn_id="t1").prompt_id == h.prompt_id
        with pytest.raises(TurnIdConflictError, match="another prompt") as err:
            client.enqueue_turn("s1", ["part one"], turn_id="t1")
        assert isinstance(err.value, ConfigurationError) and err.value.session_id == "s1"
        with pytest.raises(TurnIdConflictError, match="a turn of session 's1'"):
            client.enqueue_turn("s2", ["part one", "part two"], turn_id="t1")
        assert [r["turn_id"] for r in client.turns()] == ["t1"]
