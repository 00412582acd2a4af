"""Sub-agents: the ``agent`` tool runs a child session (own model, system prompt, tools) to an
answer; bounded depth; the child's usage rolls up into the parent's ledger and budget; the child
is stored as its own session linked from the parent's records; background runs
(start/check/result/stop); a parent's abort reaches the child. Real sessions, real SQLite."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from foundation_ai.agentic import (
    AgentSession,
    ScriptedModel,
    SqliteSessionStore,
    TurnOutcome,
    call,
    hook,
    pause,
    say,
    tool,
)
from foundation_ai.agentic.toolsets.agent import SubAgent, SubAgents, child_sessions
from foundation_ai.errors import TurnFailedError
from foundation_ai.types import SessionRecord, TextContent


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return {"answer": "42"}.get(key, "unknown")


def _run(agent: str, task: str) -> Any:
    return call("agent", {"command": "run", "agent": agent, "task": task})


def _json(result: Any) -> Any:
    assert isinstance(result.content, TextContent), result
    return msgspec.json.decode(result.content.content)


def _parent(tmp_path: Path, script: list[Any], agents: SubAgents, **budget: Any) -> AgentSession:
    b = AgentSession.builder(ScriptedModel(script)).with_store(SqliteSessionStore(tmp_path / "s.db"))
    if budget:
        b = b.with_token_budget(budget.get("max_tokens"))
    return b.with_tool_factory(agents).build()


def test_a_child_session_runs_to_its_answer_and_is_stored_linked_to_the_parent(tmp_path: Path) -> None:
    child_model = ScriptedModel([call("lookup", {"key": "answer"}), say("The answer is 42.")])
    agents = SubAgents(
        SubAgent(
            "researcher", "Looks things up.", model=child_model, system_prompt="Be exact.", tools=[lookup]
        )
    )
    parent = _parent(tmp_path, [_run("researcher", "find the answer"), say("It is 42.")], agents)
    turn = parent.run_turn("What is the answer?")
    assert turn.ok and turn.text() == "It is 42."
    out = _json(turn.tool_results()[0])
    assert (
        out["agent"] == "researcher"
        and out["outcome"] == "completed"
        and out["answer"] == "The answer is 42."
    )
    request = child_model.interactions[0]
    assert request.system_prompt == "Be exact."
    assert [t.name() for t in request.tools_shed.all_tools()] == ["lookup", "agent"]  # depth 1 < 2
    child_id = out["session_id"]
    assert child_sessions(parent.history()) == [child_id]
    stored = parent.store.load(child_id)
    texts = [r.message.content for r in stored if isinstance(r, SessionRecord.Conversation)]
    assert texts[0] == TextContent("find the answer") and texts[-1] == TextContent("The answer is 42.")
    parent.close()


def test_depth_is_bounded(tmp_path: Path) -> None:
    child_model = ScriptedModel([say("leaf")])
    agents = SubAgents(SubAgent("worker", model=child_model), max_depth=1)
    parent = _parent(tmp_path, [_run("worker", "do it"), say("ok")], agents)
    assert parent.run_turn("go").ok
    assert list(child_model.interactions[0].tools_shed.all_tools()) == []  # no agent tool at depth 1
    grand = ScriptedModel([say("deepest")])
    middle = ScriptedModel([_run("leafy", "deeper"), say("middle done")])
    nested = SubAgents(SubAgent("mid", model=middle), SubAgent("leafy", model=grand), max_depth=2)
    top = _parent(tmp_path, [_run("mid", "delegate"), say("top done")], nested)
    assert top.run_turn("go").ok
    assert _json(top.history()[2].message)["answer"] == "middle done"  # type: ignore[attr-defined]
    assert list(grand.interactions[0].tools_shed.all_tools()) == []
    parent.close()
    top.close()


def test_child_usage_rolls_up_into_the_parent_ledger_and_budget(tmp_path: Path) -> None:
    child_model = ScriptedModel([say("one two three four five")])
    agents = SubAgents(SubAgent("worker", model=child_model))
    parent = _parent(tmp_path, [_run("worker", "count"), say("done")], agents)
    turn = parent.run_turn("go")
    child_id = _json(turn.tool_results()[0])["session_id"]
    child_summary = [r for r in parent.store.load(child_id) if isinstance(r, SessionRecord.Summary)][-1]
    assert child_summary.usage.output == 5
    parent_summary = turn.records[-1]
    assert isinstance(parent_summary, SessionRecord.Summary)
    # the parent's two generations (1 output token each) plus the child's five
    assert parent_summary.usage.output == 1 + 1 + 5
    assert parent.ledger.total.output == 7

    # a budget: the child gets only what the parent has left, and fails cleanly past it
    hungry = ScriptedModel([call("lookup", {"key": "answer"}), say("more")] * 3)
    tight = SubAgents(SubAgent("hungry", model=hungry, tools=[lookup]))
    poor = _parent(tmp_path, [_run("hungry", "spend"), say("after")], tight, max_tokens=15)
    with pytest.raises(TurnFailedError) as caught:  # the parent ran out of budget too
        poor.run_turn("go")
    poor_turn = caught.value.turn
    result = poor_turn.tool_results()[0]
    assert result.error_detail is not None and "budget_exhausted" in result.error_detail
    assert poor_turn.outcome is TurnOutcome.BudgetExhausted
    parent.close()
    poor.close()


def test_background_runs_start_check_result_and_stop(tmp_path: Path) -> None:
    quick = ScriptedModel([say("background answer")])
    slow = ScriptedModel([[pause(60), say("never")]])
    agents = SubAgents(SubAgent("quick", model=quick), SubAgent("slow", model=slow))
    started: dict[str, Any] = {}

    def starts(interaction: Any) -> Any:
        return call("agent", {"command": "start", "agent": "quick", "task": "go"})

    parent = _parent(
        tmp_path,
        [
            starts,
            call("agent", {"command": "result", "id": "run-1"}),
            call("agent", {"command": "start", "agent": "slow", "task": "forever"}),
            call("agent", {"command": "check", "id": "run-2"}),
            call("agent", {"command": "stop", "id": "run-2"}),
            call("agent", {"command": "result", "id": "nope"}),
            say("done"),
        ],
        agents,
    )
    turn = parent.run_turn("go")
    assert turn.ok
    start1, result1, start2, check2, stop2, unknown = turn.tool_results()
    started.update(_json(start1))
    assert started["id"] == "run-1"
    r1 = _json(result1)
    assert r1["status"] == "completed" and r1["answer"] == "background answer"
    assert _json(start2)["id"] == "run-2"
    assert _json(check2)["status"] == "running"
    assert _json(stop2)["status"] == "aborted"
    assert unknown.error_detail is not None and "no sub-agent run 'nope'" in unknown.error_detail
    assert child_sessions(parent.history()) == [started["session_id"], _json(start2)["session_id"]]
    parent.close()


def test_aborting_the_parent_aborts_the_running_child(tmp_path: Path) -> None:
    entered = threading.Event()
    child_model = ScriptedModel([[say("partial"), hook(entered.set), pause(60), say("never")]])
    agents = SubAgents(SubAgent("slow", model=child_model))
    parent = _parent(tmp_path, [_run("slow", "take forever"), say("unreachable")], agents)

    def abort_when_child_runs() -> None:
        entered.wait(60)
        parent.abort()

    t = threading.Thread(target=abort_when_child_runs)
    t.start()
    turn = parent.run_turn("go")
    t.join()
    assert turn.outcome is TurnOutcome.Aborted
    children = parent.store.sessions()
    child_id = next(s for s in children if s != parent.session_id)
    child_records = parent.store.load(child_id)
    kept = [r.message for r in child_records if isinstance(r, SessionRecord.Conversation)]
    assert kept[-1].content == TextContent("partial")  # the child's partial output, kept
    assert type(kept[-1].stop_reason).__name__.endswith("Aborted")  # type: ignore[union-attr]
    assert isinstance(child_records[-1], SessionRecord.Summary)
    parent.close()


def test_steering_the_parent_interrupts_the_child_and_the_parent_goes_on(tmp_path: Path) -> None:
    entered = threading.Event()
    child_model = ScriptedModel([[say("half"), hook(entered.set), pause(60), say("never")]])
    agents = SubAgents(SubAgent("slow", model=child_model))
    parent = _parent(tmp_path, [_run("slow", "take forever"), say("changed course")], agents)

    def steer_when_child_runs() -> None:
        entered.wait(60)
        parent.steer("forget it, just answer")

    t = threading.Thread(target=steer_when_child_runs)
    t.start()
    turn = parent.run_turn("go")
    t.join()
    assert turn.ok and turn.text() == "changed course"
    interrupted = turn.tool_results()[0]
    assert interrupted.error_detail is not None and "steered" in interrupted.error_detail
    child_id = next(s for s in parent.store.sessions() if s != parent.session_id)
    kept = [r.message for r in parent.store.load(child_id) if isinstance(r, SessionRecord.Conversation)]
    assert kept[-1].content == TextContent("half")
    assert type(kept[-1].stop_reason).__name__.endswith("Aborted")  # type: ignore[union-attr]
    parent.close()


def test_a_sub_agents_requests_are_gated_by_the_parents_budget_before_they_are_sent(tmp_path: Path) -> None:
    from foundation_ai.agentic.scripted import Reply
    from foundation_ai.types import UsageReport

    # the parent's first request: 1,000 tokens; the child's first: 1,100 -> 2,100 of 2,000
    child = ScriptedModel(
        [Reply([call("lookup", {"key": "answer"})], usage=UsageReport.of(1000.0, 100.0)), say("never asked")]
    )
    agents = SubAgents(SubAgent("worker", model=child, tools=[lookup]))
    parent_model = ScriptedModel(
        [Reply([_run("worker", "spend")], usage=UsageReport.of(900.0, 100.0)), say("after")]
    )
    parent = (
        AgentSession.builder(parent_model)
        .with_store(SqliteSessionStore(tmp_path / "s.db"))
        .with_token_budget(2000)
        .with_tool_factory(agents)
        .build()
    )
    with pytest.raises(TurnFailedError) as caught:
        parent.run_turn("go")
    assert child.requests == 1  # the second request was never sent (it was, before: 3,100 of 2,000)
    assert parent_model.requests == 1
    assert parent.ledger.tokens == 2100  # the child's usage is in the parent's ledger as it ends
    assert caught.value.turn.outcome is TurnOutcome.BudgetExhausted
    result = caught.value.turn.tool_results()[0]
    assert result.error_detail is not None and "budget_exhausted" in result.error_detail
    parent.close()


def test_the_parents_can_spend_check_gates_every_request_of_its_children(tmp_path: Path) -> None:
    seen: list[tuple[str, bool]] = []
    holder: dict[str, AgentSession] = {}

    def check(request: Any) -> str | None:
        parent = holder["parent"]
        seen.append((request.session_id, request.ledger is parent.ledger))
        children = [s for s, _ in seen if s != parent.session_id]
        from_child = request.session_id != parent.session_id
        return "the tree spent enough" if from_child and len(children) >= 2 else None

    child = ScriptedModel([call("lookup", {"key": "answer"}), call("lookup", {"key": "x"}), say("never")])
    agents = SubAgents(SubAgent("worker", model=child, tools=[lookup]))
    parent = (
        AgentSession.builder(ScriptedModel([_run("worker", "go"), say("done")]))
        .with_store(SqliteSessionStore(tmp_path / "s.db"))
        .with_can_spend(check)
        .with_tool_factory(agents)
        .build()
    )
    holder["parent"] = parent
    turn = parent.run_turn("go")
    # the child's first request passed the parent's check, its second was refused before it was sent
    assert child.requests == 1
    child_ids = {s for s, _ in seen if s != parent.session_id}
    assert len(child_ids) == 1 and all(own for _, own in seen)  # asked with the parent's ledger
    result = turn.tool_results()[0]
    assert result.error_detail is not None and "the tree spent enough" in result.error_detail
    assert turn.ok and turn.text() == "done"
    parent.close()
