"""Sessions and their store (issue 10 kind C7, issue 11 section 4): a session records its model
string, system prompt and tool names with its records; ``resume`` restores them where the builder
was not told; ``build(id)`` refuses an id the store holds; a store write that fails ends the turn
failed (kind ``"store"``) with memory and store consistent, and the next turn writes the pending
records first; a write waiting for a lock never blocks other sessions on the event loop."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import (
    InMemorySessionStore,
    ScriptedModel,
    SessionExistsError,
    SqliteSessionStore,
    StoreError,
    TurnOutcome,
    call,
    hook,
    say,
    tool,
)
from foundation_ai.agentic.stores import SessionHeader, conversation_of
from foundation_ai.errors import ConfigurationError, FoundationAIError, TurnFailedError
from foundation_ai.types import Messages, SessionRecord

ROOT = Path(__file__).resolve().parent.parent
PROCS = Path(__file__).resolve().parent / "_store_procs.py"


@tool
def failed_turn(run: Any) -> Any:
    """The ``Turn`` of a failed turn (``run_turn`` raises ``TurnFailedError`` carrying it)."""
    with pytest.raises(TurnFailedError) as caught:
        run()
    return caught.value.turn


def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool
def search(q: str) -> str:
    """Search."""
    return "found " + q


class FlakyStore(InMemorySessionStore):
    """An in-memory store whose writes fail while ``down`` is set (a real StoreError)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.failed = 0

    def append(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None:
        if self.down:
            self.failed += 1
            raise StoreError("disk full (simulated)", path="flaky", retryable=True)
        super().append(session_id, records, header)

    async def aappend(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None:
        self.append(session_id, records, header)


def test_build_on_an_existing_id_refuses_and_points_at_resume() -> None:
    store = InMemorySessionStore()
    first = AgentSession.builder(ScriptedModel([say("hi")])).with_store(store).build("ada")
    first.run_turn("hello")
    with pytest.raises(SessionExistsError, match=r"resume\('ada'\)") as info:
        AgentSession.builder(ScriptedModel()).with_store(store).build("ada")
    assert isinstance(info.value, FoundationAIError) and info.value.session_id == "ada"
    assert AgentSession.builder(ScriptedModel()).with_store(store).build("bob").session_id == "bob"


def test_resume_takes_a_unique_id_prefix_and_names_what_it_cannot_find(tmp_path: Path) -> None:
    """As the CLI's ``-S``: a prefix of exactly one stored id resumes it; no match and an
    ambiguous prefix raise ``SessionNotFoundError`` (a ``FoundationAIError``), the ambiguous one
    listing the candidates."""
    from foundation_ai.agentic import SessionNotFoundError

    store = SqliteSessionStore(tmp_path / "s.db")
    for sid in ("ada-1", "ada-2", "bob-1"):
        AgentSession.builder(ScriptedModel([say("hi")])).with_store(store).build(sid).run_turn("hello")
    resumed = AgentSession.builder(ScriptedModel()).with_store(store).resume("bob")
    assert resumed.session_id == "bob-1" and len(resumed.messages) == 2
    with pytest.raises(SessionNotFoundError, match="ambiguous") as amb:
        AgentSession.builder(ScriptedModel()).with_store(store).resume("ada")
    assert amb.value.candidates == ["ada-1", "ada-2"]
    for missing in ("carl", "", "   "):
        with pytest.raises(SessionNotFoundError, match="no stored session") as info:
            AgentSession.builder(ScriptedModel()).with_store(store).resume(missing)
        assert isinstance(info.value, FoundationAIError) and info.value.candidates == []
    store.close()


def test_a_session_records_model_system_prompt_and_tools(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    model = ScriptedModel([[call("add", {"a": 1, "b": 2})], say("3")], name="tiny")
    agent = (
        AgentSession.builder(model)
        .with_system_prompt("Be brief.")
        .with_tools(add, search)
        .with_store(store)
        .build()
    )
    agent.run_turn("1+2?")
    meta = store.session_meta(agent.session_id)
    assert meta is not None
    assert (meta.model, meta.system_prompt, meta.tools) == ("scripted:tiny", "Be brief.", ("add", "search"))
    assert meta.message_count == 4 and meta.title == "1+2?"
    agent.system_prompt = "Be very brief."  # a change is recorded with the next records
    model.extend(say("ok"))
    agent.run_turn("again")
    meta = store.session_meta(agent.session_id)
    assert meta is not None and meta.system_prompt == "Be very brief." and meta.message_count == 6
    agent.close()


def test_resume_restores_model_system_prompt_and_tools_the_builder_was_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    store = SqliteSessionStore(tmp_path / "s.db")
    agent = (
        AgentSession.builder(ScriptedModel([say("hi")]))
        .with_system_prompt("Answer in French.")
        .with_tools(add, search)
        .with_store(store)
        .build()
    )
    agent.run_turn("hello")
    sid = agent.session_id
    store.append(
        sid,
        [],
        SessionHeader(model="openai:gpt-4o-mini", system_prompt="Answer in French.", tools=("add", "search")),
    )
    again = AgentSession.builder().with_store(store).with_tool_catalog(search, add).resume(sid)
    assert again.model.descriptor.name == "gpt-4o-mini"
    assert again.model.descriptor.provider == "openai"
    assert again.system_prompt == "Answer in French."
    assert again.registry.names() == ["add", "search"]
    assert [m.text() for m in again.messages] == ["hello", "hi"]
    assert again.meta is not None and again.meta.message_count == 2
    # what the builder says wins
    mine = ScriptedModel()
    told = (
        AgentSession.builder(mine)
        .with_system_prompt("Be terse.")
        .with_tools(add)
        .with_store(store)
        .resume(sid)
    )
    assert told.model is mine and told.system_prompt == "Be terse." and told.registry.names() == ["add"]


def test_a_session_on_another_server_records_its_base_url_and_resumes_against_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from foundation_ai import model as load_model
    from tests._cli_helpers import text_stream
    from tests._fixture_server import FixtureServer

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    store = SqliteSessionStore(tmp_path / "s.db")
    with FixtureServer() as srv:
        srv.queue(text_stream("One."), text_stream("Two."))
        host = srv.base_url.partition("://")[2]
        # user info is a credential, never recorded (a query is refused: test_model_strings.py)
        url = f"http://user:secret@{host}/v1"
        agent = AgentSession.builder(load_model("openai:remote-model", base_url=url, api_key="k"))
        first = agent.with_store(store).build()
        first.run_turn("first")
        meta = store.session_meta(first.session_id)
        assert meta is not None and meta.model == "openai:remote-model"
        assert meta.base_url == f"http://{host}/v1"
        again = AgentSession.builder().with_store(store).resume(first.session_id)
        assert again.run_turn("second").text() == "Two."
        assert len(srv.requests) == 2 and srv.requests[1].path == "/v1/chat/completions"
        assert srv.requests[1].json()["model"] == "remote-model"
        assert "authorization" not in {k.lower() for k in srv.requests[1].headers}  # no key follows it
    # the provider's own host and in-process models record none
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    own = AgentSession.builder(load_model("openai:gpt-4o-mini")).with_store(store).build()
    assert own.session_header().base_url is None
    assert AgentSession.builder(ScriptedModel()).build().session_header().base_url is None


def test_resume_without_a_model_needs_one_recorded() -> None:
    store = InMemorySessionStore()
    store.append("old", [SessionRecord.Conversation(message=Messages.user("x"))])
    with pytest.raises(ConfigurationError, match="recorded no model"):
        AgentSession.builder().with_store(store).resume("old")
    with pytest.raises(ConfigurationError, match="no model"):
        AgentSession.builder().with_store(store).build()


def test_a_failed_write_ends_the_turn_typed_and_the_next_turn_writes_the_pending_records() -> None:
    store = FlakyStore()
    model = ScriptedModel([[call("add", {"a": 1, "b": 2})], say("3"), say("fine")])
    agent = AgentSession.builder(model).with_tools(add).with_store(store).build()
    store.down = True
    with pytest.raises(TurnFailedError) as caught:  # run_turn raises for a failed turn
        agent.run_turn("1+2?")
    turn = caught.value.turn
    assert caught.value.kind == "store"
    assert turn.outcome is TurnOutcome.Failed
    assert turn.error is not None and turn.error.kind == "store" and turn.error.retryable
    assert "disk full" in turn.error.message
    assert isinstance(turn.records[-1], SessionRecord.FailedAction)
    assert store.load(agent.session_id) == []  # nothing half-written
    in_memory = list(agent.messages)
    assert [m.text() for m in in_memory] == ["1+2?"]
    assert agent.pending_records  # kept for the next write
    store.down = False
    turn2 = agent.run_turn("still there?")
    assert turn2.ok
    assert agent.pending_records == []
    stored = conversation_of(store.load(agent.session_id))
    assert stored == agent.messages  # the store caught up, in order
    assert stored[: len(in_memory)] == in_memory


def test_a_write_failing_mid_turn_pairs_open_tool_calls_and_stays_consistent() -> None:
    store = FlakyStore()
    calls_seen: list[int] = []

    def go_down() -> None:
        store.down = True

    model = ScriptedModel([[call("add", {"a": 1, "b": 2}), hook(go_down)], say("3"), say("ok")])
    agent = AgentSession.builder(model).with_tools(add).with_store(store).build()
    turn = failed_turn(lambda: agent.run_turn("1+2?"))
    calls_seen.append(len(turn.tool_calls()))
    assert turn.outcome is TurnOutcome.Failed and turn.error is not None and turn.error.kind == "store"
    assert calls_seen == [1]
    assert len(turn.tool_results()) == 1  # the open call got an "interrupted" result, in memory
    store.down = False
    agent.flush()
    assert conversation_of(store.load(agent.session_id)) == agent.messages
    assert agent.run_turn("go on").ok


def test_a_lock_held_past_the_busy_timeout_fails_the_turn_and_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = SqliteSessionStore(db, busy_timeout=0.2)
    agent = (
        AgentSession.builder(ScriptedModel([say("one"), say("two"), say("three")])).with_store(store).build()
    )
    agent.run_turn("first")
    locker = subprocess.Popen(
        [sys.executable, str(PROCS), "lock", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
        turn = failed_turn(lambda: agent.run_turn("second"))
        assert turn.outcome is TurnOutcome.Failed and turn.error is not None and turn.error.kind == "store"
        assert "locked" in turn.error.message
    finally:
        assert locker.stdin is not None
        locker.stdin.write("\n")
        locker.stdin.close()
        locker.wait(timeout=30)
    assert len(conversation_of(store.load(agent.session_id))) == 2  # the store has the first turn only
    assert agent.run_turn("third").ok
    assert [m.text() for m in conversation_of(store.load(agent.session_id))] == [
        m.text() for m in agent.messages
    ]
    agent.close()


def test_200_sessions_progress_while_one_session_waits_for_a_locked_store(tmp_path: Path) -> None:
    db = tmp_path / "locked.db"
    locked_store = SqliteSessionStore(db, busy_timeout=60)
    order: list[str] = []
    locker = subprocess.Popen(
        [sys.executable, str(PROCS), "lock", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"

    async def waiting() -> Any:
        agent = AgentSession.builder(ScriptedModel([say("late")])).with_store(locked_store).build()
        turn = await agent.arun_turn("blocked by the lock")
        order.append("locked session done")
        return turn

    async def other(n: int, store: InMemorySessionStore) -> None:
        agent = AgentSession.builder(ScriptedModel([say(f"a{n}"), say(f"b{n}")])).with_store(store).build()
        assert (await agent.arun_turn("q")).ok and (await agent.arun_turn("q2")).ok
        order.append("other")

    async def main() -> Any:
        blocked = asyncio.create_task(waiting())
        await asyncio.sleep(0)
        shared = InMemorySessionStore()
        await asyncio.gather(*(other(n, shared) for n in range(200)))
        order.append("others done, lock still held" if locker.poll() is None else "lock gone")
        assert locker.stdin is not None
        locker.stdin.write("\n")
        locker.stdin.flush()
        await asyncio.to_thread(locker.wait, 30)
        return await blocked

    try:
        turn = asyncio.run(main())
    finally:
        if locker.poll() is None:
            locker.kill()
    assert order[:200] == ["other"] * 200
    assert order[200:] == ["others done, lock still held", "locked session done"]
    assert turn.ok
    (sid,) = locked_store.sessions()
    stored = conversation_of(locked_store.load(sid))
    assert [m.text() for m in stored] == ["blocked by the lock", "late"]
    locked_store.close()


def test_closing_a_session_writes_the_records_a_failed_write_left_pending() -> None:
    store = FlakyStore()
    agent = AgentSession.builder(ScriptedModel([say("hello")])).with_store(store).build()
    store.down = True
    assert failed_turn(lambda: agent.run_turn("hi")).outcome is TurnOutcome.Failed
    store.down = False
    memory = list(agent.messages)
    agent.close()
    assert conversation_of(store.load(agent.session_id)) == memory
