"""An empty final ``arguments`` never erases the arguments a stream already delivered, on any
backend's stream parser (wire shapes from the providers' streaming references: OpenAI Responses
https://platform.openai.com/docs/api-reference/responses-streaming, Chat Completions
https://platform.openai.com/docs/api-reference/chat-streaming, Anthropic
https://docs.anthropic.com/en/docs/build-with-claude/streaming)."""

from __future__ import annotations

import json
from typing import Any

from foundation_ai.backends._anthropic_stream import AnthropicStreamParser
from foundation_ai.backends._http import SseEvent
from foundation_ai.backends._openai_chat import ChatStreamParser
from foundation_ai.backends._responses_stream import ResponsesStreamParser
from foundation_ai.types import ModelId, Stream, ToolCall

ARGS = {"city": "Oslo", "days": 3}


def _calls(items: list[Any]) -> list[ToolCall]:
    out = [
        i.value.content for i in items if isinstance(i, Stream.Next) and isinstance(i.value.content, ToolCall)
    ]
    return list({c.id: c for c in out}.values())


def _item(arguments: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": arguments,
    }


def test_responses_arguments_only_in_done_then_empty_in_the_item_and_the_response_are_kept() -> None:
    p = ResponsesStreamParser(ModelId.Name("gpt-4.1"))
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": _item("")},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": json.dumps(ARGS)},
        {"type": "response.output_item.done", "output_index": 0, "item": _item("")},
        {"type": "response.completed", "response": {"status": "completed", "output": [_item("")], "usage": {"input_tokens": 5, "output_tokens": 7}}},
    ]  # fmt: skip
    items: list[Any] = []
    for ev in events:
        items += p.feed(ev)
    (got,) = _calls(items + p.finish())
    assert got.id == "call_1" and got.arguments == ARGS and got.raw_arguments is None


def test_responses_deltas_then_an_empty_done_are_kept() -> None:
    p = ResponsesStreamParser(ModelId.Name("gpt-4.1"))
    text = json.dumps(ARGS)
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": _item("")},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": text[:9]},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": text[9:]},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": ""},
        {"type": "response.output_item.done", "output_index": 0, "item": _item("")},
        {"type": "response.completed", "response": {"status": "completed", "usage": {"input_tokens": 5, "output_tokens": 7}}},
    ]  # fmt: skip
    items: list[Any] = []
    for ev in events:
        items += p.feed(ev)
    assert [c.arguments for c in _calls(items + p.finish())] == [ARGS]


def test_chat_completions_deltas_then_an_empty_final_arguments_are_kept() -> None:
    text = json.dumps(ARGS)

    def delta(fn: dict[str, Any], **tc: Any) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **tc, "function": fn}]}}]}

    for final in ("", {}):  # an empty string, or an empty object (some compatible servers)
        p = ChatStreamParser(ModelId.Name("m"), None, ["weather"])
        chunks = [
            delta({"name": "weather", "arguments": text[:9]}, id="call_1"),
            delta({"arguments": text[9:]}),
            delta({"arguments": final}),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
        items: list[Any] = []
        for c in chunks:
            items += p.feed(SseEvent("message", json.dumps(c))) or []
        got = _calls(items + p.finish())
        assert [(c.id, c.arguments) for c in got] == [("call_1", ARGS)], final


def test_anthropic_input_deltas_then_an_empty_delta_are_kept() -> None:
    p = AnthropicStreamParser(ModelId.Name("claude-sonnet-4-5"))
    text = json.dumps(ARGS)
    events = [
        {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": text[:9]}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": text[9:]}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ""}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]  # fmt: skip
    items: list[Any] = []
    for ev in events:
        items += p.feed(ev)
    assert [(c.id, c.arguments) for c in _calls(items + p.finish())] == [("toolu_1", ARGS)]
