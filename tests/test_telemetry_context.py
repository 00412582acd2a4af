"""Telemetry that matches what happened (issue 28, section 4; ``docs/telemetry.md``), with the
real OpenTelemetry SDK and its in-memory exporter: spans a tool opens itself are children of its
``execute_tool`` span (async tools, sync tools on threads, MCP calls, sub-agents); abandoned and
aborted turns end with attributes that say so (outcome, finish reasons, a cancel marker) and
usage no provider reported is absent, not 0 (GenAI semantic conventions:
https://opentelemetry.io/docs/specs/semconv/gen-ai/)."""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from foundation_ai import AgentSession
from foundation_ai.agentic import (
    InMemorySessionStore,
    ScriptedModel,
    TurnEvent,
    TurnOutcome,
    call,
    hook,
    pause,
    say,
    tool,
)
from foundation_ai.agentic.toolsets.agent import SubAgent, SubAgents
from foundation_ai.types import AssistantMessage, Stream

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def spans() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def by_op(finished: Any, op: str) -> list[Any]:
    return [s for s in finished if s.attributes.get("gen_ai.operation.name") == op]


def named(finished: Any, name: str) -> Any:
    (span,) = [s for s in finished if s.name == name]
    return span


def traced_tools(provider: TracerProvider) -> list[Any]:
    tracer = provider.get_tracer("the-tools")

    @tool
    async def fetch(url: str) -> str:
        """Fetch a page (async).

        Args:
            url: The address.
        """
        with tracer.start_as_current_span("inside fetch"):
            await asyncio.sleep(0)
            with tracer.start_as_current_span("inside fetch, deeper"):
                return "page"

    @tool
    def parse(text: str) -> str:
        """Parse a page (sync: runs on a worker thread).

        Args:
            text: The page.
        """
        with tracer.start_as_current_span("inside parse"):
            return "parsed"

    return [fetch, parse]


def test_spans_opened_inside_async_and_sync_tools_are_children_of_their_execute_tool_span(spans: Any) -> None:
    provider, exporter = spans
    model = ScriptedModel([[call("fetch", {"url": "http://x"}), call("parse", {"text": "t"})], say("done")])
    agent = AgentSession.builder(model).with_tools(traced_tools(provider)).with_tracing(provider).build()
    assert agent.run_turn("go").ok
    finished = exporter.get_finished_spans()
    (turn,) = by_op(finished, "invoke_agent")
    fetch_span, parse_span = named(finished, "execute_tool fetch"), named(finished, "execute_tool parse")
    inner, deeper, parsing = (
        named(finished, "inside fetch"),
        named(finished, "inside fetch, deeper"),
        named(finished, "inside parse"),
    )
    assert inner.parent.span_id == fetch_span.context.span_id
    assert deeper.parent.span_id == inner.context.span_id
    assert parsing.parent.span_id == parse_span.context.span_id
    assert {s.context.trace_id for s in finished} == {turn.context.trace_id}  # one trace


def test_a_sub_agents_turn_is_a_child_of_the_execute_tool_span_that_runs_it(spans: Any) -> None:
    provider, exporter = spans
    agents = SubAgents(SubAgent("helper", "Helps.", model=ScriptedModel([say("child answer")] * 2)))
    model = ScriptedModel(
        [
            [call("agent", {"command": "run", "agent": "helper", "task": "help"})],
            [call("agent", {"command": "start", "agent": "helper", "task": "help later"})],
            [call("agent", {"command": "result", "id": "run-1"})],
            say("parent done"),
        ]
    )
    agent = (
        AgentSession.builder(model)
        .with_store(InMemorySessionStore())
        .with_tool_factory(agents)
        .with_tracing(provider)
        .build()
    )
    assert agent.run_turn("delegate").ok
    finished = exporter.get_finished_spans()
    turns = by_op(finished, "invoke_agent")
    assert len(turns) == 3
    (parent,) = [t for t in turns if t.parent is None]
    tool_spans = {s.context.span_id: s for s in by_op(finished, "execute_tool")}
    children = [t for t in turns if t is not parent]
    for child in children:
        assert child.parent is not None and child.parent.span_id in tool_spans  # under an agent call
        assert child.context.trace_id == parent.context.trace_id
        assert any(s.parent and s.parent.span_id == child.context.span_id for s in by_op(finished, "chat"))


def test_an_mcp_call_carries_its_execute_tool_span_to_the_server(spans: Any) -> None:
    pytest.importorskip("mcp")
    from foundation_ai.agentic.toolsets.mcp import MCPServerTools

    provider, exporter = spans
    server = MCPServerTools.stdio([sys.executable, str(ROOT / "tests" / "_mcp_server.py"), "stdio"], name="t")
    model = ScriptedModel([[call("trace_context", {})], say("ok")])
    try:
        agent = AgentSession.builder(model).with_tools(server.list_tools()).with_tracing(provider).build()
        turn = agent.run_turn("what context did the server get?")
        assert turn.ok
        (result,) = [m for m in agent.messages if hasattr(m, "tool_call_id")]
        got = json.loads(result.text() or "{}")
        agent.close()
    finally:
        server.close()
    span = named(exporter.get_finished_spans(), "execute_tool trace_context")
    trace_id, span_id = f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"
    assert got["traceparent"].split("-")[1:3] == [trace_id, span_id]


def abandoned_attributes(exporter: InMemorySpanExporter) -> tuple[Any, Any]:
    finished = exporter.get_finished_spans()
    assert all(s.end_time is not None for s in finished)
    (turn,) = by_op(finished, "invoke_agent")
    (chat,) = by_op(finished, "chat")
    return turn, chat


def check_abandoned(turn: Any, chat: Any) -> None:
    assert turn.attributes["foundation_ai.turn.outcome"] == TurnOutcome.Aborted.value
    assert turn.attributes["error.type"] == "cancelled"
    assert chat.attributes["error.type"] == "cancelled"
    assert tuple(chat.attributes["gen_ai.response.finish_reasons"]) == ("aborted",)
    for span in (turn, chat):
        assert span.status.status_code is not StatusCode.ERROR
    # the scripted model reports usage with every chunk: what the cut call reported, never 0
    assert chat.attributes["gen_ai.usage.input_tokens"] == 10
    assert turn.attributes["gen_ai.usage.input_tokens"] == 10
    assert turn.attributes["gen_ai.usage.output_tokens"] == chat.attributes["gen_ai.usage.output_tokens"] > 0


def answering(item: Any) -> bool:
    """True for a streamed piece of the answer (the model call is under way)."""
    return isinstance(item, Stream.Next) and isinstance(
        getattr(item.value, "message", None), AssistantMessage
    )


def long_model() -> ScriptedModel:
    return ScriptedModel([say("a long answer " * 30)], chunk_mode="delta")


@pytest.mark.parametrize(
    "how", ["events break", "sync break", "async for break", "async events break", "dropped"]
)
def test_an_abandoned_turn_says_it_was_aborted_and_invents_no_usage(spans: Any, how: str) -> None:
    provider, exporter = spans
    agent = AgentSession.builder(long_model()).with_tracing(provider).build()
    if how == "events break":
        for ev in agent.run_turn_stream("hi").events():
            if isinstance(ev, TurnEvent.Text):
                break
    elif how == "sync break":
        stream = agent.run_turn_stream("hi")
        for item in stream:
            if answering(item):
                break
        stream.close()
    elif how == "dropped":
        stream = agent.run_turn_stream("hi")
        it = iter(stream)
        while not answering(next(it)):
            pass
        del it, stream
        gc.collect()
    else:

        async def main() -> None:
            stream = agent.run_turn_stream("hi")
            if how == "async events break":
                async for ev in stream.events():
                    if isinstance(ev, TurnEvent.Text):
                        break
            else:
                async for item in stream:
                    if answering(item):
                        break
            await stream.aclose()

        asyncio.run(main())
    turn, chat = abandoned_attributes(exporter)
    check_abandoned(turn, chat)
    assert agent.history()[-1].usage is not None  # the turn was closed and summarised
    agent.close()


def test_a_cut_call_to_a_server_that_reports_usage_at_the_end_has_no_usage_attributes(
    spans: Any, llama_server: Any
) -> None:
    """A real llama.cpp server (OpenAI Chat API) sends usage in the stream's last chunk only:
    breaking out after the first piece of text leaves it unknown, so no span says 0."""
    from foundation_ai.backends import openai_chat
    from foundation_ai.types import ModelParams

    provider, exporter = spans
    model = openai_chat("smollm2", base_url=llama_server.base_url + "/v1", timeout=120)
    agent = (
        AgentSession.builder(model)
        .with_params(ModelParams(max_tokens=64, temperature=0.0, seed=42))
        .with_tracing(provider)
        .build()
    )
    for ev in agent.run_turn_stream("Tell me a long story about a lighthouse.").events():
        if isinstance(ev, TurnEvent.Text):
            break
    turn, chat = abandoned_attributes(exporter)
    assert turn.attributes["foundation_ai.turn.outcome"] == "aborted"
    assert tuple(chat.attributes["gen_ai.response.finish_reasons"]) == ("aborted",)
    for span in (turn, chat):
        assert not {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} & set(span.attributes)
    agent.close()


def test_abort_marks_the_cut_chat_span_as_cancelled(spans: Any) -> None:
    provider, exporter = spans
    holder: dict[str, AgentSession] = {}
    model = ScriptedModel(
        [[say("the start of an answer"), hook(lambda: holder["agent"].abort()), pause(5.0), say("never")]]
    )
    agent = AgentSession.builder(model).with_tracing(provider).build()
    holder["agent"] = agent
    turn = agent.run_turn_stream("hi")
    list(turn)
    assert turn.turn.outcome is TurnOutcome.Aborted
    finished = exporter.get_finished_spans()
    (span,) = by_op(finished, "invoke_agent")
    (chat,) = by_op(finished, "chat")
    assert span.attributes["foundation_ai.turn.outcome"] == "aborted"
    assert chat.attributes["error.type"] == "cancelled"
    assert tuple(chat.attributes["gen_ai.response.finish_reasons"]) == ("aborted",)
    # the first output's last chunk carried a usage report before the abort: it is kept
    assert chat.attributes["gen_ai.usage.input_tokens"] == 10
    assert span.attributes["gen_ai.usage.input_tokens"] == 10
    agent.close()


def test_a_finished_turn_still_reports_its_usage_and_finish_reason(spans: Any) -> None:
    provider, exporter = spans
    agent = AgentSession.builder(ScriptedModel([say("short")])).with_tracing(provider).build()
    agent.run_turn("hi")
    turn, chat = abandoned_attributes(exporter)
    assert tuple(chat.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert chat.attributes["gen_ai.usage.output_tokens"] == 1 and "error.type" not in chat.attributes
    assert turn.attributes["gen_ai.usage.input_tokens"] == chat.attributes["gen_ai.usage.input_tokens"]
    assert turn.attributes["foundation_ai.turn.outcome"] == "completed"
    agent.close()
