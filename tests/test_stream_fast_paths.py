"""The per-event fast paths of the stream parsers give exactly what the general paths give.

- Anthropic: :meth:`AnthropicStreamParser.feed_data` (a delta decoded straight into a typed
  struct) against :meth:`~AnthropicStreamParser.feed` of the same event decoded as a dict.
- OpenAI Chat: a chunk with one choice takes the text / argument-fragment fast path; the same
  chunk with an extra choice of index 1 (which the parser ignores: only the first choice is
  read) takes the general path.
- Chunk timestamps come from a clock read at most once per millisecond of a stream, never
  before the stream started.

Seeded hypothesis over the wire-event strategies of ``test_backend_stream_hardening``, plus
hand-written events at the edges (wrong types, a delta before its block, half a surrogate
pair).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation_ai.backends._anthropic_stream import AnthropicStreamParser
from foundation_ai.backends._http import SseEvent, WireError
from foundation_ai.backends._openai_chat_stream import ChatStreamParser
from foundation_ai.backends._wire_clock import RESOLUTION, ChunkClock
from foundation_ai.backends._wire_text import decode_event
from foundation_ai.errors import ProviderError
from foundation_ai.types import ModelId, Stream
from tests.test_backend_stream_hardening import FUZZ_EXAMPLES, _anthropic_event, _chat_event

_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


def plain(x: Any) -> Any:
    """``x`` as builtins without what differs between two parsers (ids, timestamps, timing)."""
    if isinstance(x, msgspec.Struct):
        x = msgspec.to_builtins(x)
    if isinstance(x, dict):
        if x.get("type") == "timing":
            return "timing"
        return {k: plain(v) for k, v in x.items() if k not in ("id", "timestamp")}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    return x


def outcome(step: Any, *args: Any) -> Any:
    try:
        return ("items", plain(step(*args) or []))
    except ProviderError as exc:  # WireError and AnthropicStreamError are ProviderErrors
        return ("error", type(exc).__name__, exc.detail.split(": '")[0])


# ------------------------------------------------------------------------------------------
# Anthropic


def dict_path(parser: AnthropicStreamParser, event: str, data: str) -> list[Any]:
    """What the backend did before ``feed_data``: decode to a dict, then ``feed``."""
    if not data or data == "[DONE]":
        return []
    try:
        doc = decode_event(data)
    except msgspec.DecodeError as exc:
        raise ProviderError(f"malformed event data ({event}): {exc}: {data[:200]!r}") from None
    return parser.feed(doc)


def anthropic_both(datas: list[str]) -> tuple[list[Any], list[Any]]:
    fast = AnthropicStreamParser(ModelId.Name("m"))
    slow = AnthropicStreamParser(ModelId.Name("m"))
    got_fast: list[Any] = []
    got_slow: list[Any] = []
    for data in datas:
        got_fast.append(outcome(fast.feed_data, "message", data))
        got_slow.append(outcome(dict_path, slow, "message", data))
    got_fast.append(outcome(fast.finish))
    got_slow.append(outcome(slow.finish))
    got_fast.append(outcome(fast.flush))
    got_slow.append(outcome(slow.flush))
    return got_fast, got_slow


@_SETTINGS
@given(events=st.lists(_anthropic_event, max_size=8))
def test_anthropic_typed_deltas_give_what_the_dict_path_gives(events: list[Any]) -> None:
    fast, slow = anthropic_both([json.dumps(e) for e in events])
    assert fast == slow


def test_anthropic_typed_deltas_at_the_edges() -> None:
    start = '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'
    deltas = [
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}',
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}',
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}',
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":null}}',
        '{"type":"content_block_delta","index":true,"delta":{"type":"text_delta","text":"b"}}',
        '{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"b"}}',
        '{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"b"}}',
        '{"type":"content_block_delta","delta":{"type":"text_delta","text":"b"}}',
        '{"type":"content_block_delta","index":0,"delta":"text_delta"}',
        '{"type":"content_block_delta","index":0,"delta":null}',
        '{"type":"content_block_delta","index":0,"index":"x","delta":{"type":"text_delta","text":"c"}}',
        '{"type":"content_block_delta","index":"x","index":0,"delta":{"type":"text_delta","text":"c"}}',
        '{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"new block"}}',
        '{"type":"content_block_delta","index":4,"delta":{"type":"input_json_delta","partial_json":"{"}}',
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\\ud83d"}}',
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\\ude00!"}}',
        '{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"t"}}',
        '{"type":"error","error":{"type":"overloaded_error","message":"busy"}}',
        "",
        "[DONE]",
    ]
    for delta in deltas:
        fast, slow = anthropic_both([start, delta, '{"type":"message_delta","delta":{}}'])
        assert fast == slow, delta


def test_anthropic_feed_data_of_malformed_json_is_a_provider_error() -> None:
    p = AnthropicStreamParser(ModelId.Name("m"))
    try:
        p.feed_data("content_block_delta", '{"type":')
    except ProviderError as exc:
        assert exc.detail.startswith("malformed event data (content_block_delta): ")
    else:
        raise AssertionError("no error")


# ------------------------------------------------------------------------------------------
# OpenAI Chat Completions


def chat_both(events: list[Any], done: bool) -> tuple[list[Any], list[Any]]:
    fast = ChatStreamParser(ModelId.Name("m"), None, ["search"])
    slow = ChatStreamParser(ModelId.Name("m"), None, ["search"])
    got_fast: list[Any] = []
    got_slow: list[Any] = []
    for e in events:
        general = e
        if isinstance(e, dict) and isinstance(e.get("choices"), list):
            general = {**e, "choices": [*e["choices"], {"index": 1, "delta": {"content": "other"}}]}
        a, b = json.dumps(e), json.dumps(general)
        got_fast.append(outcome(fast.feed, SseEvent("message", a)))
        got_slow.append(outcome(slow.feed, SseEvent("message", b)))
    if done:
        got_fast.append(outcome(lambda: fast.feed(SseEvent("message", "[DONE]"))))
        got_slow.append(outcome(lambda: slow.feed(SseEvent("message", "[DONE]"))))
    got_fast.append(outcome(fast.finish))
    got_slow.append(outcome(slow.finish))
    return got_fast, got_slow


@_SETTINGS
@given(events=st.lists(_chat_event, max_size=8), done=st.booleans())
def test_openai_chat_fast_paths_give_what_the_general_path_gives(events: list[Any], done: bool) -> None:
    fast, slow = chat_both(events, done)
    assert fast == slow


def _chunk(delta: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, **extra}], "system_fingerprint": "fp_1"}


def test_openai_chat_fast_paths_at_the_edges() -> None:
    call = {"index": 0, "id": "c1", "function": {"name": "search", "arguments": '{"q"'}}
    cases = [
        _chunk({"content": "a"}),
        _chunk({"content": ""}),
        _chunk({"content": "a"}, finish_reason="stop"),
        _chunk({"content": "a"}, finish_reason=""),
        _chunk({"content": "a", "reasoning_content": None, "refusal": None}),
        _chunk({"content": "\ud83d"}),
        _chunk({"content": "\ude00b"}),
        _chunk({"content": None, "tool_calls": [{"index": 0, "function": {"arguments": ':"x"}'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ""}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}),
        _chunk({"tool_calls": [{"index": True, "function": {"arguments": "x"}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": {"q": 1}}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"name": "", "arguments": "y"}}]}),
        _chunk({"tool_calls": [{"index": 0, "id": "c2", "function": {"arguments": "{}"}}]}),
        _chunk({"content": "t", "tool_calls": [{"index": 0, "function": {"arguments": "z"}}]}),
        {"choices": [{"index": 0, "delta": {"content": "u"}}], "system_fingerprint": "fp_\ud800"},
        {"choices": [{"index": 0, "delta": {"content": "u"}}], "usage": {"prompt_tokens": 3}},
        {"choices": [{"index": 1, "delta": {"content": "u"}}]},
        {"choices": [{"index": 0, "message": {"content": "m"}}]},
        {"error": {"message": "bad", "type": "server_error"}},
    ]
    for case in cases:
        fast, slow = chat_both(
            [_chunk({"role": "assistant", "content": ""}), _chunk({"tool_calls": [call]}), case], True
        )
        assert fast == slow, case


# ------------------------------------------------------------------------------------------
# the chunks' clock


def test_the_chunk_clock_reads_the_wall_clock_at_most_once_a_millisecond() -> None:
    before = datetime.now(UTC)
    t0 = time.monotonic()
    clock = ChunkClock()
    stamps = [clock.now() for _ in range(20_000)]
    elapsed = time.monotonic() - t0
    after = datetime.now(UTC)
    assert all(s.tzinfo is UTC for s in stamps)
    assert before <= stamps[0] and stamps[-1] <= after and stamps == sorted(stamps)
    assert len({id(s) for s in stamps}) <= elapsed / RESOLUTION + 1
    assert len(set(stamps)) < len(stamps)  # readings were reused


def test_a_fast_streams_chunks_share_timestamps_within_a_millisecond() -> None:
    """Fails on a parser that reads the clock per chunk (20,000 distinct timestamps)."""
    p = ChatStreamParser(ModelId.Name("m"), None, [])
    before = datetime.now(UTC)
    t0 = time.monotonic()
    chunks = [p.feed(SseEvent("message", json.dumps(_chunk({"content": "x"})))) for _ in range(20_000)]
    elapsed = time.monotonic() - t0
    stamps = [c[0].value.timestamp for c in chunks if c and isinstance(c[0], Stream.Next)]
    assert len(stamps) == 20_000 and before <= stamps[0] and stamps == sorted(stamps)
    assert len(set(stamps)) <= elapsed / RESOLUTION + 1
    assert isinstance(WireError("x"), ProviderError)


def test_half_a_surrogate_pair_then_ascii_text_on_both_fast_paths() -> None:
    start = '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'
    pieces = ["\\ud83d", "ok", "\\ud83d", "\\ude00", "!", "\\ude00"]
    deltas = [
        f'{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{p}"}}}}'
        for p in pieces
    ]
    fast, slow = anthropic_both([start, *deltas, '{"type":"message_delta","delta":{}}'])
    assert fast == slow
    texts = [x[1][0]["value"]["content"]["content"] for x in fast[1:-3]]
    assert texts == [
        "",
        "\ufffdok",
        "\ufffdok",
        "\ufffdok\U0001f600",
        "\ufffdok\U0001f600!",
        "\ufffdok\U0001f600!\ufffd",
    ]
    chat = [_chunk({"content": json.loads(f'"{p}"')}) for p in pieces]
    fast, slow = chat_both(chat, True)
    assert fast == slow
