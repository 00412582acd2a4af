"""Only the parameters a user set reach an HTTP provider (docs/models.md, "Parameters"): the seed's
defaults stay what ``ModelParams`` reports, a provider's own defaults apply to the rest, and the
fields are keywords on the builder and on each turn."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import msgspec
import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import ScriptedModel, say
from foundation_ai.backends import anthropic, openai_chat, openai_responses
from foundation_ai.types import Messages, ModelInteraction, ModelParams, is_set

SAMPLING = ("max_tokens", "max_completion_tokens", "max_output_tokens", "temperature", "top_p", "top_k")

_CHAT_SSE = (
    'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    '"delta":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)
_RESPONSES_SSE = (
    'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r","status":'
    '"completed","output":[{"type":"message","id":"m","role":"assistant","content":[{"type":'
    '"output_text","text":"ok"}]}],"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
)
_ANTHROPIC_SSE = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":'
    '"assistant","model":"claude-x","content":[],"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":'
    '{"type":"text","text":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    '{"type":"text_delta","text":"ok"}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    '"usage":{"output_tokens":1}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def _capturing(kind: str) -> tuple[Any, list[dict[str, Any]]]:
    """A backend of ``kind`` over a MockTransport that keeps every request body."""
    bodies: list[dict[str, Any]] = []
    sse = {"chat": _CHAT_SSE, "responses": _RESPONSES_SSE, "anthropic": _ANTHROPIC_SSE}[kind]

    def handler(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, content=sse.encode(), headers={"content-type": "text/event-stream"})

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    if kind == "chat":
        return openai_chat("gpt-4o-mini", api_key="sk-test", http_client=client), bodies
    if kind == "responses":
        return openai_responses("gpt-4o-mini", api_key="sk-test", http_client=client), bodies
    return anthropic("claude-x", api_key="sk-ant-test", http_client=client), bodies


def _sampling(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in SAMPLING if k in body}


def test_model_params_still_report_the_seed_defaults_while_none_is_set() -> None:
    p = ModelParams()
    assert (p.max_tokens, p.temperature, p.top_p, p.top_k, p.repeat_penalty) == (2048, 0.7, 0.9, 40.0, 1.1)
    assert not any(is_set(p, name) for name in ("max_tokens", "temperature", "top_p", "top_k", "seed"))
    q = p.with_(temperature=0.7, seed=3)  # equal to the default, but given: set
    assert is_set(q, "temperature") and is_set(q, "seed") and not is_set(q, "top_p")
    assert msgspec.json.encode(p) == b"{}"
    # read back from JSON, an explicit field is set, the others are not
    r = msgspec.json.decode(b'{"max_tokens": 64}', type=ModelParams)
    assert is_set(r, "max_tokens") and not is_set(r, "temperature")


@pytest.mark.parametrize("kind", ["chat", "responses", "anthropic"])
async def test_http_requests_carry_only_the_parameters_the_user_set(kind: str) -> None:
    model, bodies = _capturing(kind)
    inter = ModelInteraction(messages=[Messages.user("Hi")])
    await model.agenerate(inter, ModelParams())
    # Anthropic requires max_tokens: the seed's 2048 goes when none was set; nothing else does
    assert _sampling(bodies[0]) == ({"max_tokens": 2048} if kind == "anthropic" else {})
    await model.agenerate(inter, ModelParams(temperature=0.7, max_tokens=300))
    sent = _sampling(bodies[1])
    assert sent.pop("temperature") == 0.7
    assert set(sent.values()) == {300} and len(sent) == 1  # max_tokens under the wire's own name


async def test_turn_keywords_reach_the_wire_for_that_turn_only() -> None:
    model, bodies = _capturing("chat")
    agent = AgentSession.builder(model).with_params(top_p=0.5).build()
    await agent.arun_turn("first", temperature=0.1, max_tokens=50)
    await agent.arun_turn("second")
    assert _sampling(bodies[0]) == {"top_p": 0.5, "temperature": 0.1, "max_completion_tokens": 50}
    assert _sampling(bodies[1]) == {"top_p": 0.5}


def test_ask_and_the_builder_take_parameters_as_keywords_without_model_params() -> None:
    model = ScriptedModel([say("a"), say("b")])
    agent = AgentSession.builder(model).with_params(temperature=0.2, max_tokens=100).build()
    assert agent.ask("one", seed=7, thinking_level="low") == "a"
    assert agent.ask("two") == "b"
    first, second = model.params
    assert first is not None and second is not None
    assert (first.temperature, first.max_tokens, first.seed) == (0.2, 100, 7)
    assert (
        first.thinking_level is not None and first.thinking_level.value == "low"
    )  # a string became the type
    assert (second.temperature, second.seed, second.thinking_level) == (0.2, None, None)
    assert not is_set(second, "top_p")


def test_an_unknown_parameter_keyword_is_a_type_error_naming_it() -> None:
    agent = AgentSession.builder(ScriptedModel([say("a")])).build()
    with pytest.raises(TypeError, match="temprature"):
        agent.ask("x", temprature=0.1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="output_format"):
        AgentSession.builder(ScriptedModel([])).with_params(output_format="json")  # type: ignore[call-arg]
