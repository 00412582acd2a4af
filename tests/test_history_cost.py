"""The Chat Completions backend encodes only the history it has not sent before (WireCache),
and the request it sends is byte for byte the one built from the whole history."""

from __future__ import annotations

from typing import Any

import msgspec

from foundation_ai.backends._openai_chat import WireCache
from foundation_ai.backends._openai_chat_request import build_messages, build_request
from foundation_ai.backends._sanitize import OPENAI_CHAT, IdMapping, sanitize_history
from foundation_ai.types import (
    AssistantMessage,
    ImageContent,
    Messages,
    ModelInteraction,
    ModelParams,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)

LONG = "call_" + "x" * 50  # longer than OpenAI's 40 characters: rewritten, and repeated


def call(cid: str, name: str = "add", args: dict[str, Any] | None = None) -> AssistantMessage:
    return AssistantMessage(model="m", content=ToolCall(id=cid, name=name, arguments=args))


def result(cid: str, text: str = "42") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=cid, name="add", content=TextContent(text))


def text(t: str) -> AssistantMessage:
    return AssistantMessage(model="m", content=TextContent(t))


def tricky_turns() -> list[list[Any]]:
    """Turns (lists of messages appended one after another) exercising the mapping's state:
    repeated and over-long ids, empty ids, unparsed arguments, thinking-only generations, images
    in tool results, error records, a steering message between a call and its result, blank
    user text, an unanswered call and an answer to no call."""
    img = ImageContent(b64="aGVsbG8=")
    return [
        [Messages.user("hi"), text("hello")],
        [Messages.user("add"), call(LONG, args={"a": 1}), result(LONG), text("2")],
        [Messages.user("again"), call(LONG, args={"a": 2}), result(LONG), text("3")],
        [Messages.user("empty ids"), call(""), call(""), result(""), result(""), text("ok")],
        [Messages.user("bad args"), call("c9", args=None), result("c9", "Error: bad"), text("sorry")],
        [Messages.user("think"), AssistantMessage(model="m", content=ThinkingContent("hmm")), text("done")],
        [
            Messages.user("picture"),
            call("c10"),
            ToolResultMessage(tool_call_id="c10", name="shot", content=img),
            text("a picture"),
        ],
        [
            Messages.user("error"),
            AssistantMessage(
                model="m", content=TextContent(""), stop_reason=StopReason.Error(), error_detail="boom"
            ),
        ],
        [Messages.user("steer"), call("c11"), Messages.user("wait, also this"), result("c11"), text("ok")],
        [Messages.user("   "), text("blank before me")],
        [Messages.user("orphans"), call("c12"), result("nobody"), text("hm")],
        [Messages.user("last"), call(LONG), result(LONG)],
        [text("after tools")],
        [Messages.system("be brief"), Messages.user("end")],
    ]


def test_cached_requests_equal_whole_history_requests_as_the_history_grows() -> None:
    cache = WireCache()
    history: list[Any] = []
    for turn in tricky_turns():
        for m in turn:
            history.append(m)
            for origin, content in ((None, None), ("api.example.com", "")):
                interaction = ModelInteraction(messages=list(history), system_prompt="You add.")
                cached = build_request(
                    interaction,
                    ModelParams(),
                    "m",
                    origin=origin,
                    tool_call_content=content,
                    wire_cache=cache,
                )
                whole = build_request(
                    interaction, ModelParams(), "m", origin=origin, tool_call_content=content
                )
                assert msgspec.json.encode(cached) == msgspec.json.encode(whole), [type(x) for x in turn]


def test_a_turn_encodes_only_the_messages_added_since_the_last_request() -> None:
    cache = WireCache()
    history: list[Any] = []
    for i in range(50):
        history += [Messages.user(f"q{i}"), call(f"c{i}"), result(f"c{i}"), text(f"a{i}")]
    history.append(Messages.user("now"))
    cache.messages(ModelInteraction(messages=list(history)))
    encoded: list[Any] = []
    real_encode = msgspec.json.encode

    class Counting:
        @staticmethod
        def encode(obj: Any) -> bytes:
            encoded.append(obj)
            return real_encode(obj)

    import foundation_ai.backends._openai_chat as chat

    history += [text("answer"), Messages.user("next")]
    saved = chat.msgspec.json
    chat.msgspec.json = Counting  # type: ignore[assignment]
    try:
        out = cache.messages(ModelInteraction(messages=list(history)))
    finally:
        chat.msgspec.json = saved
    # "now" was cached by the first request: only "answer" and the new prompt are encoded
    assert [msgspec.json.decode(real_encode(e))["content"] for e in encoded] == ["answer", "next"]
    assert msgspec.json.decode(real_encode(out[-1])) == {"role": "user", "content": "next"}
    assert len(out) == len(build_messages(ModelInteraction(messages=list(history))))


def test_a_long_prefix_is_packed_and_still_encodes_to_the_whole_history_request() -> None:
    cache = WireCache()
    history: list[Any] = []
    for i in range(300):  # 1,200 messages: past 2 * PACK, so older items are packed
        history += [
            Messages.user(f"q{i}"),
            call(f"c{i}", args={"n": i}),
            result(f"c{i}", str(i)),
            text(f"a{i}"),
        ]
        out = cache.messages(ModelInteraction(messages=list(history), system_prompt="You add."))
        if i % 60 == 59:
            whole = build_messages(ModelInteraction(messages=list(history), system_prompt="You add."))
            assert msgspec.json.encode(out) == msgspec.json.encode(whole)
    assert len(out) < len(whole) // 2  # fewer items for the encoder to walk
    entry = next(iter(cache._cache._entries.values()))
    assert len(entry.wire) < len(entry.messages) // 2
    assert all(b'"role"' in bytes(w) for w in entry.wire)  # no empty pack


def test_a_changed_history_is_mapped_afresh() -> None:
    cache = WireCache()
    first = [Messages.user("a"), text("b"), Messages.user("c")]
    cache.messages(ModelInteraction(messages=first))
    edited = [first[0], text("B!"), Messages.user("c")]
    got = msgspec.json.encode(cache.messages(ModelInteraction(messages=edited)))
    assert got == msgspec.json.encode(build_messages(ModelInteraction(messages=edited)))
    assert b"B!" in got


def test_id_mapping_child_leaves_its_parent_unchanged() -> None:
    parent = IdMapping(OPENAI_CHAT.id_max)
    sanitize_history([call(LONG)], OPENAI_CHAT, ids=parent)
    child = parent.child()
    later = [result(LONG), call(LONG)]
    first = sanitize_history(later, OPENAI_CHAT, ids=child)
    again = sanitize_history(later, OPENAI_CHAT, ids=parent.child())
    assert first == again
    assert isinstance(first[0], ToolResultMessage) and isinstance(first[1], AssistantMessage)
    assert isinstance(first[1].content, ToolCall)
    assert first[1].content.id != first[0].tool_call_id  # the repeated id was made unique
