"""A tool that steers its own session keeps its result (issue 10, item 13): ``steer()`` called
from inside a running tool (sync in its worker thread, sync inline, or async) does not cancel
that call; the steering message is taken once the tool stage ends, after the tool's result,
and the next generation sees both. A steer from outside still interrupts a running tool."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import InMemorySessionStore, ScriptedModel, call, say, tool
from foundation_ai.types import MessageRole, ToolResultMessage, UserMessage

holder: dict[str, Any] = {}


@tool
def sync_steers() -> str:
    """Steers its own session, then answers."""
    holder["agent"].steer("change of plan: be brief")
    return "value-42"


@tool(inline=True)
def inline_steers() -> str:
    """Steers inline."""
    holder["agent"].steer("change of plan: be brief")
    return "value-42"


@tool
async def async_steers() -> str:
    """Steers from async code."""
    holder["agent"].steer("change of plan: be brief")
    return "value-42"


@pytest.mark.parametrize("name", ["sync_steers", "inline_steers", "async_steers"])
def test_a_tool_that_steers_its_own_session_keeps_its_result(name: str) -> None:
    model = ScriptedModel([call(name, {}), say("brief answer")])
    agent = (
        AgentSession.builder(model)
        .with_tools(sync_steers, inline_steers, async_steers)
        .with_store(InMemorySessionStore())
        .build()
    )
    holder["agent"] = agent
    turn = agent.run_turn("go")
    assert turn.ok
    (result,) = turn.tool_results()
    assert result.error_detail is None
    assert result.content.content == "value-42"  # type: ignore[union-attr]
    msgs = turn.messages()
    idx = msgs.index(result)
    steer = msgs[idx + 1]  # the steer comes after the result
    assert isinstance(steer, UserMessage) and steer.role == MessageRole.Agent
    assert msgs[idx + 1].content.content == "change of plan: be brief"  # type: ignore[union-attr]
    seen = model.interactions[-1].messages
    assert any(isinstance(m, ToolResultMessage) and m.content.content == "value-42" for m in seen)  # type: ignore[union-attr]
    assert turn.text() == "brief answer"
    agent.close()


def test_a_steer_from_outside_still_interrupts_a_running_tool() -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def slow() -> str:
        """Waits."""
        started.set()
        release.wait(30)
        return "late"

    model = ScriptedModel([call("slow", {}), say("after steer")])
    agent = AgentSession.builder(model).with_tools(slow).with_store(InMemorySessionStore()).build()

    def steer_when_running() -> None:
        started.wait(30)
        agent.steer("stop waiting")

    t = threading.Thread(target=steer_when_running)
    t.start()
    turn = agent.run_turn("go")
    release.set()
    t.join()
    (result,) = turn.tool_results()
    assert result.error_detail is not None  # interrupted: the outside steer cut the call short
    assert turn.text() == "after steer"
    agent.close()
