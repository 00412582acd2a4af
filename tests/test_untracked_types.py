"""Value types the cycle collector does not track (msgspec ``gc=False``).

Messages, their content and the session records hold only data (strings, numbers, datetimes,
enums, JSON values and other such types), so they can never be part of a reference cycle made
through the public API: msgspec's ``gc=False`` keeps them out of the garbage collector's lists,
so a process holding thousands of sessions scans far fewer objects on each full collection
(https://jcristharif.com/msgspec/structs.html#disabling-garbage-collection-advanced). These
tests check that the instances are untracked however they are made (constructed, copied,
replaced, decoded from JSON and msgpack), that containers inside them stay tracked and are
freed normally, and that equality, hashing of frozen values and round trips are unchanged.
"""

from __future__ import annotations

import copy
import gc
import weakref
from datetime import UTC, datetime

import msgspec
import pytest

from foundation_ai.types import (
    GenerationMetadata,
    Messages,
    ModelId,
    SessionRecord,
    StopReason,
    TextContent,
    ThinkingContent,
    TokenLogProb,
    TokenSnapshot,
    ToolCall,
)
from foundation_ai.types.messages import MessagesT
from foundation_ai.types.records import (
    AgenticError,
    MemoryFact,
    ObservationEntry,
    ReflectionEntry,
    SessionRecordT,
    StructuredErrorTrace,
    TimeRange,
)


def _assistant_text() -> Messages:
    return Messages.Assistant(
        model=ModelId.Name("m"),
        content=TextContent("hello"),
        stop_reason=StopReason.Message("content_filter"),
        metadata=[
            GenerationMetadata.Timing(time_to_first_token=0.1),
            GenerationMetadata.SystemFingerprint("fp"),
        ],
    )


def _assistant_call() -> Messages:
    call = ToolCall(id="call_1", name="add", arguments={"a": [1, 2], "b": {"c": None}}, depends_on=["call_0"])
    return Messages.Assistant(model=ModelId.Alias("fast"), content=call, stop_reason=StopReason.TOOL_USE)


def _samples() -> list[object]:
    logprobs = GenerationMetadata.LogProbs([TokenLogProb("a", -0.1, [("b", -2.0)])])
    return [
        Messages.user("hi"),
        Messages.system("be brief"),
        _assistant_text(),
        _assistant_call(),
        Messages.Assistant(
            model=ModelId.Name("m"), content=ThinkingContent("hmm", signature="s"), metadata=[logprobs]
        ),
        Messages.ToolResult(tool_call_id="call_1", name="add", content=TextContent("3"), details="ok"),
        SessionRecord.Conversation(message=_assistant_call()),
        SessionRecord.Summary(message_count=2, usage=TokenSnapshot(), awaiting_approval=["call_1"]),
        SessionRecord.Retracted(reason="steered", message_ids=["a", "b"]),
        SessionRecord.WorkingMemory(facts=[MemoryFact(content="likes tea")], version=2),
        SessionRecord.Observation(observations=[ObservationEntry(content="asked twice")], token_count=3),
        SessionRecord.Reflection(
            reflections=[
                ReflectionEntry(
                    content="tea person",
                    source_observations=["o1"],
                    time_range=TimeRange(
                        from_=datetime(2026, 1, 1, tzinfo=UTC), to=datetime(2026, 1, 2, tzinfo=UTC)
                    ),
                )
            ]
        ),
    ]


@pytest.mark.parametrize("value", _samples(), ids=lambda v: type(v).__qualname__)
def test_messages_and_records_are_not_tracked_however_they_are_made(value: object) -> None:
    assert not gc.is_tracked(value)
    assert not gc.is_tracked(copy.copy(value))
    assert not gc.is_tracked(copy.deepcopy(value))
    assert not gc.is_tracked(msgspec.structs.replace(value))  # type: ignore[type-var]
    kind = MessagesT if isinstance(value, Messages) else SessionRecordT
    for encode, decode in (
        (msgspec.json.encode, msgspec.json.decode),
        (msgspec.msgpack.encode, msgspec.msgpack.decode),
    ):
        back = decode(encode(value), type=kind)
        assert back == value
        assert not gc.is_tracked(back)


class _Payload(dict):  # type: ignore[type-arg]
    """A JSON object that can be watched with a weak reference."""


def test_containers_inside_an_untracked_message_stay_tracked_and_are_freed_with_it() -> None:
    payload = _Payload(a=[1, 2])
    msg = Messages.Assistant(
        model=ModelId.Name("m"), content=ToolCall(id="c", name="f", arguments={"p": payload})
    )
    assert not gc.is_tracked(msg)
    assert gc.is_tracked(msg.content.arguments)  # type: ignore[union-attr]  # the collector still sees it
    probe = weakref.ref(payload)
    gc.disable()
    try:
        del msg, payload
        assert probe() is None  # freed by reference counting, no collection needed
    finally:
        gc.enable()


def test_a_failed_action_record_stays_tracked_because_its_context_holds_any_object() -> None:
    # ``StructuredErrorTrace.context`` is free-form (any object the loop records), so the record
    # that holds it may be part of a cycle and keeps the collector's protection.
    trace = StructuredErrorTrace(frames=["run_turn"], context={"iteration": 1})
    rec = SessionRecord.FailedAction(error=AgenticError(kind="tool", message="boom"), trace=trace)
    assert gc.is_tracked(rec)
    assert gc.is_tracked(trace)
    assert not gc.is_tracked(rec.error)


def test_untracked_values_keep_equality_and_frozen_hashing() -> None:
    a, b = Messages.user("x"), Messages.user("x")
    assert a != b  # fresh ids
    assert a == msgspec.structs.replace(a)
    assert hash(TextContent("t")) == hash(TextContent("t"))
    assert hash(ModelId.Name("m")) == hash(ModelId.Name("m"))
    assert StopReason.Stop() == StopReason.STOP
    assert {StopReason.Message("x"), StopReason.Message("x")} == {StopReason.Message("x")}


def test_a_message_history_adds_no_object_to_the_collectors_lists() -> None:
    gc.collect()
    before = len(gc.get_objects())
    history = [_assistant_text() for _ in range(500)] + [Messages.user(f"u{i}") for i in range(500)]
    records = [SessionRecord.Conversation(message=m) for m in history]
    grown = len(gc.get_objects()) - before
    # the two lists themselves (and the metadata lists of the 500 text answers) are tracked,
    # the 1,000 messages, their content and the 1,000 records are not
    assert grown <= 500 + 10
    assert len(records) == 1000


def _request_values() -> list[object]:
    from foundation_ai.agentic.stores import SessionHeader
    from foundation_ai.types import ModelInteraction, ToolDeclarations, ToolDefinition
    from foundation_ai.types.tools import Args, Tool

    add = ToolDefinition(
        name="add",
        description="Add two integers.",
        arguments=Args({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
    )
    decls = ToolDeclarations(tools=[Tool.SingleCommand(add)])
    return [
        ModelInteraction(
            messages=[Messages.user("hi"), _assistant_call()], system_prompt="be brief", tools_shed=decls
        ),
        decls,
        SessionHeader(model="openai:gpt-4o-mini", system_prompt="be brief", tools=("add",)),
    ]


@pytest.mark.parametrize("value", _request_values(), ids=lambda v: type(v).__qualname__)
def test_a_request_its_tools_and_a_session_header_are_not_tracked_however_they_are_made(
    value: object,
) -> None:
    # what a turn waiting for its model holds (the request) and what every session holds (its
    # tools and header): plain data, so a full collection at 10,000 sessions skips them
    assert not gc.is_tracked(value)
    assert not gc.is_tracked(copy.copy(value))
    assert not gc.is_tracked(copy.deepcopy(value))
    assert not gc.is_tracked(msgspec.structs.replace(value))  # type: ignore[type-var]
    for encode, decode in (
        (msgspec.json.encode, msgspec.json.decode),
        (msgspec.msgpack.encode, msgspec.msgpack.decode),
    ):
        back = decode(encode(value), type=type(value))
        assert back == value
        assert not gc.is_tracked(back)


def test_the_message_list_of_an_untracked_request_stays_tracked_and_is_freed_with_it() -> None:
    from foundation_ai.types import ModelInteraction

    payload = _Payload(a=[1, 2])
    call = Messages.Assistant(
        model=ModelId.Name("m"), content=ToolCall(id="c", name="f", arguments={"p": payload})
    )
    request = ModelInteraction(messages=[Messages.user("hi"), call])
    assert not gc.is_tracked(request) and gc.is_tracked(request.messages)
    probe = weakref.ref(payload)
    gc.disable()
    try:
        del request, call, payload
        assert probe() is None  # freed by reference counting, no collection needed
    finally:
        gc.enable()
