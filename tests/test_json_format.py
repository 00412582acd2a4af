"""The versioned JSON format (issue 2, docs/json-format.md): round trips, shapes, errors."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foundation_ai.errors import JsonFormatError
from foundation_ai.ids import is_scru128
from foundation_ai.schema import scheme
from foundation_ai.types import (
    FORMAT_VERSION,
    AgentProgress,
    Args,
    CacheRetention,
    GenerationMetadata,
    ImageContent,
    MessageRole,
    Messages,
    MimeType,
    ModelId,
    ModelInteraction,
    ModelOutput,
    ModelParams,
    ModelState,
    OutputFormat,
    Quantization,
    SessionRecord,
    StopReason,
    Stream,
    TextContent,
    ThinkingLevel,
    TokenSnapshot,
    Tool,
    ToolChoice,
    ToolDeclarations,
    ToolDefinition,
    UsageReport,
    UserModelContent,
    dump_document,
    from_json,
    load_document,
    to_json,
)
from foundation_ai.vectors import VectorEntry, VectorMatch, VectorMetadata
from tests._strategies import interactions, messages, session_records

T = datetime(2026, 11, 29, 21, 58, 4, 702893, tzinfo=UTC)
RFC3339_UTC = re.compile(rb'"(?:timestamp|generated_at)":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"')


def _definition() -> ToolDefinition:
    return ToolDefinition(
        name="search",
        description="Search the web.",
        category="web",
        arguments=Args.new(scheme.object().required("q", scheme.string())),
        returns=Args.new(scheme.object().required("hits", scheme.array(scheme.string()))),
    )


# (type to decode as, value): one entry per type and per union variant of the format
EXAMPLES: list[tuple[Any, Any]] = [
    (Messages, Messages.user("hi")),
    (Messages, Messages.User(role=MessageRole.Custom("critic"), content=ImageContent("AAAA", MimeType.Webp))),
    (
        Messages,
        Messages.Assistant(
            model=ModelId.Name("gpt-4o-mini"),
            content=ModelOutput.ToolCall(
                id="call_1", name="search", arguments={"q": {"nested": [1, 2.5, None]}}
            ),
            timestamp=T,
            usage=UsageReport.of(input=10, output=3),
            stop_reason=StopReason.TOOL_USE,
            provider="openai",
            metadata=[GenerationMetadata.SystemFingerprint("fp_1")],
        ),
    ),
    (
        Messages,
        Messages.ToolResult(tool_call_id="call_1", name="search", content=TextContent("[]"), timestamp=T),
    ),
    (ModelOutput, ModelOutput.ThinkingContent("hmm", signature="sig")),
    (ModelOutput, ModelOutput.Embedding(dimensions=2, values=[0.5, 0.25])),
    (UserModelContent, TextContent("x", signature="s")),
    (StopReason, StopReason.Message("content_filter")),
    (GenerationMetadata, GenerationMetadata.Timing(time_to_first_token=0.2, duration=1.0)),
    (ModelId, ModelId.Architecture("llama", Quantization.Q8_0)),
    (ToolDefinition, _definition()),
    (Tool, Tool.SingleCommand(_definition())),
    (Tool, Tool.MultiCommands(tool_name="memory", commands=[_definition()])),
    (ToolDeclarations, ToolDeclarations(shed=Tool.SingleCommand(_definition()), tools=[])),
    (ToolChoice, ToolChoice.Function("search")),
    (OutputFormat, OutputFormat.JsonSchema(name="answer", schema={"type": "object"}, strict=False)),
    (OutputFormat, OutputFormat.JsonObject()),
    (
        ModelParams,
        ModelParams(
            max_tokens=64,
            temperature=0.0,
            seed=7,
            stop_tokens=["\n\n"],
            thinking_level=ThinkingLevel.High,
            thinking_budget=2048,
            cache_retention=CacheRetention.Long,
            output_format=OutputFormat.JsonObject(),
            logit_bias={"50256": -100.0},
        ),
    ),
    (
        ModelInteraction,
        ModelInteraction(
            messages=[Messages.user("hi")],
            system_prompt="Be brief.",
            soul="A calm librarian.",
            tools_shed=ToolDeclarations(tools=[Tool.SingleCommand(_definition())]),
            chat_template="{{ messages }}",
            tool_choice=ToolChoice.Required(),
        ),
    ),
    (UsageReport, UsageReport.of(input=1, output=2, cache_read=3, cache_write=4)),
    (ModelState, ModelState.GeneratingTokens(UsageReport.of(input=1))),
    (Stream[Messages, ModelState], Stream.Next(Messages.system("x"))),
    (
        Stream[SessionRecord, AgentProgress],
        Stream.Pending(AgentProgress.ExecutingTools(total=2, completed=1)),
    ),
    (SessionRecord, SessionRecord.Summary(message_count=1, usage=TokenSnapshot(input=1.0))),
    (AgentProgress, AgentProgress.Generating(model="m", tokens_so_far=3)),
    (VectorEntry, VectorEntry("v1", [0.1, 0.2], VectorMetadata(tags=["a"], extra={"src": "doc"}))),
    (VectorMatch, VectorMatch("v1", 0.93)),
]


@pytest.mark.parametrize(
    ("tp", "value"), EXAMPLES, ids=[f"{i}-{type(v).__name__}" for i, (_, v) in enumerate(EXAMPLES)]
)
def test_every_type_round_trips(tp: Any, value: Any) -> None:
    data = to_json(value)
    back = from_json(data, tp)
    assert back == value
    assert to_json(back) == data  # byte-stable: writing what was read gives the same bytes


@pytest.mark.parametrize(
    ("tp", "value"), EXAMPLES, ids=[f"{i}-{type(v).__name__}" for i, (_, v) in enumerate(EXAMPLES)]
)
def test_tagged_unions_lead_with_type(tp: Any, value: Any) -> None:
    config = value.__struct_config__
    if config.tag_field is not None:
        assert config.tag_field == "type"
        assert to_json(value).startswith(b'{"type":"' + str(config.tag).encode() + b'"')


def test_lowercase_roles() -> None:
    for m in (Messages.user("a"), Messages.agent("b"), Messages.system("c")):
        raw = msgspec.json.decode(to_json(m))
        assert raw.get("role", "user") in {"user", "agent", "system"}
    tool = Messages.User(role=MessageRole.Tool, content=TextContent("ctx"))
    assert msgspec.json.decode(to_json(tool))["role"] == "tool"


def test_timestamps_are_rfc3339_utc_with_z() -> None:
    now = Messages.Assistant(model=ModelId.Name("m"), content=TextContent("x"))
    assert RFC3339_UTC.search(to_json(now))
    rec = SessionRecord.Reflection(generated_at=T)
    assert b'"generated_at":"2026-11-29T21:58:04.702893Z"' in to_json(rec)


def test_other_offsets_and_naive_times_are_stored_as_utc() -> None:
    paris = timezone(timedelta(hours=1))
    m = Messages.ToolResult(
        tool_call_id="c", name="t", content=TextContent("x"), timestamp=T.astimezone(paris)
    )
    assert m.timestamp == T and m.timestamp.tzinfo is UTC
    assert b'"timestamp":"2026-11-29T21:58:04.702893Z"' in to_json(m)
    naive = Messages.ToolResult(
        tool_call_id="c", name="t", content=TextContent("x"), timestamp=T.replace(tzinfo=None)
    )
    assert naive.timestamp == T
    loaded = from_json(
        b'{"type":"tool_result","tool_call_id":"c","name":"t","content":{"type":"text","content":"x"},'
        b'"timestamp":"2026-11-29T23:58:04.702893+02:00"}',
        Messages,
    )
    assert (
        isinstance(loaded, Messages.ToolResult) and loaded.timestamp == T and loaded.timestamp.tzinfo is UTC
    )


def test_ids_are_25_character_scru128_strings() -> None:
    data = to_json(Messages.user("x"))
    m = re.search(rb'"id":"([^"]*)"', data)
    assert m and len(m.group(1)) == 25 and is_scru128(m.group(1).decode())


def test_message_without_id_loads_with_a_fresh_id() -> None:
    data = b'{"type":"user","role":"user","content":{"type":"text","content":"legacy"}}'
    a, b = from_json(data, Messages), from_json(data, Messages)
    assert is_scru128(a.id) and is_scru128(b.id) and a.id != b.id
    assert a.text() == "legacy"


def test_minimal_assistant_fills_defaults() -> None:
    m = from_json(
        b'{"type":"assistant","model":{"type":"name","value":"m"},"content":{"type":"text","content":"x"}}',
        Messages,
    )
    assert isinstance(m, Messages.Assistant)
    assert m.stop_reason == StopReason.STOP and m.usage == UsageReport() and m.timestamp.tzinfo is UTC


def test_unknown_fields_are_ignored() -> None:
    data = (
        b'{"type":"assistant","future":1,"model":{"type":"name","value":"m","x":[1]},'
        b'"content":{"type":"tool_call","id":"c","name":"f","arguments":{"a":1},"new_field":{"deep":true}},'
        b'"usage":{"input":1,"cost":{"total":0.1,"currency":"USD"}}}'
    )
    m = from_json(data, Messages)
    assert isinstance(m, Messages.Assistant)
    assert m.content == ModelOutput.ToolCall(id="c", name="f", arguments={"a": 1})
    assert m.usage.cost.total == 0.1


def test_defaults_are_omitted_when_writing() -> None:
    m = Messages.Assistant(
        id="03hbt73h1zzmii7zf3sugzw4a", model=ModelId.Name("m"), content=TextContent("x"), timestamp=T
    )
    assert to_json(m) == (
        b'{"type":"assistant","id":"03hbt73h1zzmii7zf3sugzw4a","model":{"type":"name","value":"m"},'
        b'"content":{"type":"text","content":"x"},"timestamp":"2026-11-29T21:58:04.702893Z"}'
    )


@pytest.mark.parametrize(
    ("data", "tp", "path", "reason"),
    [
        (b"{not json", Messages, "$", "malformed"),
        (b"", Messages, "$", "truncated"),
        (b'{"role":"user"}', Messages, "$", "missing required field `type`"),
        (b'{"type":"robot"}', Messages, "$.type", "Invalid value 'robot'"),
        (
            b'{"type":"user","content":{"type":"video","b64":""}}',
            Messages,
            "$.content.type",
            "Invalid value 'video'",
        ),
        (b'{"type":"user"}', Messages, "$", "missing required field `content`"),
        (
            b'{"type":"user","content":{"type":"text","content":7}}',
            Messages,
            "$.content.content",
            "Expected `str`",
        ),
        (
            b'[{"type":"user","content":{"type":"text","content":"ok"}},{"type":"user","role":3,"content":{}}]',
            list[Messages],
            "$[1].role",
            "Expected `str`",
        ),
        (
            b'{"type":"assistant","model":{"type":"name","value":"m"},"content":{"type":"text","content":""},'
            b'"timestamp":"yesterday"}',
            Messages,
            "$.timestamp",
            "Invalid RFC3339",
        ),
        (
            b'{"type":"conversation","message":{"type":"tool_result","name":"t","content":{"type":"text","content":""}}}',
            SessionRecord,
            "$.message",
            "missing required field `tool_call_id`",
        ),
        (
            b'{"type":"next","value":{"type":"user"}}',
            Stream[Messages, ModelState],
            "$.value",
            "missing required field",
        ),
    ],
)
def test_malformed_document_raises_with_path(data: bytes, tp: Any, path: str, reason: str) -> None:
    with pytest.raises(JsonFormatError) as info:
        from_json(data, tp)
    assert info.value.path == path
    assert reason.lower() in info.value.reason.lower()
    assert isinstance(info.value, ValueError)


# -- versioned documents -----------------------------------------------------------------------


def test_document_round_trip() -> None:
    records = [SessionRecord.Conversation(message=Messages.user("hi")), SessionRecord.Retracted(reason="x")]
    doc = dump_document(records, kind="session_records")
    raw = msgspec.json.decode(doc)
    assert raw["format"] == "foundation-ai" and raw["version"] == FORMAT_VERSION == 1
    assert raw["kind"] == "session_records" and len(raw["items"]) == 2
    assert load_document(doc, SessionRecord) == records


def test_document_of_progress_keeps_unknown_variants() -> None:
    doc = b'{"format":"foundation-ai","version":1,"kind":"progress","items":[{"type":"warp"},{"type":"session_ending"}]}'
    assert load_document(doc, AgentProgress) == [
        AgentProgress.Unknown(kind="warp"),
        AgentProgress.SessionEnding(),
    ]


def test_document_older_or_equal_version_loads() -> None:
    doc = b'{"format":"foundation-ai","version":0,"items":[{"type":"user","content":{"type":"text","content":"old"}}]}'
    [m] = load_document(doc, Messages)
    assert m.text() == "old"


def test_document_newer_version_is_rejected() -> None:
    doc = dump_document([Messages.user("x")]).replace(b'"version":1', b'"version":2')
    with pytest.raises(JsonFormatError, match="newer") as info:
        load_document(doc, Messages)
    assert info.value.path == "$.version"


def test_document_wrong_format_and_missing_fields() -> None:
    with pytest.raises(JsonFormatError) as info:
        load_document(b'{"format":"other","version":1,"items":[]}', Messages)
    assert info.value.path == "$.format"
    with pytest.raises(JsonFormatError) as info:
        load_document(b'{"format":"foundation-ai","items":[]}', Messages)
    assert "version" in info.value.reason


def test_document_bad_item_names_its_path() -> None:
    doc = dump_document([Messages.user("a"), Messages.user("b")]).replace(
        b'"content":"b"', b'"content":false'
    )
    with pytest.raises(JsonFormatError) as info:
        load_document(doc, Messages)
    assert info.value.path == "$.items[1].content.content"


# -- property-based round trips ----------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(messages)
def test_property_messages_round_trip(message: Messages) -> None:
    data = to_json(message)
    assert from_json(data, Messages) == message
    assert from_json(data, Messages).id == message.id


@settings(max_examples=200, deadline=None)
@given(session_records)
def test_property_session_records_round_trip(record: SessionRecord) -> None:
    assert from_json(to_json(record), SessionRecord) == record


@settings(max_examples=50, deadline=None)
@given(st.lists(messages, max_size=8))
def test_property_message_documents_round_trip(items: list[Messages]) -> None:
    assert load_document(dump_document(items, kind="messages"), Messages) == items
    assert from_json(to_json(items), list[Messages]) == items


@settings(max_examples=50, deadline=None)
@given(st.lists(session_records, max_size=5))
def test_property_agent_stream_round_trip(records: list[SessionRecord]) -> None:
    items: list[Stream[SessionRecord, AgentProgress]] = [Stream.Next(r) for r in records]
    items.append(Stream.Spread(records))
    assert from_json(to_json(items), list[Stream[SessionRecord, AgentProgress]]) == items


offsets = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(
    lambda m: timezone(timedelta(minutes=m))
)


@settings(max_examples=100, deadline=None)
@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2199, 1, 1), timezones=offsets))
def test_property_any_offset_is_written_as_the_same_instant_in_utc(when: datetime) -> None:
    m = Messages.ToolResult(tool_call_id="c", name="t", content=TextContent("x"), timestamp=when)
    data = to_json(m)
    assert RFC3339_UTC.search(data)
    back = from_json(data, Messages)
    assert isinstance(back, Messages.ToolResult)
    assert back.timestamp == when and back.timestamp.tzinfo is UTC


@settings(max_examples=100, deadline=None)
@given(interactions)
def test_property_model_interactions_round_trip(interaction: ModelInteraction) -> None:
    assert from_json(to_json(interaction), ModelInteraction) == interaction
