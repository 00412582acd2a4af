"""Persistence (issue 5, item 6): the SessionStore protocol, in-memory and SQLite stores (WAL,
one transaction per batch, default path in the user data dir), resume rebuilding the
conversation exactly, FailedAction never persisted, and a SIGKILL mid-turn losing at most the
in-flight generation (a real subprocess)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import (
    InMemorySessionStore,
    ScriptedModel,
    SessionNotFoundError,
    SessionStore,
    SqliteSessionStore,
    TurnOutcome,
    call,
    fail,
    say,
    think,
    tool,
)
from foundation_ai.agentic.stores import conversation_of, default_store_path
from foundation_ai.errors import FoundationAIError, TurnFailedError
from foundation_ai.types import (
    AgenticError,
    AssistantMessage,
    Messages,
    SessionRecord,
    TextContent,
    TokenSnapshot,
    ToolResultMessage,
    UserMessage,
)

from .test_agentic_loop import check_pairs

ROOT = Path(__file__).resolve().parent.parent


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def stores(tmp_path: Path) -> list[SessionStore]:
    return [InMemorySessionStore(), SqliteSessionStore(tmp_path / "s.db")]


def sample_records() -> list[SessionRecord]:
    u = Messages.user("hi")
    return [
        SessionRecord.Conversation(message=u),
        SessionRecord.FailedAction(error=AgenticError(kind="provider", message="x")),
        SessionRecord.Retracted(reason="r", message_ids=["abc"]),
        SessionRecord.Summary(message_count=1, usage=TokenSnapshot(input=3)),
    ]


@pytest.mark.parametrize("kind", [0, 1])
def test_store_roundtrip_and_failed_action_dropped(tmp_path: Path, kind: int) -> None:
    store = stores(tmp_path)[kind]
    assert isinstance(store, SessionStore)
    recs = sample_records()
    store.append("s1", recs)
    store.append("s2", recs[:1])
    store.append("s1", [])
    loaded = store.load("s1")
    assert loaded == [recs[0], recs[2], recs[3]]
    assert store.sessions() == ["s1", "s2"]
    assert store.load("nope") == []
    store.close()


def test_sqlite_wal_one_transaction_per_batch_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "sessions.db"
    store = SqliteSessionStore(path)
    assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    store.append("s", [SessionRecord.Conversation(message=Messages.user(str(i))) for i in range(5)])
    begins = [s for s in statements if s.startswith("BEGIN")]
    commits = [s for s in statements if s == "COMMIT"]
    assert len(begins) == 1 and len(commits) == 1
    store.close()
    again = SqliteSessionStore(path)
    again.append("s", [SessionRecord.Conversation(message=Messages.user("5"))])
    texts = [r.message.content.content for r in again.load("s")]  # type: ignore[union-attr]
    assert texts == ["0", "1", "2", "3", "4", "5"]


def test_default_store_is_sqlite_in_user_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``SqliteSessionStore()`` (the command line's store) is a file in the user data dir."""
    monkeypatch.delenv("FOUNDATION_AI_HOME", raising=False)  # the suite's override (tests/conftest.py)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    p = default_store_path()
    assert str(p).startswith(str(tmp_path)) and p.name == "sessions.sqlite3"
    agent = AgentSession.builder(ScriptedModel([say("ok")])).with_store(SqliteSessionStore()).build()
    assert isinstance(agent.store, SqliteSessionStore) and agent.store.path == str(p)
    agent.run_turn("hi")
    assert p.exists()
    assert [type(r).__name__ for r in SqliteSessionStore(p).load(agent.session_id)][
        -1
    ] == "SessionRecord.Summary"


def test_a_library_session_without_a_store_keeps_its_history_in_memory_and_writes_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FOUNDATION_AI_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    model = ScriptedModel([say("Hello Ada."), say("Ada.")])
    agent = AgentSession.builder(model).build()
    assert isinstance(agent.store, InMemorySessionStore)
    agent.run_turn("My name is Ada.")
    agent.run_turn("What is my name?")
    sent = [m.text() for m in model.interactions[1].messages]
    assert sent[:2] == ["My name is Ada.", "Hello Ada."]  # the history went with the second request
    assert not default_store_path().exists() and list(tmp_path.rglob("*.sqlite3")) == []
    with pytest.raises(SessionNotFoundError, match="no store was given"):
        AgentSession.builder(model).resume(agent.session_id)


@pytest.mark.parametrize("kind", [0, 1])
def test_resume_rebuilds_the_conversation_exactly(tmp_path: Path, kind: int) -> None:
    store = stores(tmp_path)[kind]
    m = ScriptedModel(
        [
            [think("plan", signature="sig"), say("Adding."), call("add", {"a": 1, "b": 2})],
            say("..."),  # vacuous: retracted, retried
            say("3"),
            [say("partial"), fail("HTTP 500 boom")],  # failed turn
            say("second try"),
        ],
        chunk_mode="delta",
    )
    agent = AgentSession.builder(m).with_tools(add).with_store(store).build()
    assert agent.run_turn("1+2").ok
    with pytest.raises(TurnFailedError) as caught:
        agent.run_turn("again")
    assert caught.value.turn.outcome is TurnOutcome.Failed
    assert agent.run_turn("and again").ok
    history = agent.history()
    assert not any(isinstance(r, SessionRecord.FailedAction) for r in history)
    assert sum(isinstance(r, SessionRecord.Summary) for r in history) == 3
    resumed = (
        AgentSession.builder(ScriptedModel([say("more")]))
        .with_tools(add)
        .with_store(store)
        .resume(agent.session_id)
    )
    assert resumed.session_id == agent.session_id
    assert resumed.messages == agent.messages  # exact: ids, timestamps, signatures, usage
    assert conversation_of(history) == agent.messages
    thinking = [
        x
        for x in resumed.messages
        if isinstance(x, AssistantMessage) and x.content.__class__.__name__ == "ThinkingContent"
    ]
    assert thinking[0].content.signature == "sig"  # type: ignore[union-attr]
    turn = resumed.run_turn("continue")
    assert turn.text() == "more"
    m2 = resumed.model
    assert [x.id for x in m2.interactions[0].messages[:-1]] == [x.id for x in agent.messages]


def test_resume_unknown_session(tmp_path: Path) -> None:
    with pytest.raises(FoundationAIError):
        AgentSession.builder(ScriptedModel()).with_store(InMemorySessionStore()).resume("missing")


def _run_child(db: Path, sid: str, where: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "_agent_subprocess.py"), str(db), sid, where],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())
            if line.strip() == "BLOCKED":
                break
        assert lines[-1:] == ["BLOCKED"], (lines, proc.stderr.read() if proc.stderr else "")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert "TURN1" in lines


def _texts(msgs: list[Any]) -> list[str]:
    out = []
    for x in msgs:
        c = getattr(x, "content", None)
        out.append(
            f"{type(x).__name__.split('.')[-1]}:{getattr(c, 'content', None) or getattr(c, 'name', None) or getattr(c, 'thinking', '')}"
        )
    return out


def test_sigkill_during_a_tool_loses_nothing_but_the_running_call(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    _run_child(db, "sess-tool", "tool")
    store = SqliteSessionStore(db)
    history = store.load("sess-tool")
    msgs = conversation_of(history)
    # turn 1 complete; turn 2's prompt and its whole generation (thinking, text, call) persisted
    assert _texts(msgs) == [
        "User:What is 1 + 2?",
        "Assistant:add",
        "ToolResult:3",
        "Assistant:1 + 2 = 3",
        "User:Now something slow.",
        "Assistant:call the slow tool",
        "Assistant:Working on it.",
        "Assistant:hang",
    ]
    resumed = (
        AgentSession.builder(ScriptedModel([say("resumed fine")]))
        .with_tools(add)
        .with_store(store)
        .resume("sess-tool")
    )
    last = resumed.messages[-1]
    assert isinstance(last, ToolResultMessage) and last.tool_call_id == "call_hang" and last.is_error
    check_pairs(resumed.messages)
    assert resumed.run_turn("status?").text() == "resumed fine"


def test_sigkill_mid_generation_loses_only_that_generation(tmp_path: Path) -> None:
    db = tmp_path / "killed2.db"
    _run_child(db, "sess-gen", "generation")
    store = SqliteSessionStore(db)
    msgs = conversation_of(store.load("sess-gen"))
    assert _texts(msgs) == [
        "User:What is 1 + 2?",
        "Assistant:add",
        "ToolResult:3",
        "Assistant:1 + 2 = 3",
        "User:Now something slow.",
    ]
    resumed = AgentSession.builder(ScriptedModel([say("answer")])).with_store(store).resume("sess-gen")
    assert isinstance(resumed.messages[-1], UserMessage)
    assert resumed.run_turn("hello?").ok
    assert resumed.messages[-1].content == TextContent("answer")  # type: ignore[union-attr]


async def test_async_history_and_resume(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "a.db")
    async with AgentSession.builder(ScriptedModel([say("one")])).with_store(store).build() as agent:
        await agent.arun_turn("hi")
        history = await agent.ahistory()
        assert [type(r).__name__ for r in history] == [
            "SessionRecord.Conversation",
            "SessionRecord.Conversation",
            "SessionRecord.Summary",
        ]
        sid = agent.session_id
    again = (
        await AgentSession.builder(ScriptedModel())
        .with_store(SqliteSessionStore(tmp_path / "a.db"))
        .aresume(sid)
    )
    assert [m.content for m in again.messages] == [TextContent("hi"), TextContent("one")]  # type: ignore[union-attr]


def test_two_store_objects_share_one_file(tmp_path: Path) -> None:
    """Two connections (e.g. two processes) appending to one session interleave without losing rows."""
    a = SqliteSessionStore(tmp_path / "shared.db")
    b = SqliteSessionStore(tmp_path / "shared.db")
    for i in range(3):
        a.append("s", [SessionRecord.Conversation(message=Messages.user(f"a{i}"))])
        b.append("s", [SessionRecord.Conversation(message=Messages.user(f"b{i}"))])
    texts = [r.message.content.content for r in a.load("s")]  # type: ignore[union-attr]
    assert texts == ["a0", "b0", "a1", "b1", "a2", "b2"]
    assert a.sessions() == ["s"]
