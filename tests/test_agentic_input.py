"""Bad input never reaches the store, one undecodable stored record never makes the store
unreadable, and a closed session raises a typed error (tester defects 1 and 4)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from foundation_ai import AgentSession
from foundation_ai._cli.session_index import describe_sessions
from foundation_ai.agentic import (
    CorruptRecordError,
    ScriptedModel,
    SessionClosedError,
    SqliteSessionStore,
    say,
)
from foundation_ai.errors import FoundationAIError
from foundation_ai.types import Messages, TextContent, UserMessage


def _session(store: Any = None, replies: int = 3) -> AgentSession:
    b = AgentSession.builder(ScriptedModel([say(f"ok {i}") for i in range(replies)]))
    if store is not None:
        b = b.with_store(store)
    return b.build()


@pytest.mark.parametrize("bad", [5, None, b"bytes", 1.5, ["x"]])
@pytest.mark.parametrize("ctor", ["user", "agent", "system"])
def test_message_constructors_reject_non_str(ctor: str, bad: Any) -> None:
    with pytest.raises(TypeError, match=rf"Messages\.{ctor}\(\) takes a str"):
        getattr(Messages, ctor)(bad)


@pytest.mark.parametrize("bad", [5, None, b"bytes", {"text": "hi"}, object()])
def test_turn_entry_points_reject_non_str_input_and_persist_nothing(tmp_path: Path, bad: Any) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    ag = _session(store)
    with pytest.raises(TypeError, match="must be a str"):
        ag.run_turn(bad)
    with pytest.raises(TypeError, match="must be a str"):
        ag.ask(bad)
    with pytest.raises(TypeError, match="must be a str"):
        ag.run_turn_stream(bad)
    with pytest.raises(TypeError, match="must be a str"):
        ag.run_turn([bad])
    with pytest.raises(TypeError, match="must be a str"):
        ag.steer(bad)
    with pytest.raises(TypeError, match="must be a str"):
        ag.follow_up(bad)
    # a message built around the constructors is refused too
    with pytest.raises(TypeError, match="text content must be a str"):
        ag.run_turn(UserMessage(content=TextContent(bad)))
    assert store.load(ag.session_id) == [] and store.sessions() == []
    # the session is still usable
    assert ag.ask("hi").text == "ok 0"


async def test_async_entry_points_reject_bad_input() -> None:
    ag = _session()
    with pytest.raises(TypeError):
        await ag.arun_turn(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await ag.aask(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ag.arun_turn_stream(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        await ag.arun_turn("")
    assert (await ag.aask("hi")).text == "ok 0"


@pytest.mark.parametrize("empty", ["", "   \n", [], ()])
def test_empty_prompt_is_a_value_error(empty: Any) -> None:
    from foundation_ai.errors import EmptyPromptError, FoundationAIError

    ag = _session()
    with pytest.raises(ValueError, match="empty") as raised:
        ag.run_turn(empty)
    assert isinstance(raised.value, EmptyPromptError) and isinstance(raised.value, FoundationAIError)
    with pytest.raises(ValueError, match="empty"):
        ag.run_turn_stream(empty)
    assert ag.messages == []


def test_empty_steer_and_follow_up_are_value_errors() -> None:
    ag = _session()
    with pytest.raises(ValueError, match="empty"):
        ag.steer("  ")
    with pytest.raises(ValueError, match="empty"):
        ag.follow_up("")
    with pytest.raises(ValueError, match="empty"):
        ag.run_turn(Messages.user(""))


def _corrupt_one_record(path: Path, session_id: str) -> None:
    """Overwrite the body of the session's first record with a document that does not decode
    (what an older version persisted for ``Messages.user(5)``)."""
    with sqlite3.connect(path) as c:
        c.execute(
            "UPDATE records SET body=? WHERE session_id=? AND seq=0",
            (
                b'{"type":"conversation","message":{"type":"user","content":{"type":"text","content":5}}}',
                session_id,
            ),
        )


def test_one_undecodable_record_does_not_make_the_store_unreadable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "s.db"
    store = SqliteSessionStore(db)
    good = _session(store)
    good.run_turn("first session")
    bad = _session(store)
    bad.run_turn("second session")
    bad.run_turn("second turn")
    _corrupt_one_record(db, bad.session_id)

    store2 = SqliteSessionStore(db)
    # listing sessions works (from the metadata table: no record is decoded), and describes
    # every session
    assert store2.sessions() == [good.session_id, bad.session_id]
    infos = describe_sessions(store2)
    assert {i.session_id for i in infos} == {good.session_id, bad.session_id}
    # the damaged session loads without its bad record, and says so
    with caplog.at_level(logging.WARNING):
        records = store2.load(bad.session_id)
    assert any("undecodable" in r.getMessage() for r in caplog.records)
    assert store2.corrupt_records == {bad.session_id: [0]}
    texts = [r.message.text() for r in records if hasattr(r, "message")]
    assert "second session" not in texts and "second turn" in texts
    # the good session is untouched
    assert store2.load(good.session_id) == store.load(good.session_id)
    assert good.session_id not in store2.corrupt_records
    # a strict load raises a typed error for that session only
    with pytest.raises(CorruptRecordError) as info:
        store2.load(bad.session_id, strict=True)
    assert info.value.seqs == [0] and info.value.session_id == bad.session_id
    assert isinstance(info.value, FoundationAIError)
    store2.load(good.session_id, strict=True)
    # resume works and the session goes on
    again = AgentSession.builder(ScriptedModel([say("resumed")])).with_store(store2).resume(bad.session_id)
    assert [m.text() for m in again.messages][-2:] == ["second turn", "ok 1"]
    assert again.ask("third").text == "resumed"


def test_closed_session_raises_a_typed_error(tmp_path: Path) -> None:
    ag = _session(SqliteSessionStore(tmp_path / "s.db"))
    ag.run_turn("hi")
    ag.close()
    ag.close()  # idempotent
    for call in (
        lambda: ag.run_turn("again"),
        lambda: ag.ask("again"),
        lambda: ag.run_turn_stream("again"),
        lambda: ag.history(),
        lambda: ag.steer("x"),
        lambda: ag.follow_up("x"),
    ):
        with pytest.raises(SessionClosedError):
            call()
    assert issubclass(SessionClosedError, FoundationAIError)
    ag.abort()  # no turn running: a no-op, even when closed


def test_closed_sqlite_store_raises_a_typed_error(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    store.close()
    with pytest.raises(SessionClosedError):
        store.sessions()
    with pytest.raises(SessionClosedError):
        store.load("x")
    ag = _session(store)
    with pytest.raises(SessionClosedError):
        ag.run_turn("hi")
