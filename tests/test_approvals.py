"""Approval and access control through real sessions: tools marked ``requires_approval`` (the
library's shell tool by default) pause the turn durably (outcome ``AwaitingApproval``, the
pending calls in the ``Summary``); ``approve``/``deny`` continue it in the same process or in
another one after ``resume``; a ``can_use_tool`` hook (sync or async) allows, denies with a
reason the model sees, or asks; a ``can_spend`` check refuses a generation before it is made."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from foundation_ai.agentic import (
    AgentSession,
    InMemorySessionStore,
    ScriptedModel,
    SqliteSessionStore,
    TurnOutcome,
    call,
    say,
    tool,
)
from foundation_ai.agentic.errors import ApprovalPendingError
from foundation_ai.agentic.toolsets import shell_tools
from foundation_ai.agentic.toolsets.approval import (
    Allow,
    Ask,
    Deny,
    ToolContext,
    estimated_spend_check,
    mark_requires_approval,
)
from foundation_ai.errors import TurnFailedError
from foundation_ai.types import SessionRecord, TextContent, ToolCall, ToolResultMessage

RAN: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(f"add({a}, {b})")
    return a + b


def _wipe() -> Any:
    @tool
    def wipe(path: str) -> str:
        """Delete a path."""
        RAN.append(f"wipe({path})")
        return f"wiped {path}"

    return wipe


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def _session(model: ScriptedModel, *tools: Any, store: Any = None, **kw: Any) -> AgentSession:
    b = AgentSession.builder(model).with_tools(*tools).with_store(store or InMemorySessionStore())
    if "can_use_tool" in kw:
        b = b.with_can_use_tool(kw["can_use_tool"])
    if "can_spend" in kw:
        b = b.with_can_spend(kw["can_spend"])
    if "budget" in kw:
        b = b.with_token_budget(kw["budget"])
    return b.build()


def test_the_shell_tool_requires_approval_and_runs_once_approved(tmp_path: Path) -> None:
    model = ScriptedModel([call("shell", {"command": "touch made.txt"}), say("created it")])
    agent = _session(model, shell_tools(tmp_path))
    turn = agent.run_turn("create made.txt")
    assert turn.outcome is TurnOutcome.AwaitingApproval and not turn.ok
    assert [c.name for c in turn.awaiting] == ["shell"]
    assert not (tmp_path / "made.txt").exists()
    assert agent.pending_approvals() == turn.awaiting
    done = agent.approve(turn.awaiting[0].id)
    assert done is not None and done.ok and done.text() == "created it"
    assert (tmp_path / "made.txt").exists()
    assert done.tool_results()[0].tool_call_id == turn.awaiting[0].id
    assert agent.pending_approvals() == []
    # the continued request carried the call and its result, paired
    last = model.interactions[-1].messages
    assert isinstance(last[-1], type(done.tool_results()[0])) and last[-2].content.name == "shell"  # type: ignore[union-attr]


def test_a_denied_call_gets_the_reason_and_the_turn_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel([call("shell", {"command": "touch made.txt"}), say("ok, I will not")])
    agent = _session(model, shell_tools(tmp_path))
    turn = agent.run_turn("create made.txt")
    done = agent.deny(turn.awaiting[0].id, "not on this machine")
    assert done is not None and done.ok and done.text() == "ok, I will not"
    result = done.tool_results()[0]
    assert result.error_detail is not None and "not on this machine" in result.error_detail
    assert not (tmp_path / "made.txt").exists()


def test_approve_stream_and_deny_stream_stream_the_continued_turn() -> None:
    from foundation_ai.agentic import TurnEvent

    calls = [call("wipe", {"path": "a"}, id="w1"), call("wipe", {"path": "b"}, id="w2")]
    model = ScriptedModel([calls, say("one wiped")])
    agent = _session(model, mark_requires_approval(_wipe()))
    turn = agent.run_turn("go")
    assert [c.id for c in turn.awaiting] == ["w1", "w2"]
    assert agent.deny_stream("w2", "keep b") is None, "another call still waits"
    stream = agent.approve_stream("w1")
    assert stream is not None and agent.pending_approvals() == []
    events = list(stream.events())
    results = [e.result for e in events if isinstance(e, TurnEvent.ToolResult)]
    assert [(r.tool_call_id, r.error_detail is None) for r in results] == [("w1", True), ("w2", False)]
    assert results[1].error_detail is not None and "keep b" in results[1].error_detail
    assert "".join(e.text for e in events if isinstance(e, TurnEvent.Text)) == "one wiped"
    final = events[-1]
    assert isinstance(final, TurnEvent.Done) and final.summary.outcome is TurnOutcome.Completed
    assert stream.turn is not None and stream.turn.text() == "one wiped"
    assert RAN == ["wipe(a)"]
    with pytest.raises(ApprovalPendingError):
        agent.approve_stream("w1")


def test_every_pending_call_must_be_decided_before_the_turn_continues() -> None:
    calls = [
        call("wipe", {"path": "a"}, id="w1"),
        call("add", {"a": 1, "b": 2}, id="a1"),
        call("wipe", {"path": "b"}, id="w2"),
    ]
    model = ScriptedModel([calls, say("done")])
    agent = _session(model, add, mark_requires_approval(_wipe()))
    turn = agent.run_turn("go")
    assert [c.id for c in turn.awaiting] == ["w1", "w2"] and RAN == []
    with pytest.raises(ApprovalPendingError, match="approve"):
        agent.run_turn("something else")
    with pytest.raises(ApprovalPendingError, match="no tool call 'a1'"):
        agent.approve("a1")
    assert agent.approve("w1") is None and RAN == []
    done = agent.deny("w2", "keep b")
    assert done is not None and done.ok
    assert sorted(RAN) == ["add(1, 2)", "wipe(a)"]
    assert [r.tool_call_id for r in done.tool_results()] == ["w1", "a1", "w2"]


def test_can_use_tool_allows_denies_and_asks_sync_and_async() -> None:
    seen: list[ToolContext] = []

    def decide(c: ToolCall, ctx: ToolContext) -> Any:
        seen.append(ctx)
        if c.name == "wipe":
            return Deny("deleting is not allowed")
        return Allow()

    model = ScriptedModel([[call("wipe", {"path": "/"}), call("add", {"a": 2, "b": 2})], say("4")])
    wipe = _wipe()
    agent = _session(model, add, wipe, can_use_tool=decide)
    turn = agent.run_turn("go")
    assert turn.ok and RAN == ["add(2, 2)"]
    denied = turn.tool_results()[0]
    assert denied.error_detail is not None and "deleting is not allowed" in denied.error_detail
    assert seen[0].tool is wipe and not seen[0].requires_approval and len(seen[0].calls) == 2

    async def ask_async(c: ToolCall, ctx: ToolContext) -> Any:
        await asyncio.sleep(0)
        return Ask("sure?") if ctx.requires_approval else Allow()

    model = ScriptedModel([call("wipe", {"path": "x"}), say("wiped")])
    RAN.clear()
    agent = _session(model, mark_requires_approval(_wipe()), can_use_tool=ask_async)
    turn = agent.run_turn("go")
    assert turn.outcome is TurnOutcome.AwaitingApproval and RAN == []
    assert agent.approve(turn.awaiting[0].id).ok  # type: ignore[union-attr]
    assert RAN == ["wipe(x)"]

    # an Allow from the hook counts as the approval of a requires_approval tool
    RAN.clear()
    agent = _session(
        ScriptedModel([call("wipe", {"path": "y"}), say("ok")]),
        mark_requires_approval(_wipe()),
        can_use_tool=lambda c, ctx: Allow(),
    )
    assert agent.run_turn("go").ok and RAN == ["wipe(y)"]


def test_a_paused_turn_is_approved_by_another_process_after_resume(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    work = tmp_path / "work"
    work.mkdir()
    sid = "0" * 24 + "1"
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_approval_subprocess.py")), str(db), sid, str(work)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert out.split() == ["PAUSED", "call_touch", "awaiting_approval"]
    assert not (work / "made.txt").exists()
    store = SqliteSessionStore(db)
    summary = [r for r in store.load(sid) if isinstance(r, SessionRecord.Summary)][-1]
    assert summary.awaiting_approval == ["call_touch"]
    model = ScriptedModel([say("made.txt is there")])
    again = AgentSession.builder(model).with_tools(shell_tools(work)).with_store(store).resume(sid)
    assert [c.id for c in again.pending_approvals()] == ["call_touch"]
    done = again.approve("call_touch")
    assert done is not None and done.ok and done.text() == "made.txt is there"
    assert (work / "made.txt").exists()
    records = again.history()
    results = [
        r.message
        for r in records
        if isinstance(r, SessionRecord.Conversation) and isinstance(r.message, ToolResultMessage)
    ]
    assert [m.tool_call_id for m in results] == ["call_touch"]  # paired once, not "interrupted"
    assert results[0].error_detail is None
    again.close()


def test_resume_without_a_pause_still_pairs_interrupted_calls(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    agent = _session(
        ScriptedModel([call("wipe", {"path": "x"}), say("ok")]),
        mark_requires_approval(_wipe()),
        store=SqliteSessionStore(db),
    )
    turn = agent.run_turn("go")
    assert turn.outcome is TurnOutcome.AwaitingApproval
    agent.deny(turn.awaiting[0].id)
    sid = agent.session_id
    agent.close()
    again = (
        AgentSession.builder(ScriptedModel([say("hi")]))
        .with_tools(_wipe())
        .with_store(SqliteSessionStore(db))
        .resume(sid)
    )
    assert again.pending_approvals() == []
    assert again.run_turn("hello").ok
    again.close()


def test_can_spend_refuses_a_generation_before_it_is_made() -> None:
    model = ScriptedModel([say("never")])
    agent = _session(model, can_spend=estimated_spend_check, budget=5)
    with pytest.raises(TurnFailedError) as caught:  # run_turn raises for a turn without an answer
        agent.run_turn("a prompt long enough to cost more than five tokens of budget")
    turn = caught.value.turn
    assert turn.outcome is TurnOutcome.BudgetExhausted
    assert turn.error is not None and "exceeds the 5 tokens left" in turn.error.message
    assert model.interactions == []  # the model was never called

    calls: list[Any] = []

    def check(request: Any) -> Any:
        calls.append(request)
        return "over my own limit" if len(calls) > 1 else None

    model = ScriptedModel([call("add", {"a": 1, "b": 1}), say("2")])
    agent = _session(model, add, can_spend=check)
    with pytest.raises(TurnFailedError) as caught:
        agent.run_turn("1 + 1")
    turn = caught.value.turn
    assert turn.outcome is TurnOutcome.BudgetExhausted and turn.error.message == "over my own limit"  # type: ignore[union-attr]
    assert len(model.interactions) == 1 and RAN == ["add(1, 1)"]
    assert calls[0].ledger is agent.ledger and calls[0].interaction.messages[-1].content == TextContent(
        "1 + 1"
    )


def test_a_call_that_would_not_run_is_never_asked_about(tmp_path: Path) -> None:
    model = ScriptedModel([call("shell", {"comand": "typo"}), say("fixed nothing")])
    agent = _session(model, shell_tools(tmp_path))
    turn = agent.run_turn("go")
    assert turn.ok and turn.awaiting == []
    result = turn.tool_results()[0]
    assert result.error_detail is not None and "invalid arguments" in result.error_detail


def test_ask_raises_a_typed_error_carrying_the_pending_calls_instead_of_an_empty_answer() -> None:
    from foundation_ai.agentic import ApprovalRequiredError

    model = ScriptedModel([call("wipe", {"path": "a"}, id="w1"), say("wiped a")])
    agent = _session(model, mark_requires_approval(_wipe()))
    with pytest.raises(ApprovalRequiredError) as info:
        agent.ask("wipe a")
    assert [c.id for c in info.value.calls] == ["w1"] and "wipe (w1)" in str(info.value)
    assert info.value.turn.outcome is TurnOutcome.AwaitingApproval
    assert isinstance(info.value, ApprovalPendingError)  # the family the session's other refusals use
    assert RAN == [], "nothing ran before the decision"
    turn = agent.approve("w1")
    assert turn is not None and turn.text() == "wiped a" and RAN == ["wipe(a)"]
