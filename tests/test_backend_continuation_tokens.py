"""Continuation tokens (docs/providers.md): every opaque token a provider documents is kept on
the output it belongs to, survives the JSON format, and is sent back to that provider only, in
the place it expects. Also: reasoning tokens counted once, a refusal's explanation kept.

Wire bytes are the project's own fixtures (tests/fixtures/), written from each provider's public
docs, served by the loopback fixture server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foundation_ai.backends import anthropic, openai_chat, openai_responses
from foundation_ai.backends._reasoning_tokens import billed_output
from foundation_ai.types import (
    AssistantMessage,
    GenerationMetadata,
    Messages,
    ModelId,
    ModelInteraction,
    ModelProviders,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclarations,
    ToolResultMessage,
    from_json,
    to_json,
)
from tests._backend_helpers import Fixtures, FixtureServer, check_contract, outputs, reset, serve, tool

CHAT = Fixtures("openai_chat")
ANTHROPIC = Fixtures("anthropic")
RESPONSES = Fixtures("openai_responses")
TOOLS = ToolDeclarations(tools=[tool("get_weather", city="string"), tool("get_time", tz="string")])


@pytest.fixture(scope="module")
def srv() -> Iterator[FixtureServer]:
    yield from serve()


@pytest.fixture
def fresh(srv: FixtureServer) -> FixtureServer:
    return reset(srv)


def chat(srv: FixtureServer, base_url: str | None = None) -> Any:
    return openai_chat("m", base_url=base_url or srv.base_url, api_key="sk-test", max_retries=0)


def ask(*history: Any) -> ModelInteraction:
    return ModelInteraction(messages=[Messages.user("weather?"), *history], tools_shed=TOOLS)


def turn_two(got: list[AssistantMessage]) -> ModelInteraction:
    """The next request's history: the answer, then a result for every call."""
    results = [
        ToolResultMessage(tool_call_id=m.content.id, name=m.content.name, content=TextContent("sunny"))
        for m in got
        if isinstance(m.content, ToolCall)
    ]
    return ask(*got, *results)


def assistant_sent(srv: FixtureServer) -> dict[str, Any]:
    body = srv.requests[-1].json()
    return next(m for m in body["messages"] if m["role"] == "assistant")


# ------------------------------------------------------------------------------------------
# Gemini (OpenAI compatibility)


def test_gemini_thought_signature_is_kept_and_replayed(fresh: FixtureServer) -> None:
    fresh.queue(CHAT.sse("gemini_thought_signature_tools.sse"))
    model = chat(fresh)
    items = list(model.stream(ask()))
    check_contract(items)
    got = outputs(items)
    calls = [m for m in got if isinstance(m.content, ToolCall)]
    assert [c.content.signature for c in calls] == ["CtsBAdHtim9fW1zQ==", None]
    assert calls[0].origin == model.origin
    # the next request carries it back on the same call, and only there
    fresh.queue(CHAT.sse("text.sse"))
    list(model.stream(turn_two(got)))
    sent = assistant_sent(fresh)
    first, second = sent["tool_calls"]
    assert first["extra_content"] == {"google": {"thought_signature": "CtsBAdHtim9fW1zQ=="}}
    assert "extra_content" not in second


def test_gemini_message_signature_is_kept_on_a_text_answer_and_replayed(fresh: FixtureServer) -> None:
    fresh.queue(CHAT.json("gemini_thought_signature_text.json"))
    model = chat(fresh)
    got = model.generate(ask())
    (answer,) = got
    assert isinstance(answer, AssistantMessage) and answer.text() == "It is sunny in Paris."
    assert "EpYBCpMBAdHtimXyz==" in (answer.signature or "")
    fresh.queue(CHAT.sse("text.sse"))
    list(model.stream(ask(answer, Messages.user("and tomorrow?"))))
    assert assistant_sent(fresh)["extra_content"] == {"google": {"thought_signature": "EpYBCpMBAdHtimXyz=="}}


def test_tokens_are_never_sent_to_another_server(fresh: FixtureServer) -> None:
    fresh.queue(CHAT.sse("gemini_thought_signature_tools.sse"))
    got = outputs(list(chat(fresh).stream(ask())))
    other = chat(fresh, base_url=fresh.base_url.replace("127.0.0.1", "localhost"))
    fresh.queue(CHAT.sse("text.sse"))
    list(other.stream(turn_two(got)))
    sent = assistant_sent(fresh)
    assert all("extra_content" not in c for c in sent["tool_calls"])
    assert "reasoning_details" not in sent


# ------------------------------------------------------------------------------------------
# OpenRouter reasoning_details, DeepSeek reasoning_content


def test_openrouter_reasoning_details_are_kept_and_replayed(fresh: FixtureServer) -> None:
    fresh.queue(CHAT.sse("openrouter_reasoning_details.sse"))
    model = chat(fresh)
    items = list(model.stream(ask()))
    check_contract(items)
    got = outputs(items)
    thinking = [m for m in got if isinstance(m.content, ThinkingContent)]
    assert thinking and thinking[0].content.thinking == "Check the weather first."
    fields = msgspec.json.decode(got[-1].signature or "{}")
    assert fields["reasoning_details"] == [
        {
            "type": "reasoning.text",
            "text": "Check the weather first.",
            "format": "anthropic-claude-v1",
            "index": 0,
            "signature": "ErUBCkYIBRgCIkDsig==",
        }
    ]
    fresh.queue(CHAT.sse("text.sse"))
    list(model.stream(turn_two(got)))
    assert assistant_sent(fresh)["reasoning_details"] == fields["reasoning_details"]


def test_deepseek_reasoning_content_goes_back_on_a_tool_call_turn(fresh: FixtureServer) -> None:
    fresh.queue(CHAT.sse("deepseek_reasoning_tool.sse"))
    model = chat(fresh)
    got = outputs(list(model.stream(ask())))
    fresh.queue(CHAT.sse("text.sse"))
    list(model.stream(turn_two(got)))
    sent = assistant_sent(fresh)
    assert sent["reasoning_content"] == "I need the time in Paris."
    assert sent["tool_calls"][0]["function"]["name"] == "get_time"


def test_reasoning_content_is_not_sent_back_on_a_turn_without_tools(fresh: FixtureServer) -> None:
    fresh.queue(CHAT.sse("xai_reasoning_usage.sse"))
    model = chat(fresh)
    got = outputs(list(model.stream(ask())))
    fresh.queue(CHAT.sse("text.sse"))
    list(model.stream(ask(*got, Messages.user("again"))))
    assert "reasoning_content" not in assistant_sent(fresh)


# ------------------------------------------------------------------------------------------
# usage: reasoning counted exactly once


def test_xai_reasoning_tokens_are_counted_as_output_once(fresh: FixtureServer) -> None:
    fresh.queue(CHAT.sse("xai_reasoning_usage.sse"))
    last = outputs(list(chat(fresh).stream(ask())))[-1]
    assert last.usage.output == 3 + 95  # completion_tokens left the reasoning out
    assert last.usage.total_tokens == 118


def test_openrouter_reasoning_tokens_already_in_completion_are_not_added_again(fresh: FixtureServer) -> None:
    fresh.queue(CHAT.sse("openrouter_reasoning_details.sse"))
    last = outputs(list(chat(fresh).stream(ask())))[-1]
    assert last.usage.output == 40
    assert last.usage.total_tokens == 90


# usage objects shaped as each provider's docs show them: (prompt, completion, reasoning, total)
USAGE_CONVENTIONS = [
    ("OpenAI o-series", (75, 1186, 1024, 1261), 1186),  # reasoning is part of completion_tokens
    ("DeepSeek reasoner", (6, 212, 198, 218), 212),
    ("Groq", (304, 49, 23, 353), 49),
    ("OpenRouter", (43, 36, 13, 79), 36),
    ("xAI Grok", (307, 26, 227, 560), 253),  # completion_tokens leave the reasoning out
    ("no reasoning reported", (10, 5, 0, 15), 5),
    ("no total reported", (10, 5, 3, None), 5),
]


@pytest.mark.parametrize(
    ("provider", "usage", "billed"), USAGE_CONVENTIONS, ids=[c[0] for c in USAGE_CONVENTIONS]
)
def test_reasoning_tokens_are_counted_exactly_once_per_provider_convention(
    provider: str, usage: tuple[float, float, float, float | None], billed: float
) -> None:
    prompt, completion, reasoning, total = usage
    assert billed_output(completion, reasoning, prompt, total) == billed


def test_responses_reasoning_tokens_left_out_of_output_tokens_are_added_once() -> None:
    from foundation_ai.backends._responses_stream import usage_of

    details = {"output_tokens_details": {"reasoning_tokens": 20}}
    left_out = usage_of({"input_tokens": 10, "output_tokens": 5, "total_tokens": 35, **details})
    included = usage_of({"input_tokens": 10, "output_tokens": 25, "total_tokens": 35, **details})
    assert left_out.output == included.output == 25
    assert left_out.total_tokens == included.total_tokens == 35


# ------------------------------------------------------------------------------------------
# Anthropic and Responses tokens (already kept: checked end to end with the JSON format)


def test_anthropic_thinking_signature_and_redacted_data_survive_the_json_format(fresh: FixtureServer) -> None:
    fresh.queue(ANTHROPIC.sse("c19_redacted_thinking.sse"))
    model = anthropic("claude-sonnet-4-5", base_url=fresh.base_url, api_key="sk-test", max_retries=0)
    got = model.generate(ask())
    again = from_json(to_json(got), list[Messages])
    assert again == got
    fresh.queue(ANTHROPIC.sse("text.sse"))
    list(model.stream(ask(*again)))
    blocks = next(m for m in fresh.requests[-1].json()["messages"] if m["role"] == "assistant")["content"]
    assert any(b["type"] == "redacted_thinking" for b in blocks)


def test_anthropic_refusal_keeps_stop_details(fresh: FixtureServer) -> None:
    fresh.queue(ANTHROPIC.sse("refusal_stop_details.sse"))
    items = list(
        anthropic("claude-opus-4-5", base_url=fresh.base_url, api_key="k", max_retries=0).stream(ask())
    )
    check_contract(items)
    last = outputs(items)[-1]
    assert last.stop_reason == StopReason.REFUSAL and last.stop_reason.is_refusal()
    assert last.refusal() == "This request was declined under the usage policy."
    (reason,) = [m for m in last.metadata or [] if isinstance(m, GenerationMetadata.RefusalReason)]
    assert reason.category == "cyber"


def test_responses_encrypted_reasoning_closed_late_is_kept_and_replayed(fresh: FixtureServer) -> None:
    fresh.queue(RESPONSES.sse("reasoning_closed_after_message.sse"))
    model = openai_responses("gpt-5-mini", base_url=fresh.base_url, api_key="k", max_retries=0)
    got = outputs(list(model.stream(ask())))
    thinking = next(m for m in got if isinstance(m.content, ThinkingContent))
    assert thinking.content.signature == "gAAAAB-closed-late" and thinking.content.item_id == "rs_1"
    fresh.queue(RESPONSES.sse("text.sse"))
    list(model.stream(ask(*got, Messages.user("thanks"))))
    sent = fresh.requests[-1].json()["input"]
    reasoning = [it for it in sent if it["type"] == "reasoning"]
    assert reasoning == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Two plus two is four."}],
            "encrypted_content": "gAAAAB-closed-late",
        }
    ]


# ------------------------------------------------------------------------------------------
# the JSON format keeps every token field (hypothesis round trip)

_token = st.text(min_size=1, max_size=40)
_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=12))
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


@st.composite
def _token_messages(draw: st.DrawFn) -> AssistantMessage:
    kind = draw(st.sampled_from(["text", "thinking", "call"]))
    sig = draw(st.none() | _token)
    if kind == "text":
        content: Any = TextContent(draw(st.text(max_size=20)), sig)
    elif kind == "thinking":
        content = ThinkingContent(
            draw(st.text(max_size=20)),
            signature=sig,
            redacted=draw(st.booleans()),
            item_id=draw(st.none() | _token),
        )
    else:
        content = ToolCall(id=draw(_token), name="f", arguments={}, signature=sig)
    fields = draw(st.none() | st.dictionaries(st.sampled_from(["reasoning_details", "extra_content"]), _json))
    refusal = draw(st.none() | st.tuples(st.text(max_size=20), st.none() | st.text(max_size=8)))
    meta = [GenerationMetadata.RefusalReason(refusal[0], category=refusal[1])] if refusal else None
    return AssistantMessage(
        model=ModelId.Name("m"),
        content=content,
        provider=draw(st.sampled_from([ModelProviders.OpenAI, ModelProviders.Anthropic, "openrouter"])),
        signature=msgspec.json.encode(fields).decode() if fields is not None else None,
        origin=draw(st.none() | st.sampled_from(["openrouter.ai", "127.0.0.1:8080"])),
        stop_reason=draw(st.sampled_from([StopReason.STOP, StopReason.REFUSAL, StopReason.TOOL_USE])),
        metadata=meta,
    )


@settings(max_examples=150, deadline=None, derandomize=True)
@given(_token_messages())
def test_continuation_tokens_round_trip_through_the_json_format(message: AssistantMessage) -> None:
    assert from_json(to_json(message), Messages) == message
