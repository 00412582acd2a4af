"""One running turn per stored session, in every process: a second process's turn on a session
whose turn runs elsewhere is refused with ``SessionBusyError`` naming the running turn; a
SIGKILLed holder's lease expires and the next turn takes it over; a history whose tool result
was stored after another writer's messages is rebuilt with the result next to its call.

Real processes (``tests/_lease_proc.py``) on a real SQLite file and a real PostgreSQL
(pgserver)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foundation_ai.agentic import AgentSession
from foundation_ai.agentic.scripted import ScriptedModel, say
from foundation_ai.agentic.stores import SqliteSessionStore, conversation_of
from foundation_ai.agentic.stores.lease import SessionBusyError, lease_of, take_lease
from foundation_ai.types import (
    AssistantMessage,
    Messages,
    ModelId,
    SessionRecord,
    TextContent,
    ToolCall,
    ToolResultMessage,
)

from ._durable_pool import ROOT
from ._lease_proc import open_store


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "sessions.sqlite3")
    pytest.importorskip("pgserver")
    from ._postgres import fresh_database

    return fresh_database("lease")


class Holder:
    """A ``tests/_lease_proc.py`` process running a turn that waits on a gate file."""

    def __init__(self, where: str, sid: str, gate: Path, seconds: float) -> None:
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
        self.gate = gate
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests._lease_proc", where, sid, str(gate), str(seconds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )

    def turn_id(self, timeout: float = 60) -> str:
        """The running turn's id, once the turn is inside its tool."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("inside "):
                return line.split()[1]
            if not line and self.proc.poll() is not None:
                raise RuntimeError(self.proc.stderr.read() if self.proc.stderr else "exited")
        raise TimeoutError("the holder never reached its tool")

    def finish(self) -> str:
        self.gate.touch()
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        return out

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for h in made:
        if h.proc.poll() is None:
            h.kill()


def _session(where: str, sid: str) -> tuple[Any, AgentSession]:
    store = open_store(where)
    model = ScriptedModel([say("second turn done")] * 5)
    return store, AgentSession.builder(model).with_store(store).resume(sid)


def test_a_second_process_turn_on_a_running_session_is_refused_naming_the_running_turn(
    where: str, tmp_path: Path, holders: list[Holder]
) -> None:
    sid = "shared-1"
    holder = Holder(where, sid, tmp_path / "gate", seconds=30)
    holders.append(holder)
    running = holder.turn_id()
    store, session = _session(where, sid)
    try:
        with pytest.raises(SessionBusyError) as refused:
            session.run_turn("a second turn")
        assert refused.value.turn_id == running and refused.value.session_id == sid
        assert running in str(refused.value)
        assert refused.value.holder.endswith(f":{holder.proc.pid}")
        assert holder.finish().strip().endswith("done")
        again = AgentSession.builder(ScriptedModel([say("second turn done")])).with_store(store).resume(sid)
        assert again.run_turn("a second turn").text() == "second turn done"  # free once it ended
        texts = [m.text() for m in conversation_of(store.load(sid)) if m.text()]
        # one turn after the other: no interleaving of the two turns' records
        assert texts == [
            "hold the session",
            "gate opened",
            "held turn done",
            "a second turn",
            "second turn done",
        ]
    finally:
        store.close()


def test_a_sigkilled_holders_lease_is_taken_over_at_once_by_the_next_turn_on_that_machine(
    where: str, tmp_path: Path, holders: list[Holder]
) -> None:
    sid = "shared-2"
    holder = Holder(where, sid, tmp_path / "gate", seconds=30)
    holders.append(holder)
    running = holder.turn_id()
    store, session = _session(where, sid)
    try:
        with pytest.raises(SessionBusyError):
            session.run_turn("while it runs")  # refused: the holder is alive
        holder.kill()  # it never releases its lease, which would run 30 s more
        live = lease_of(store, sid)
        assert live is not None and live.turn_id == running
        started = time.monotonic()
        turn = session.run_turn("after the crash")  # the holder's process is gone: taken over
        assert turn.text() == "second turn done" and time.monotonic() - started < 10
        after = lease_of(store, sid)
        assert after is None, after  # the takeover turn gave its lease back
        results = [m for m in session.messages if isinstance(m, ToolResultMessage)]
        assert [r.error_detail for r in results] == ["interrupted: the process stopped"]
    finally:
        store.close()


def test_a_lease_held_on_another_machine_expires_and_is_then_taken_over(where: str) -> None:
    store = open_store(where)
    try:
        AgentSession.builder(ScriptedModel([say("first")])).with_store(store).build("remote").run_turn("hi")
        take_lease(store, "remote", "turn-far", seconds=1.5, holder="far-away-host:4242", keep=False)
        session = (
            AgentSession.builder(ScriptedModel([say("second turn done")])).with_store(store).resume("remote")
        )
        with pytest.raises(SessionBusyError) as refused:
            session.run_turn("now?")
        assert refused.value.turn_id == "turn-far" and refused.value.holder == "far-away-host:4242"
        assert [m.text() for m in session.messages] == ["hi", "first"]  # nothing stored by the refused turn
        deadline = time.monotonic() + 30
        while True:  # the far holder never renews: its lease runs out
            try:
                turn = session.run_turn("now?")
                break
            except SessionBusyError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert turn.text() == "second turn done"
        assert [m.text() for m in conversation_of(store.load("remote"))] == [
            "hi",
            "first",
            "now?",
            "second turn done",
        ]
    finally:
        store.close()


def test_a_lease_taken_over_after_expiry_fences_out_the_old_holder(where: str) -> None:
    store = open_store(where)
    try:
        first = take_lease(store, "s-fence", "turn-1", seconds=0.3, keep=False)
        with pytest.raises(SessionBusyError):
            take_lease(store, "s-fence", "turn-2", seconds=5, keep=False)
        time.sleep(0.5)
        second = take_lease(store, "s-fence", "turn-2", seconds=5, keep=False)
        assert second.token > first.token
        from foundation_ai.agentic.stores.lease import release_lease, renew_lease

        assert not renew_lease(first) and first.lost  # the old holder learns it lost the lease
        release_lease(first)  # and cannot free the new holder's lease
        busy = lease_of(store, "s-fence")
        assert busy is not None and busy.turn_id == "turn-2"
        same = take_lease(store, "s-fence", "turn-2", seconds=5, keep=False)  # a recovered run
        assert same.token > second.token
        release_lease(same)
        assert lease_of(store, "s-fence") is None
    finally:
        store.close()


MID = ModelId.Name("scripted")


def _call(cid: str) -> AssistantMessage:
    return Messages.Assistant(model=MID, content=ToolCall(id=cid, name="lookup", arguments={}))  # type: ignore[return-value]


def test_a_stored_real_result_is_rebuilt_next_to_its_call_whatever_came_between(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.sqlite3")
    a_call = _call("call_a")
    between = [
        Messages.user("B's question"),
        Messages.Assistant(model=MID, content=TextContent("B's answer")),
    ]
    real = Messages.ToolResult(tool_call_id="call_a", name="lookup", content=TextContent("42"))
    placeholder = Messages.ToolResult(
        tool_call_id="call_a",
        name="lookup",
        content=TextContent("Error: interrupted"),
        error_detail="interrupted: the process stopped",
    )
    msgs = [Messages.user("A's question"), a_call, *between, placeholder, real]
    store.append("mixed", [SessionRecord.Conversation(message=m) for m in msgs])
    conv = conversation_of(store.load("mixed"))
    assert [m.id for m in conv] == [msgs[0].id, a_call.id, real.id, between[0].id, between[1].id]
    model = ScriptedModel([say("next")])
    session = AgentSession.builder(model).with_store(store).resume("mixed")
    session.run_turn("go on")
    store.close()
    sent = model.interactions[-1].messages  # what the model is shown on the next turn
    k = next(i for i, m in enumerate(sent) if m.id == a_call.id)
    assert sent[k + 1].id == real.id  # the real result right after its call
    results = [m for m in sent if isinstance(m, ToolResultMessage)]
    assert [r.id for r in results] == [real.id]  # no "not run", no placeholder, no stray copy


class _DeafWake:
    """Stands in for the keeper's wake-up event: it never wakes the keeper, so a given-back
    lease stays pending (unwritten) until something flushes it."""

    def __init__(self) -> None:
        self._never = threading.Event()

    def set(self) -> None:
        pass

    def clear(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> bool:
        return self._never.wait(timeout)


def test_a_store_closed_right_after_a_turn_leaves_no_lease_for_the_next_store(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the keeper writes a turn's release off the turn's path; a store closed before it did
    # (agent.close(); store.close(), then a new store object, as a script or a test does) must
    # still leave the session free, not held by a lease nobody can give back for 30 s
    from foundation_ai.agentic.stores import lease as lease_module

    monkeypatch.setattr(lease_module._KEEPER, "wake", _DeafWake())
    store = open_store(where)
    agent = AgentSession.builder(ScriptedModel([say("one")])).with_store(store).build()
    assert agent.run_turn("first").ok
    sid = str(agent.session_id)
    assert lease_module._KEEPER.pending, "the release is still pending (the keeper was not woken)"
    agent.close()
    store.close()
    other = open_store(where)
    try:
        assert lease_of(other, sid) is None
        resumed = AgentSession.builder(ScriptedModel([say("two")])).with_store(other).resume(sid)
        assert resumed.run_turn("second").text() == "two"
    finally:
        other.close()
