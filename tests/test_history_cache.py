"""Every HTTP backend sends, from its per-session history cache, the very bytes it sends when it
maps the whole history afresh: random histories built turn by turn (with rewinds and
branches), for OpenAI Chat, Anthropic Messages and OpenAI Responses."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from foundation_ai.backends import anthropic, openai_chat, openai_responses
from foundation_ai.backends._anthropic import AnthropicWireCache
from foundation_ai.backends._anthropic_request import wire_messages
from foundation_ai.types import (
    AssistantMessage,
    CacheRetention,
    ImageContent,
    MessageRole,
    Messages,
    ModelInteraction,
    ModelParams,
    ModelProviders,
    StopReason,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
)
from tests._fuzz import fuzz_settings

ORIGIN = "127.0.0.1:9"
LONG = "call_" + "x" * 70  # too long for every provider: rewritten
CALL_IDS = st.sampled_from(["", "c1", "c2", "call.x:1", LONG])
PROVIDERS = st.sampled_from(
    [ModelProviders.Anthropic, ModelProviders.OpenAIResponses, ModelProviders.OpenAI, ModelProviders.LlamaCpp]
)
TEXTS = st.sampled_from(["", "  ", "hi", "ok \n", "it is 42"])
IMAGE = ImageContent(b64="aGVsbG8=")
SIGNATURES = st.sampled_from([None, "sig", "msg_1", '{"reasoning_content":"r","extra_content":{"a":1}}'])


@st.composite
def assistant(draw: st.DrawFn) -> AssistantMessage:
    kind = draw(st.sampled_from(["text", "call", "thinking", "image"]))
    content: Any
    if kind == "text":
        content = TextContent(draw(TEXTS))
    elif kind == "call":
        args = draw(st.sampled_from([None, {}, {"a": 1}]))
        raw = draw(st.sampled_from([None, '{"a":']))
        content = ToolCall(
            id=draw(CALL_IDS),
            name=draw(st.sampled_from(["add", "bad name!", ""])),
            arguments=args,
            raw_arguments=raw if args is None else None,
            signature=draw(st.sampled_from([None, "tsig"])),
        )
    elif kind == "thinking":
        content = ThinkingContent(
            draw(st.sampled_from(["", "hmm"])),
            signature=draw(st.sampled_from([None, "tsig", "enc"])),
            redacted=draw(st.booleans()),
            item_id=draw(st.sampled_from([None, "rs_1"])),
        )
    else:
        content = IMAGE
    return AssistantMessage(
        model="m",
        content=content,
        provider=draw(PROVIDERS),
        signature=draw(SIGNATURES),
        origin=draw(st.sampled_from([None, ORIGIN, "elsewhere"])),
        stop_reason=draw(st.sampled_from([StopReason.STOP, StopReason.TOOL_USE, StopReason.Error()])),
        error_detail=draw(st.sampled_from([None, "boom"])),
    )


@st.composite
def result(draw: st.DrawFn) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=draw(CALL_IDS),
        name="add",
        content=draw(st.sampled_from([TextContent("42"), TextContent(""), TextContent(" "), IMAGE])),
        error_detail=draw(st.sampled_from([None, "bad"])),
    )


@st.composite
def user(draw: st.DrawFn) -> Messages.User:
    role = draw(st.sampled_from([MessageRole.User, MessageRole.System, MessageRole.Agent, "critic"]))
    content = draw(st.sampled_from([TextContent("q"), TextContent(""), TextContent(" "), IMAGE]))
    return Messages.User(role=role, content=content)


@st.composite
def turn(draw: st.DrawFn) -> list[Any]:
    """The messages of one step: mostly a prompt, calls and their results, an answer; any
    other order too."""
    if draw(st.booleans()):
        calls = draw(st.lists(assistant(), min_size=1, max_size=3))
        results = draw(st.lists(result(), max_size=3))
        return [draw(user()), *calls, *results, draw(assistant())]
    return draw(st.lists(st.one_of(user(), assistant(), result()), min_size=1, max_size=4))


# a step: messages to append, or a rewind to a shorter history (a branch)
steps = st.lists(turn() | st.integers(min_value=0, max_value=40), min_size=1, max_size=8)

PARAMS = st.builds(
    ModelParams,
    cache_retention=st.sampled_from([None, CacheRetention.Short, CacheRetention.Long]),
    thinking_level=st.sampled_from([None, ThinkingLevel.Off, ThinkingLevel.Low]),
)


def _pairs() -> list[tuple[str, Any, Any]]:
    """(name, body function of a cached backend, body function of the same backend uncached)."""
    out: list[tuple[str, Any, Any]] = []
    for model_name in ("claude-sonnet-4-5", "claude-3-5-haiku"):
        cached, fresh = (anthropic(model_name, api_key="k", base_url=f"http://{ORIGIN}") for _ in "ab")
        fresh._wire_cache = None
        out.append((f"anthropic {model_name}", cached.wire_body, fresh.wire_body))
    for model_name in ("gpt-5-mini", "gpt-4.1", "local-model"):
        for store in (None, False):
            cached, fresh = (
                openai_responses(model_name, api_key="k", base_url=f"http://{ORIGIN}", store=store)
                for _ in "ab"
            )
            fresh._wire_cache = None
            out.append((f"responses {model_name} store={store}", cached.wire_body, fresh.wire_body))
    for content in (None, ""):
        cached, fresh = (
            openai_chat("m", api_key="k", base_url=f"http://{ORIGIN}", tool_call_content=content)
            for _ in "ab"
        )
        fresh._wire_cache = None
        out.append((f"chat tool_call_content={content!r}", cached._body, fresh._body))
    return out


def _bytes(body: bytes | dict[str, Any]) -> bytes:
    return body if isinstance(body, bytes) else msgspec.json.encode(body)


@pytest.mark.fuzz
@fuzz_settings()
@given(steps, PARAMS, st.sampled_from(["", "You add."]))
def test_cached_request_bytes_equal_fresh_ones_on_random_histories(
    plan: list[Any], params: ModelParams, system: str
) -> None:
    backends = _pairs()
    history: list[Any] = []
    for step in plan:
        if isinstance(step, int):
            del history[step:]  # a rewind: the cache must notice the history changed
            continue
        for m in step:
            history.append(m)
            interaction = ModelInteraction(messages=list(history), system_prompt=system)
            for name, cached, fresh in backends:
                got = _bytes(cached(interaction, params))
                want = _bytes(fresh(interaction, params))
                assert got == want, (name, len(history))


def test_anthropic_cache_keeps_closed_messages_encoded_and_maps_only_the_open_one() -> None:
    cache = AnthropicWireCache()
    history: list[Any] = []
    for i in range(20):
        history += [
            Messages.user(f"q{i}"),
            AssistantMessage(model="m", content=ToolCall(id=f"c{i}", name="add", arguments={"a": i})),
            ToolResultMessage(tool_call_id=f"c{i}", name="add", content=TextContent(str(i))),
            AssistantMessage(model="m", content=TextContent(f"a{i}")),
        ]
    history.append(Messages.user("now"))
    out = cache.messages(history)
    assert msgspec.json.encode(out) == msgspec.json.encode(wire_messages(history))
    assert all(isinstance(m, msgspec.Raw) for m in out[:-1])
    assert out[-1] == {"role": "user", "content": [{"type": "text", "text": "now"}]}
    # a steering message joins the open user turn: still one wire message, remapped
    history.append(Messages.user("also this"))
    out = cache.messages(history)
    assert out[-1]["content"][-1] == {"type": "text", "text": "also this"}
    assert msgspec.json.encode(out) == msgspec.json.encode(wire_messages(history))


def test_anthropic_cache_maps_afresh_a_history_that_changed() -> None:
    cache = AnthropicWireCache()
    first = [Messages.user("a"), AssistantMessage(model="m", content=TextContent("b")), Messages.user("c")]
    cache.messages(first)
    edited = [first[0], AssistantMessage(model="m", content=TextContent("B!")), Messages.user("c")]
    got = msgspec.json.encode(cache.messages(edited))
    assert got == msgspec.json.encode(wire_messages(edited))
    assert b"B!" in got
