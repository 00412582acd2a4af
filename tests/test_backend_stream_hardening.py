"""Hardening round 2: what the three HTTP backends read from the wire.

- A stream never raises for anything the server sends: wrong-typed fields end in the contract's
  error message (bounded, seeded hypothesis fuzz over SSE event sequences, one per backend;
  ``FOUNDATION_AI_FUZZ_EXAMPLES`` raises the budget for a longer run).
- Text survives any chunk boundary: a surrogate pair split over two events, UTF-8 bytes split
  over network chunks, an escape split inside streamed tool arguments.
- Reasoning under every spelling OpenAI-compatible servers use, streamed and not.
- A refusal is a typed outcome on all three backends, and reports its time to first token.
- Responses items closed in any order keep the stream contract (property test).

Wire bytes are the project's own fixtures (tests/fixtures/, written from provider docs) or built
here; all served by the loopback fixture server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation_ai.backends import anthropic, openai_chat, openai_responses
from foundation_ai.types import (
    AssistantMessage,
    GenerationMetadata,
    Messages,
    ModelInteraction,
    ModelParams,
    ModelState,
    OutputFormat,
    StopReason,
    Stream,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclarations,
    from_json,
    to_json,
)
from tests._backend_helpers import (
    Canned,
    Fixtures,
    FixtureServer,
    check_contract,
    check_ends,
    error_of,
    nexts,
    outputs,
    reset,
    serve,
    tool,
)
from tests._fixture_server import sse, sse_events

CHAT = Fixtures("openai_chat")
ANTHROPIC = Fixtures("anthropic")
RESPONSES = Fixtures("openai_responses")
TOOLS = ToolDeclarations(tools=[tool("search", q="string")])
FUZZ_EXAMPLES = int(os.environ.get("FOUNDATION_AI_FUZZ_EXAMPLES", "120"))


@pytest.fixture(scope="module")
def srv() -> Iterator[FixtureServer]:
    yield from serve()


@pytest.fixture
def fresh(srv: FixtureServer) -> FixtureServer:
    return reset(srv)


def ask() -> ModelInteraction:
    return ModelInteraction(messages=[Messages.user("hi")], tools_shed=TOOLS)


BACKENDS = {
    "openai_chat": lambda url: openai_chat("m", base_url=url, api_key="k", max_retries=0),
    "anthropic": lambda url: anthropic("m", base_url=url, api_key="k", max_retries=0),
    "openai_responses": lambda url: openai_responses("m", base_url=url, api_key="k", max_retries=0),
}


def run(srv: FixtureServer, backend: str, canned: Canned) -> list[Any]:
    reset(srv)
    srv.queue(canned)
    return list(BACKENDS[backend](srv.base_url).stream(ask()))


# ------------------------------------------------------------------------------------------
# a stream never raises for anything the server sends

_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=6),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["type", "text", "x"]), st.text(max_size=3), max_size=2),
)


def _maybe(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a well-typed value, sometimes any JSON value at all."""
    return st.one_of(valid, valid, _junk)


def _fields(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={k: _maybe(v) for k, v in fields.items()})


_text = st.text(max_size=8)
_chat_tool = _fields(index=st.integers(0, 2), id=_text, function=_fields(name=_text, arguments=_text))
_chat_delta = _fields(
    content=_text,
    reasoning_content=_text,
    reasoning=_text,
    refusal=_text,
    tool_calls=st.lists(_chat_tool, max_size=2),
    reasoning_details=st.lists(_fields(type=_text, text=_text, index=st.integers(0, 1)), max_size=2),
    extra_content=_fields(google=_fields(thought_signature=_text)),
)
_chat_usage = _fields(
    prompt_tokens=st.integers(0, 50),
    completion_tokens=st.integers(0, 50),
    total_tokens=st.integers(0, 99),
    completion_tokens_details=_fields(reasoning_tokens=st.integers(0, 9)),
)
_chat_event = _fields(
    choices=st.lists(
        _fields(
            index=st.integers(0, 1), delta=_chat_delta, finish_reason=st.sampled_from(["stop", "tool_calls"])
        ),
        max_size=2,
    ),
    usage=_chat_usage,
    system_fingerprint=_text,
)

_a_block = _fields(
    type=st.sampled_from(["text", "thinking", "tool_use", "redacted_thinking"]),
    text=_text,
    thinking=_text,
    id=_text,
    name=_text,
    input=st.dictionaries(_text, _text, max_size=1),
    data=_text,
)
_a_delta = _fields(
    type=st.sampled_from(["text_delta", "thinking_delta", "signature_delta", "input_json_delta"]),
    text=_text,
    thinking=_text,
    signature=_text,
    partial_json=_text,
    stop_reason=st.sampled_from(["end_turn", "tool_use", "refusal", "max_tokens"]),
    stop_details=_fields(explanation=_text, category=_text),
)
_a_usage = _fields(input_tokens=st.integers(0, 9), output_tokens=st.integers(0, 9))
_anthropic_event = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
                "ping",
            ]
        )
    },
    optional={
        "index": _maybe(st.integers(0, 2)),
        "content_block": _maybe(_a_block),
        "delta": _maybe(_a_delta),
        "usage": _maybe(_a_usage),
        "message": _maybe(_fields(usage=_a_usage)),
    },
)

_r_item = _fields(
    type=st.sampled_from(["message", "reasoning", "function_call"]),
    id=st.sampled_from(["a", "b", "c"]),
    call_id=_text,
    name=_text,
    arguments=_text,
    encrypted_content=_text,
    summary=st.lists(_fields(type=_text, text=_text), max_size=2),
    content=st.lists(
        _fields(type=st.sampled_from(["output_text", "refusal"]), text=_text, refusal=_text), max_size=2
    ),
)
_responses_event = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "response.output_item.added",
                "response.output_item.done",
                "response.output_text.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.reasoning_summary_text.delta",
                "response.reasoning_text.delta",
                "response.refusal.delta",
                "response.completed",
                "response.incomplete",
            ]
        )
    },
    optional={
        "item": _maybe(_r_item),
        "output_index": _maybe(st.integers(0, 2)),
        "item_id": _maybe(st.sampled_from(["a", "b", "c"])),
        "delta": _maybe(_text),
        "arguments": _maybe(_text),
        "summary_index": _maybe(st.integers(0, 1)),
        "response": _maybe(
            _fields(
                status=st.sampled_from(["completed", "incomplete"]),
                usage=_fields(input_tokens=st.integers(0, 9), output_tokens=st.integers(0, 9)),
                incomplete_details=_fields(reason=_text),
                output=st.lists(_r_item, max_size=2),
            )
        ),
    },
)


def _frames(backend: str, events: list[Any], done: bool) -> Canned:
    if backend == "anthropic":
        chunks = sse_events([(str(e.get("type")), e) for e in events])
    else:
        chunks = sse([*events, *(["[DONE]"] if done else [])])
    return Canned(chunks=chunks)


def _check_never_raises(srv: FixtureServer, backend: str, events: list[Any], done: bool) -> None:
    items = run(srv, backend, _frames(backend, events, done))  # raises -> the test fails
    check_ends(items)
    for m in nexts(items):  # every chunk is a valid, storable message
        assert from_json(to_json(m), Messages) == m
    if isinstance(items[-1].value, ModelState.Error):
        error_of(items)


_FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_FUZZ
@given(events=st.lists(_chat_event, max_size=6), done=st.booleans())
def test_openai_chat_stream_never_raises_for_any_event_sequence(
    srv: FixtureServer, events: list[Any], done: bool
) -> None:
    _check_never_raises(srv, "openai_chat", events, done)


@_FUZZ
@given(events=st.lists(_anthropic_event, max_size=7))
def test_anthropic_stream_never_raises_for_any_event_sequence(srv: FixtureServer, events: list[Any]) -> None:
    _check_never_raises(srv, "anthropic", events, False)


@_FUZZ
@given(events=st.lists(_responses_event, max_size=7))
def test_responses_stream_never_raises_for_any_event_sequence(srv: FixtureServer, events: list[Any]) -> None:
    _check_never_raises(srv, "openai_responses", events, False)


WRONG_TYPES = {
    "openai_chat": [
        {"choices": [{"index": "x", "delta": {"content": "a"}}]},
        {"choices": [{"index": 0, "delta": {"content": "a"}}], "usage": []},
        {"choices": [{"index": 0, "delta": 5}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": [], "function": {"arguments": 7}}]}}]},
    ],
    "anthropic": [
        {"type": "content_block_start", "index": 0, "content_block": None},
        {"type": "content_block_delta", "index": "x", "delta": {"type": "text_delta", "text": 5}},
        {
            "type": "content_block_delta",
            "index": [],
            "delta": {"type": "input_json_delta", "partial_json": 1},
        },
        {"type": "message_delta", "delta": 3, "usage": []},
    ],
    "openai_responses": [
        {"type": "response.output_item.added", "output_index": 0, "item": 5},
        {"type": "response.output_text.delta", "output_index": [], "item_id": 3, "delta": 4},
        {"type": "response.output_item.done", "output_index": 0, "item": {"type": "message", "content": 9}},
        {"type": "response.completed", "response": {"usage": [], "status": 1, "output": 2}},
    ],
}


@pytest.mark.parametrize("backend", sorted(WRONG_TYPES))
def test_wrong_typed_fields_end_in_the_contract_error_or_are_ignored(
    fresh: FixtureServer, backend: str
) -> None:
    for event in WRONG_TYPES[backend]:
        items = run(fresh, backend, _frames(backend, [event], done=True))
        check_ends(items)
        if isinstance(items[-1].value, ModelState.Error):
            error_of(items)


WRONG_TYPED_DOCUMENTS = {
    "openai_chat": [{"choices": 5}, {"choices": [{"message": {"content": [1, {"text": 2}]}}], "usage": "x"}],
    "anthropic": [
        {"type": "message", "content": 5, "usage": [], "stop_reason": 3},
        {
            "type": "message",
            "content": [{"type": "tool_use", "input": 5, "name": 3, "id": []}],
            "stop_details": 1,
        },
    ],
    "openai_responses": [
        {"status": "completed", "output": 5, "usage": {"input_tokens": "x"}},
        {
            "status": "completed",
            "output": [{"type": "message", "content": [{"type": "output_text", "text": 7}]}],
        },
    ],
}


@pytest.mark.parametrize("backend", sorted(WRONG_TYPED_DOCUMENTS))
def test_wrong_typed_whole_answers_end_in_the_contract_error_or_are_ignored(
    fresh: FixtureServer, backend: str
) -> None:
    for doc in WRONG_TYPED_DOCUMENTS[backend]:
        canned = Canned(body=json.dumps(doc).encode(), content_type="application/json")
        items = run(fresh, backend, canned)
        check_ends(items)
        for m in nexts(items):
            assert from_json(to_json(m), Messages) == m
        if isinstance(items[-1].value, ModelState.Error):
            error_of(items)


def test_a_stream_of_only_done_is_an_error_on_openai_chat(fresh: FixtureServer) -> None:
    items = run(fresh, "openai_chat", CHAT.sse("done_only.sse"))
    check_ends(items)
    assert "[DONE]" in (error_of(items).error_detail or "")


# ------------------------------------------------------------------------------------------
# text decoding survives any chunk boundary


@pytest.mark.parametrize(
    ("backend", "fixtures"),
    [("openai_chat", CHAT), ("anthropic", ANTHROPIC), ("openai_responses", RESPONSES)],
)
def test_a_surrogate_pair_split_across_events_decodes(
    fresh: FixtureServer, backend: str, fixtures: Fixtures
) -> None:
    items = run(fresh, backend, fixtures.sse("surrogate_split.sse"))
    check_contract(items)
    texts = [m.content.content for m in outputs(items) if isinstance(m.content, TextContent)]
    assert texts == ["Done 😀 ok"]
    for m in nexts(items):  # no chunk shows half a character
        assert from_json(to_json(m), Messages) == m


def test_a_lone_surrogate_at_the_end_becomes_a_replacement_character(fresh: FixtureServer) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "cut \ud83d"}, "finish_reason": "stop"}]}
    data = json.dumps(chunk)  # ensure_ascii: the lone surrogate travels as an escape
    items = run(fresh, "openai_chat", Canned(chunks=[f"data: {data}\n\n".encode(), b"data: [DONE]\n\n"]))
    assert outputs(items)[-1].text() == "cut \ufffd"


def test_utf8_bytes_split_across_network_chunks_decode(fresh: FixtureServer) -> None:
    raw = (
        CHAT.path.joinpath("surrogate_split.sse")
        .read_bytes()
        .replace(b"\\ud83d", b"")
        .replace(b"\\ude00", "é😀".encode())
    )
    cut = raw.index("😀".encode()) + 2  # in the middle of the emoji's four bytes
    items = run(fresh, "openai_chat", Canned(chunks=[raw[:cut], raw[cut:]]))
    assert outputs(items)[-1].text() == "Done é😀 ok"


def test_an_escape_split_inside_streamed_tool_arguments_decodes(fresh: FixtureServer) -> None:
    events = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "function": {"name": "search", "arguments": '{"q": "caf\\u00'},
                            }
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "e9 \ud83d"}}]}}
            ]
        },
        {
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '\ude00"}'}}]}}
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    items = run(fresh, "openai_chat", Canned(chunks=sse([json.dumps(e) for e in events] + ["[DONE]"])))
    (call,) = [m.content for m in outputs(items) if isinstance(m.content, ToolCall)]
    assert call.arguments == {"q": "café 😀"}


LONE = "x\ud83d"  # json.dumps sends it as the escape "x\\ud83d": half a surrogate pair
LONE_SURROGATE_FIELDS = {
    "openai_chat": [
        {
            "system_fingerprint": LONE,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": LONE,
                                "function": {"name": LONE, "arguments": "{}"},
                                "extra_content": {"google": {"thought_signature": LONE}},
                            }
                        ]
                    },
                }
            ],
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"reasoning_details": [{"type": LONE, "index": 0}]},
                    "finish_reason": LONE,
                }
            ]
        },
    ],
    "anthropic": [
        {"type": "message_start", "message": {"usage": {"input_tokens": 1}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": LONE},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": LONE}},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": LONE, "name": LONE},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 2}},
    ],
    "openai_responses": [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "reasoning", "id": LONE, "encrypted_content": LONE},
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"type": "reasoning", "id": LONE, "encrypted_content": LONE, "summary": []},
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "function_call", "id": "fc", "call_id": LONE, "name": LONE},
        },
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {"type": "function_call", "id": "fc", "call_id": LONE, "name": LONE, "arguments": "{}"},
        },
        {
            "type": "response.completed",
            "response": {"status": "completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
        },
    ],
}


@pytest.mark.parametrize("backend", sorted(LONE_SURROGATE_FIELDS))
def test_half_a_surrogate_pair_in_ids_names_and_signatures_never_makes_a_message_unstorable(
    fresh: FixtureServer, backend: str
) -> None:
    items = run(fresh, backend, _frames(backend, LONE_SURROGATE_FIELDS[backend], done=True))
    check_ends(items)
    assert nexts(items)
    for m in nexts(items):
        assert from_json(to_json(m), Messages) == m


# ------------------------------------------------------------------------------------------
# reasoning under every spelling


def _thinking(items: list[Any]) -> str:
    return "".join(m.content.thinking for m in outputs(items) if isinstance(m.content, ThinkingContent))


def test_streamed_reasoning_field_is_read_as_thinking(fresh: FixtureServer) -> None:
    items = run(fresh, "openai_chat", CHAT.sse("reasoning_field.sse"))
    check_contract(items)
    assert _thinking(items) == "Two plus two is four."
    assert outputs(items)[-1].text() == "4"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "thinking"])
def test_non_streamed_message_reasoning_is_read_under_each_spelling(fresh: FixtureServer, field: str) -> None:
    doc = {
        "id": "c",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Paris", field: "Capital of France."},
            }
        ],
    }
    items = run(fresh, "openai_chat", Canned(body=json.dumps(doc).encode(), content_type="application/json"))
    assert _thinking(items) == "Capital of France."
    assert outputs(items)[-1].text() == "Paris"


def test_the_same_reasoning_under_two_names_is_read_once(fresh: FixtureServer) -> None:
    events = [
        {"choices": [{"index": 0, "delta": {"reasoning_content": "Think.", "reasoning": "Think."}}]},
        {"choices": [{"index": 0, "delta": {"content": "Done"}, "finish_reason": "stop"}]},
    ]
    items = run(fresh, "openai_chat", Canned(chunks=sse([*events, "[DONE]"])))
    assert _thinking(items) == "Think."


def test_thinking_content_parts_are_read_as_thinking(fresh: FixtureServer) -> None:
    items = run(fresh, "openai_chat", CHAT.json("magistral_thinking_parts.json"))
    assert _thinking(items) == "Two plus two is four."
    assert outputs(items)[-1].text() == "4"


# ------------------------------------------------------------------------------------------
# a refusal is a typed outcome


REFUSALS = [
    ("openai_chat", CHAT, "c33_refusal.sse", "I'm sorry, I can't help with that."),
    ("openai_responses", RESPONSES, "refusal.sse", "I'm sorry, but I can't help with that."),
    ("anthropic", ANTHROPIC, "refusal_stop_details.sse", "This request was declined under the usage policy."),
]


@pytest.mark.parametrize(("backend", "fixtures", "name", "text"), REFUSALS)
def test_a_refusal_is_a_typed_outcome_with_its_text_and_time_to_first_token(
    fresh: FixtureServer, backend: str, fixtures: Fixtures, name: str, text: str
) -> None:
    items = run(fresh, backend, fixtures.sse(name))
    check_contract(items)
    last = outputs(items)[-1]
    assert last.stop_reason == StopReason.REFUSAL and last.stop_reason.is_refusal()
    assert last.refusal() == text
    (timing,) = [m for m in last.metadata or [] if isinstance(m, GenerationMetadata.Timing)]
    assert timing.time_to_first_token is not None
    assert isinstance(items[-1], Stream.Pending) and isinstance(items[-1].value, ModelState.Finished)


@pytest.mark.parametrize(("backend", "fixtures", "name", "text"), REFUSALS)
def test_a_refusal_with_structured_output_requested_is_still_a_refusal(
    fresh: FixtureServer, backend: str, fixtures: Fixtures, name: str, text: str
) -> None:
    params = ModelParams(output_format=OutputFormat.JsonSchema(name="answer", schema={"type": "object"}))
    reset(fresh)
    fresh.queue(fixtures.sse(name))
    items = list(BACKENDS[backend](fresh.base_url).stream(ask(), params))
    last = outputs(items)[-1]
    assert last.stop_reason == StopReason.REFUSAL and last.refusal() == text
    assert isinstance(items[-1].value, ModelState.Finished)


def test_content_filter_is_a_refusal_too(fresh: FixtureServer) -> None:
    last = outputs(run(fresh, "openai_chat", CHAT.sse("content_filter.sse")))[-1]
    assert last.stop_reason.is_refusal() and last.refusal() == "content_filter"


def test_an_answer_is_not_a_refusal(fresh: FixtureServer) -> None:
    last = outputs(run(fresh, "openai_chat", CHAT.sse("text.sse")))[-1]
    assert last.refusal() is None and not last.stop_reason.is_refusal()


# ------------------------------------------------------------------------------------------
# Responses: items closed in any order


def test_reasoning_closed_after_the_message_keeps_the_contract(fresh: FixtureServer) -> None:
    items = run(fresh, "openai_responses", RESPONSES.sse("reasoning_closed_after_message.sse"))
    check_contract(items)
    got = outputs(items)
    assert [type(m.content) for m in got] == [ThinkingContent, TextContent]
    assert got[-1].text() == "4" and got[-1].stop_reason == StopReason.STOP
    assert got[-1].usage.output == 9 and got[-1].usage.input == 12


_KINDS = st.lists(st.sampled_from(["message", "reasoning", "function_call"]), min_size=1, max_size=4)


def _responses_stream(
    kinds: list[str], close_order: list[int]
) -> tuple[list[dict[str, Any]], list[tuple[type, str]]]:
    """A valid Responses stream whose items are opened and streamed in order and closed in
    ``close_order``; and the outputs it must assemble to, in item order."""
    events: list[dict[str, Any]] = []
    done: list[dict[str, Any]] = []
    expected: list[tuple[type, str]] = []
    for i, kind in enumerate(kinds):
        iid = f"{kind[:2]}_{i}"
        if kind == "message":
            text = f"answer {i}"
            events += [
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": {"type": "message", "id": iid, "content": []},
                },
                {"type": "response.output_text.delta", "output_index": i, "item_id": iid, "delta": text[:3]},
                {"type": "response.output_text.delta", "output_index": i, "item_id": iid, "delta": text[3:]},
            ]
            done.append({"type": "message", "id": iid, "content": [{"type": "output_text", "text": text}]})
            expected.append((TextContent, text))
        elif kind == "reasoning":
            text = f"thought {i}"
            events += [
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": {"type": "reasoning", "id": iid, "summary": []},
                },
                {
                    "type": "response.reasoning_summary_text.delta",
                    "output_index": i,
                    "item_id": iid,
                    "summary_index": 0,
                    "delta": text,
                },
            ]
            done.append(
                {
                    "type": "reasoning",
                    "id": iid,
                    "summary": [{"type": "summary_text", "text": text}],
                    "encrypted_content": f"enc{i}",
                }
            )
            expected.append((ThinkingContent, text))
        else:
            args = json.dumps({"q": str(i)})
            events += [
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": {
                        "type": "function_call",
                        "id": iid,
                        "call_id": f"call_{i}",
                        "name": "search",
                        "arguments": "",
                    },
                },
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": i,
                    "item_id": iid,
                    "delta": args,
                },
            ]
            done.append(
                {
                    "type": "function_call",
                    "id": iid,
                    "call_id": f"call_{i}",
                    "name": "search",
                    "arguments": args,
                }
            )
            expected.append((ToolCall, args))
    for j in close_order:
        events.append({"type": "response.output_item.done", "output_index": j, "item": done[j]})
    usage = {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
    events.append(
        {"type": "response.completed", "response": {"status": "completed", "output": [], "usage": usage}}
    )
    return events, expected


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), kinds=_KINDS)
def test_responses_items_closed_in_any_order_keep_the_contract(
    srv: FixtureServer, data: st.DataObject, kinds: list[str]
) -> None:
    order = data.draw(st.permutations(range(len(kinds))))
    events, expected = _responses_stream(kinds, list(order))
    items = run(srv, "openai_responses", Canned(chunks=sse_events([(e["type"], e) for e in events])))
    check_contract(items)
    got = outputs(items)
    seen = []
    for m in got:
        c = m.content
        if isinstance(c, ToolCall):
            seen.append((ToolCall, json.dumps(c.arguments)))
        elif isinstance(c, ThinkingContent):
            seen.append((ThinkingContent, c.thinking))
            assert c.signature is not None and c.signature.startswith("enc")
        else:
            assert isinstance(c, TextContent)
            seen.append((TextContent, c.content))
    assert seen == expected
    last = got[-1]
    assert last.usage.output == 7 and last.usage.input == 11  # final usage on the last output
    want = StopReason.TOOL_USE if "function_call" in kinds else StopReason.STOP
    assert last.stop_reason == want
    assert all(m.stop_reason == StopReason.STOP for m in got[:-1])
    assert isinstance(items[-1].value, ModelState.Finished)
    # generate() is the same assembly
    model = BACKENDS["openai_responses"](srv.base_url)
    reset(srv)
    srv.queue(Canned(chunks=sse_events([(e["type"], e) for e in events])))
    gen = [m for m in model.generate(ask()) if isinstance(m, AssistantMessage)]
    assert [m.content for m in gen] == [m.content for m in got]
    assert gen[-1].usage.output == 7
