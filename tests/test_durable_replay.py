"""Replaying a turn stores nothing twice: the persist phases with ``host.replay`` (what a
durable step runner relies on after a crash), on a real SQLite store and a loopback model
server, with an in-memory recording step runner following the ``StepRunner`` contract."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from foundation_ai.agentic.stores.sqlite import SqliteSessionStore
from foundation_ai.agentic.turn import StepRunner
from foundation_ai.durable.worker import open_session
from foundation_ai.types import Messages, ToolCall, ToolResultMessage

from ._durable_app import FakeModelServer, agent, effects_table
from ._durable_pool import expected_history, normalized

pytest.importorskip("dbos")

from foundation_ai.durable.worker import split_replay


class Crash(Exception):
    pass


class Recorder(StepRunner):
    """Records each step's result by key; replays recorded ones; raises ``Crash`` at ``crash_at``."""

    def __init__(self, log: dict[str, Any], crash_at: str | None = None) -> None:
        self.log, self.crash_at, self.ran = log, crash_at, []

    async def generation(self, step: Any) -> AsyncGenerator[Any, None]:
        if step.key in self.log:
            step.restore(self.log[step.key])
            return
        if step.key == self.crash_at:
            raise Crash(step.key)
        self.ran.append(step.key)
        async for item in step.stream():
            yield item
        self.log[step.key] = step.snapshot()

    async def tool_call(
        self, call: ToolCall, run: Callable[[], Awaitable[ToolResultMessage]]
    ) -> ToolResultMessage:
        key = f"tool:{call.id}"
        if key not in self.log:
            self.ran.append(key)
            self.log[key] = await run()
        result: ToolResultMessage = self.log[key]
        return result


@pytest.mark.parametrize("crash_at", ["generation:2", "generation:3"])
async def test_a_turn_replayed_after_a_crash_stores_the_history_of_an_uninterrupted_run(
    tmp_path: Path, crash_at: str
) -> None:
    os.environ["FA_EFFECTS_DB"] = str(tmp_path / "effects.sqlite3")
    os.environ["FA_SLOW"] = "0"
    effects_table(os.environ["FA_EFFECTS_DB"]).close()
    store = SqliteSessionStore(tmp_path / "s.sqlite3")
    prompt = Messages.user("replay me")
    log: dict[str, Any] = {}
    with FakeModelServer(token_delay=0) as srv:
        os.environ["FA_MODEL_URL"] = srv.base_url
        first = open_session(agent().with_store(store).with_step_runner(Recorder(log, crash_at)), "s")
        with pytest.raises(Crash):
            await first.arun_turn([prompt])
        stored_before = len(store.load("s"))
        assert stored_before >= 3  # the prompt, a call and its result were stored
        history, replay = split_replay(store.load("s"), prompt.id)
        assert history == [] and len(replay.messages) == stored_before
        done_before = set(log)
        runner = Recorder(log)
        second = open_session(agent().with_store(store).with_step_runner(runner), "s")
        second.messages = history
        second.replay = replay  # type: ignore[attr-defined]
        turn = await second.arun_turn([prompt])
    assert turn.ok and turn.text() == "done: replay me"
    assert runner.ran[0] == crash_at and not done_before & set(runner.ran)  # completed steps not re-run
    assert normalized(store.load("s")) == expected_history(["replay me"])
    c = effects_table(os.environ["FA_EFFECTS_DB"])
    assert c.execute("SELECT COUNT(*) FROM effects").fetchone()[0] == 1
    store.close()


def test_a_summary_stored_by_the_interrupted_run_is_not_stored_again(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.sqlite3")
    os.environ["FA_EFFECTS_DB"] = str(tmp_path / "effects.sqlite3")
    effects_table(os.environ["FA_EFFECTS_DB"]).close()
    prompt = Messages.user("twice")
    log: dict[str, Any] = {}
    with FakeModelServer(token_delay=0) as srv:
        os.environ["FA_MODEL_URL"] = srv.base_url
        open_session(agent().with_store(store).with_step_runner(Recorder(log)), "s").run_turn([prompt])
        history, replay = split_replay(store.load("s"), prompt.id)
        assert replay.summary is not None
        again = open_session(agent().with_store(store).with_step_runner(Recorder(log)), "s")
        again.messages, again.replay = history, replay  # type: ignore[attr-defined]
        again.run_turn([prompt])
    assert normalized(store.load("s")) == expected_history(["twice"])
    store.close()
