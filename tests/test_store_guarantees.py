"""What the stores guarantee a session (issue 28, section 3): a turn never leaves a record its
store cannot load (a tool call nested 129-980 levels deep is kept as text, beside its error
result); no store call blocks the event loop while another process holds the SQLite lock; and
session, durable and vector database files are created readable by the user alone (0600, in a
0700 folder). Real SQLite files and real sessions."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import ScriptedModel, SqliteSessionStore, call, say, tool
from foundation_ai.agentic.stores import aappend, conversation_of
from foundation_ai.types import AgentProgress, Messages, SessionRecord, Stream, ToolCall, ToolResultMessage


@tool
def echo(a: Any = None) -> str:
    """Echo.

    Args:
        a: Anything.
    """
    return "echoed"


def nested(depth: int) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for _ in range(depth - 1):
        args = {"a": args}
    return args


@pytest.mark.parametrize("depth", [129, 300, 980])
def test_a_tool_call_nested_too_deep_is_stored_loadable_beside_its_error_result(
    tmp_path: Path, depth: int
) -> None:
    path = tmp_path / "s.sqlite3"
    model = ScriptedModel([[call("echo", nested(depth), id="deep")], say("Sorry.")])
    agent = AgentSession.builder(model).with_store(SqliteSessionStore(path)).with_tools(echo).build()
    turn = agent.run_turn("go deep")
    assert turn.ok
    sid = agent.session_id
    agent.close()
    store = SqliteSessionStore(path)
    records = store.load(sid, strict=True)  # strict: raises if any row does not decode
    assert not store.corrupt_records
    msgs = conversation_of(records)
    (calls,) = [m for m in msgs if isinstance(getattr(m, "content", None), ToolCall)]
    (result,) = [m for m in msgs if isinstance(m, ToolResultMessage)]
    assert result.tool_call_id == calls.content.id == "deep"  # no result without its call
    assert "deeper than 100 levels" in (result.error_detail or result.text() or "")
    assert calls.content.arguments is None and calls.content.raw_arguments is not None
    assert calls.content.raw_arguments.count("{") == depth  # the model's arguments, kept as text
    assert msgs.index(calls) < msgs.index(result)
    again = AgentSession.builder(ScriptedModel([say("ok")])).with_store(store).with_tools(echo).resume(sid)
    assert again.messages == msgs and again.run_turn("and now?").ok
    again.close()


def test_a_locked_sqlite_store_never_blocks_the_event_loop(tmp_path: Path) -> None:
    """Another process holds the write lock; 200 sessions' writes wait for it on the store's
    worker thread while the loop keeps running: a heartbeat on the loop releases the lock after
    20 beats. Were any write waiting on the loop itself, the heartbeat could not beat, the lock
    would outlive the busy timeout and the writes would fail."""
    path = tmp_path / "s.sqlite3"
    store = SqliteSessionStore(path, busy_timeout=20.0)
    store.append("warm", [SessionRecord.Conversation(message=Messages.user("x"))])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    beats = 0

    async def heartbeat(release_after: int) -> None:
        nonlocal beats
        while beats < release_after:
            await asyncio.sleep(0.005)
            beats += 1
        holder.execute("COMMIT")

    async def main() -> int:
        writes = [
            aappend(store, f"s{i}", [SessionRecord.Conversation(message=Messages.user(f"hi {i}"))])
            for i in range(200)
        ]
        beat = asyncio.create_task(heartbeat(20))
        await asyncio.gather(*writes)
        await beat
        return beats

    assert asyncio.run(asyncio.wait_for(main(), 60)) >= 20
    holder.close()
    assert len(store.sessions()) == 201
    store.close()


def test_a_memory_pass_writes_its_records_off_the_event_loop(tmp_path: Path) -> None:
    from foundation_ai.memory import MemoryConfig
    from tests.test_memory_session import memory_model

    path = tmp_path / "s.sqlite3"
    mem, _ = memory_model()
    store = SqliteSessionStore(path, busy_timeout=20.0)
    agent = (
        AgentSession.builder(ScriptedModel([say("Nice to meet you, Ada.")]))
        .with_store(store)
        .with_memory(MemoryConfig(embedder=False, observation_trigger_tokens=5, memory_model=mem))
        .build()
    )
    holder = sqlite3.connect(path, isolation_level=None)
    beats = 0
    locked = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal beats
        await locked.wait()
        while beats < 20:
            await asyncio.sleep(0.005)
            beats += 1
        holder.execute("COMMIT")

    async def main() -> Any:
        beat = asyncio.create_task(heartbeat())
        stream = agent.run_turn_stream("My name is Ada.")
        seen = []
        async for item in stream:
            seen.append(item)
            if isinstance(item, Stream.Pending) and isinstance(item.value, AgentProgress.ProcessingMemory):
                holder.execute("BEGIN EXCLUSIVE")  # the observation's write waits for this lock
                locked.set()
        await beat
        return stream.turn

    turn = asyncio.run(asyncio.wait_for(main(), 60))
    assert beats == 20 and turn.ok
    assert any(isinstance(r, SessionRecord.Observation) for r in turn.records)
    assert any(isinstance(r, SessionRecord.Observation) for r in store.load(agent.session_id))
    holder.close()
    agent.close()


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_data_files_and_their_folder_are_created_readable_by_the_user_alone(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask: files would be 0644, folders 0755
    try:
        sessions = SqliteSessionStore(tmp_path / "home" / "sessions.sqlite3")
        sessions.append("s", [SessionRecord.Conversation(message=Messages.user("secret"))])
        assert mode(tmp_path / "home") == 0o700
        for name in ("sessions.sqlite3", "sessions.sqlite3-wal", "sessions.sqlite3-shm"):
            assert mode(tmp_path / "home" / name) == 0o600, name
        sessions.close()

        pytest.importorskip("sqlite_vec")
        from foundation_ai.vectors import SqliteVecStore, VectorEntry

        vectors = SqliteVecStore(tmp_path / "vec" / "deeper" / "vectors.sqlite3", dimensions=2)
        vectors.upsert([VectorEntry("a", [1.0, 0.0])])
        assert mode(tmp_path / "vec") == 0o700 and mode(tmp_path / "vec" / "deeper") == 0o700
        assert mode(tmp_path / "vec" / "deeper" / "vectors.sqlite3") == 0o600
        vectors.close()

        pytest.importorskip("dbos")
        from foundation_ai.durable import DurableConfig

        url = DurableConfig(f"sqlite:///{tmp_path / 'dur' / 'durable.sqlite3'}").system_database_url
        assert url.endswith("durable.sqlite3.dbos")
        assert mode(tmp_path / "dur") == 0o700 and mode(tmp_path / "dur" / "durable.sqlite3.dbos") == 0o600
        existing = tmp_path / "mine"
        existing.mkdir(mode=0o755)
        SqliteSessionStore(existing / "s.sqlite3").close()
        assert mode(existing) == 0o755  # a folder that was there is left as it is
        assert mode(existing / "s.sqlite3") == 0o600
    finally:
        os.umask(old)
