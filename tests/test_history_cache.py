"""Every HTTP backend sends, from its per-session history cache, the very bytes it sends when it
maps the whole history afresh: random histories built turn by turn (with rewinds and
branches), for OpenAI Chat, Anthropic Messages and OpenAI Responses."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any
from unittest import mock

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from foundation_ai.backends import _wire_cache, anthropic, openai_chat, openai_responses
from foundation_ai.backends._anthropic import AnthropicWireCache
from foundation_ai.backends._anthropic_request import wire_messages
from foundation_ai.backends._sanitize import ANTHROPIC, IdMapping, sanitize_history
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
    ToolDeclarations,
    ToolResultMessage,
)
from tests._backend_helpers import Fixtures, reset, serve, tool
from tests._fixture_server import FixtureServer
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
    _check_plan(plan, params, system)


@pytest.mark.fuzz
@fuzz_settings()
@given(steps, PARAMS, st.sampled_from([1, 2, 3]))
def test_packed_prefixes_send_the_bytes_of_fresh_requests_on_random_histories(
    plan: list[Any], params: ModelParams, pack: int
) -> None:
    # tiny packs, so that every random history has encoded items joined into packed ones
    with mock.patch.object(_wire_cache, "PACK", pack):
        _check_plan(plan, params, "You add.")


def _check_plan(plan: list[Any], params: ModelParams, system: str) -> None:
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


# ------------------------------------------------------------------------------------------
# through HTTP: a session built from every recorded answer of our fixtures


@pytest.fixture(scope="module")
def srv() -> Iterator[FixtureServer]:
    yield from serve()


BACKENDS = {
    "anthropic": lambda url: anthropic("claude-sonnet-4-5", base_url=url, api_key="k", max_retries=0),
    "openai_responses": lambda url: openai_responses("gpt-5-mini", base_url=url, api_key="k", max_retries=0),
    "openai_chat": lambda url: openai_chat("m", base_url=url, api_key="k", max_retries=0),
}


def _plain_bytes(model: Any, interaction: ModelInteraction) -> bytes:
    if hasattr(model, "_body"):
        return bytes(model._body(interaction, None))
    return msgspec.json.encode(model.request_body(interaction))


@pytest.mark.parametrize("folder", sorted(BACKENDS))
def test_a_session_of_every_fixture_answer_sends_the_bytes_of_the_whole_history(
    srv: FixtureServer, folder: str
) -> None:
    fixtures = Fixtures(folder)
    answers = sorted(fixtures.path.glob("*.sse"))
    assert len(answers) >= 10
    cached, plain = BACKENDS[folder](srv.base_url), BACKENDS[folder](srv.base_url)
    plain._wire_cache = None
    tools = ToolDeclarations(tools=[tool("get_weather", city="string"), tool("search", q="string")])
    history: list[Any] = [Messages.user("start")]
    for answer in answers:
        reset(srv)
        srv.queue(fixtures.sse(answer.name))
        interaction = ModelInteraction(messages=list(history), tools_shed=tools, system_prompt="Be brief.")
        outputs = cached.generate(interaction)
        assert srv.requests, answer.name
        assert srv.requests[-1].body == _plain_bytes(plain, interaction), answer.name
        history += outputs
        for m in outputs:
            if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall):
                history.append(
                    ToolResultMessage(
                        tool_call_id=m.content.id, name=m.content.name, content=TextContent("42")
                    )
                )
        history.append(Messages.user(f"after {answer.stem}"))
    # the history's older part went out from the cache: the last request reused it
    mapped = cached._wire_cache
    if folder == "openai_chat":
        got = mapped.messages(ModelInteraction(messages=history))
    elif folder == "anthropic":
        got = mapped.messages(history)
    else:
        got = mapped.items(history, store=None).items
    raw_items = sum(isinstance(x, msgspec.Raw) for x in got)
    assert raw_items >= len(answers)


# ------------------------------------------------------------------------------------------
# format specifics


def _both(make: Any, interaction: ModelInteraction, params: ModelParams) -> tuple[bytes, bytes]:
    cached, plain = make(), make()
    plain._wire_cache = None
    cached.wire_body(interaction, params)  # warm the cache with this very history
    return _bytes(cached.wire_body(interaction, params)), _bytes(plain.wire_body(interaction, params))


def test_anthropic_tool_loop_keeps_thinking_when_the_cached_turn_began_with_it() -> None:
    def make() -> Any:
        return anthropic("claude-sonnet-4-5", api_key="k", base_url=f"http://{ORIGIN}")

    def thinking_loop(provider: str) -> list[Any]:
        think = AssistantMessage(
            model="m", content=ThinkingContent("plan", signature="sig"), provider=provider
        )
        call = AssistantMessage(
            model="m", content=ToolCall(id="toolu_1", name="add", arguments={"a": 1}), provider=provider
        )
        return [
            Messages.user("add"),
            think,
            call,
            ToolResultMessage(tool_call_id="toolu_1", name="add", content=TextContent("2")),
        ]

    params = ModelParams(thinking_level=ThinkingLevel.Low, cache_retention=CacheRetention.Short)
    ours = ModelInteraction(messages=thinking_loop(ModelProviders.Anthropic))
    got, want = _both(make, ours, params)
    assert got == want
    assert b'"thinking":{"type":"enabled"' in got
    assert got.count(b"cache_control") == 1  # one breakpoint, on the last block
    other = ModelInteraction(messages=thinking_loop(ModelProviders.OpenAI))  # a fallback's turn
    got, want = _both(make, other, params)
    assert got == want
    assert b'"thinking":{"type":"enabled"' not in got


def test_responses_call_answered_after_a_not_run_output_remaps_the_history() -> None:
    cache_model = openai_responses("gpt-5-mini", api_key="k", base_url=f"http://{ORIGIN}")
    plain = openai_responses("gpt-5-mini", api_key="k", base_url=f"http://{ORIGIN}")
    plain._wire_cache = None
    call = AssistantMessage(model="m", content=ToolCall(id="c1", name="add", arguments={}))
    answer = AssistantMessage(model="m", content=TextContent("ok"))
    history: list[Any] = [Messages.user("a"), call, Messages.user("interrupting"), answer]
    bodies = []
    for extra in ([], [ToolResultMessage(tool_call_id="c1", name="add", content=TextContent("late"))]):
        history += extra
        interaction = ModelInteraction(messages=list(history))
        got = _bytes(cache_model.wire_body(interaction, ModelParams()))
        assert got == _bytes(plain.wire_body(interaction, ModelParams()))
        bodies.append(got)
    assert b"not run" in bodies[0]  # the call had no output: it was given one
    assert b"not run" not in bodies[1] and b"late" in bodies[1]  # the late output answers it


def test_responses_reasoning_item_stays_before_its_item_with_ids_and_without_store() -> None:
    reasoning = AssistantMessage(
        model="m",
        content=ThinkingContent("why", signature="enc", item_id="rs_1"),
        provider=ModelProviders.OpenAIResponses,
    )
    text_out = AssistantMessage(
        model="m", content=TextContent("done"), provider=ModelProviders.OpenAIResponses, signature="msg_1"
    )
    history = [Messages.user("q"), reasoning, text_out, Messages.user("more")]
    for store in (None, False):

        def make(store: bool | None = store) -> Any:
            return openai_responses("local-model", api_key="k", base_url=f"http://{ORIGIN}", store=store)

        got, want = _both(make, ModelInteraction(messages=history), ModelParams())
        assert got == want
        assert b'"type":"reasoning"' in got and b"reasoning.encrypted_content" in got
        assert (b'"id":"msg_1"' in got) is (store is None)


def test_each_cache_keeps_at_most_its_size_in_sessions() -> None:
    cache = AnthropicWireCache(size=3)
    for i in range(5):
        cache.messages(
            [
                Messages.user(f"s{i}"),
                AssistantMessage(model="m", content=TextContent("a")),
                Messages.user("b"),
            ]
        )
    assert len(cache._cache) == 3


def test_committing_a_child_id_mapping_equals_sanitizing_through_the_parent() -> None:
    first = [call_msg(LONG), result_msg(LONG), call_msg(""), call_msg("")]
    later = [result_msg(""), call_msg(LONG), result_msg(LONG), result_msg("")]
    direct = IdMapping(ANTHROPIC.id_max)
    sanitize_history(first, ANTHROPIC, ids=direct)
    committed = IdMapping(ANTHROPIC.id_max)
    child = committed.child()
    sanitize_history(first, ANTHROPIC, ids=child)
    child.commit()
    assert sanitize_history(later, ANTHROPIC, ids=direct) == sanitize_history(later, ANTHROPIC, ids=committed)
    with pytest.raises(ValueError):
        IdMapping(ANTHROPIC.id_max).commit()


def test_sanitize_history_names_the_source_of_each_message_it_keeps() -> None:
    history = [
        Messages.user("a"),
        Messages.user("   "),  # blank: left out for Anthropic
        AssistantMessage(model="m", content=ThinkingContent("t")),  # left out without thinking
        call_msg("c1"),
        result_msg("c1"),
    ]
    sources: list[int] = []
    kept = sanitize_history(history, ANTHROPIC, keep_thinking=False, sources=sources)
    assert sources == [0, 3, 4]
    assert len(kept) == len(sources)


def call_msg(cid: str) -> AssistantMessage:
    return AssistantMessage(model="m", content=ToolCall(id=cid, name="add", arguments={}))


def result_msg(cid: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=cid, name="add", content=TextContent("1"))


def test_anthropic_history_rewound_to_the_cached_prefix_is_mapped_afresh() -> None:
    cache = AnthropicWireCache()
    prompt, answer = Messages.user("q"), AssistantMessage(model="m", content=TextContent("ok \n"))
    cache.messages([prompt, answer, Messages.user("q2")])  # caches [prompt, answer]
    for rest in ([], [AssistantMessage(model="m", content=TextContent("more"))], [Messages.user(" ")]):
        history = [prompt, answer, *rest]  # cut back, then nothing or the same role again
        got = cache.messages(history)
        assert msgspec.json.encode(got) == msgspec.json.encode(wire_messages(history))
        assert isinstance(got[-1], dict) and got[-1]["role"] == "assistant"


def test_threads_sharing_one_backend_and_one_session_get_the_fresh_bytes() -> None:
    from concurrent.futures import ThreadPoolExecutor

    cached = anthropic("claude-sonnet-4-5", api_key="k", base_url=f"http://{ORIGIN}")
    plain = anthropic("claude-sonnet-4-5", api_key="k", base_url=f"http://{ORIGIN}")
    plain._wire_cache = None
    history: list[Any] = []
    for i in range(200):
        history += [Messages.user(f"q{i}"), call_msg(f"c{i}"), result_msg(f"c{i}"), text_msg(f"a{i}")]
    # the threads send the session growing message by message, several requests at a time:
    # an entry is lent to one request, never shared (a shared one would be extended twice)
    lengths = list(range(len(history) - 300, len(history) + 1))
    interactions = [ModelInteraction(messages=history[:n]) for n in lengths]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave inside the mapping
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            got = list(pool.map(lambda it: _bytes(cached.wire_body(it, ModelParams())), interactions))
    finally:
        sys.setswitchinterval(switch)
    assert got == [_bytes(plain.wire_body(it, ModelParams())) for it in interactions]


def text_msg(text: str) -> AssistantMessage:
    return AssistantMessage(model="m", content=TextContent(text))
