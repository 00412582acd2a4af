"""Seed 000 sections 11-12: ``SessionRecord`` (seven variants) and ``AgentProgress``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from foundation_ai.errors import JsonFormatError
from foundation_ai.ids import is_scru128
from foundation_ai.types import (
    AgenticError,
    AgentProgress,
    MemoryFact,
    Messages,
    ObservationEntry,
    ReflectionEntry,
    SessionRecord,
    Stream,
    StructuredErrorTrace,
    TokenSnapshot,
    from_json,
    to_json,
)

T = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def all_records() -> list[SessionRecord]:
    return [
        SessionRecord.Conversation(message=Messages.user("hi")),
        SessionRecord.Retracted(
            reason="stream restarted", timestamp=T, message_ids=["03hbt73h1zzmii7zf3sugzw4a"]
        ),
        SessionRecord.WorkingMemory(
            facts=[MemoryFact(content="user likes tea", confidence=0.8, source="msg-1", timestamp=T)],
            version=3,
            timestamp=T,
        ),
        SessionRecord.Observation(
            observations=[ObservationEntry(content="asked twice", priority=2, timestamp=T)],
            token_count=12,
            timestamp=T,
        ),
        SessionRecord.Reflection(
            reflections=[ReflectionEntry(content="prefers brevity", source_observations=["o1", "o2"])],
            generated_at=T,
            observation_token_count_before=1200,
            reflection_token_count_after=80,
        ),
        SessionRecord.FailedAction(
            error=AgenticError(kind="context_overflow", message="prompt is too long", retryable=True),
            trace=StructuredErrorTrace(frames=["run_turn", "generate"], context={"iteration": 2}),
        ),
        SessionRecord.Summary(
            message_count=4, usage=TokenSnapshot(input=100, output=20, total_tokens=120, cost_usd=0.001)
        ),
    ]


TAGS = [
    "conversation",
    "retracted",
    "working_memory",
    "observation",
    "reflection",
    "failed_action",
    "summary",
]


def test_seven_variants_with_tags() -> None:
    recs = all_records()
    assert [r.__struct_config__.tag for r in recs] == TAGS
    assert all(isinstance(r, SessionRecord) for r in recs)


@pytest.mark.parametrize("index", range(7))
def test_each_variant_round_trips(index: int) -> None:
    rec = all_records()[index]
    data = to_json(rec)
    assert data.startswith(b'{"type":"' + TAGS[index].encode() + b'"')
    assert from_json(data, SessionRecord) == rec


def test_failed_action_is_never_persistable() -> None:
    flags = [r.persistable for r in all_records()]
    assert flags == [True, True, True, True, True, False, True]


def test_memory_entries_get_fresh_ids() -> None:
    for entry in (MemoryFact(content="a"), ObservationEntry(content="b"), ReflectionEntry(content="c")):
        assert is_scru128(entry.id)
    r = SessionRecord.Retracted(reason="x")
    assert is_scru128(r.id) and r.timestamp.tzinfo is UTC


def test_match_on_records() -> None:
    def f(r: SessionRecord) -> str:
        match r:
            case SessionRecord.Conversation(message=m):
                return f"msg {m.text()}"
            case SessionRecord.FailedAction(error=AgenticError(kind=k)):
                return f"failed {k}"
            case SessionRecord.Summary(message_count=n):
                return f"summary {n}"
            case _:
                return "memory"

    assert [f(r) for r in all_records()] == [
        "msg hi",
        "memory",
        "memory",
        "memory",
        "memory",
        "failed context_overflow",
        "summary 4",
    ]


# -- AgentProgress --------------------------------------------------------------------------------


def all_progress() -> list[AgentProgress]:
    return [
        AgentProgress.Initializing(step="loading tools"),
        AgentProgress.Generating(model="gpt-4o-mini", tokens_so_far=12),
        AgentProgress.ToolCallRequested(name="search"),
        AgentProgress.ExecutingTools(total=3, completed=1),
        AgentProgress.ToolCallCancelled(id="call_1"),
        AgentProgress.ProcessingMemory(kind="observation"),
        AgentProgress.FlushingRecords(count=5),
        AgentProgress.Steering(source="user"),
        AgentProgress.TurnComplete(usage=TokenSnapshot(input=10, output=2, total_tokens=12)),
        AgentProgress.SessionEnding(),
    ]


@pytest.mark.parametrize("index", range(10))
def test_progress_variants_round_trip(index: int) -> None:
    p = all_progress()[index]
    assert from_json(to_json(p), AgentProgress) == p


def test_unknown_progress_variant_decodes_to_unknown() -> None:
    got = from_json(b'{"type":"compacting_context","ratio":0.5,"stage":"b"}', AgentProgress)
    assert got == AgentProgress.Unknown(kind="compacting_context", data={"ratio": 0.5, "stage": "b"})
    assert isinstance(got, AgentProgress)

    def handle(p: AgentProgress) -> str:
        match p:
            case AgentProgress.Generating(tokens_so_far=n):
                return f"gen {n}"
            case _:
                return "ignored"

    assert handle(got) == "ignored"


def test_unknown_progress_inside_lists_and_agent_streams() -> None:
    items = from_json(b'[{"type":"warp","speed":9},{"type":"steering","source":"user"}]', list[AgentProgress])
    assert items == [
        AgentProgress.Unknown(kind="warp", data={"speed": 9}),
        AgentProgress.Steering(source="user"),
    ]
    stream = from_json(
        b'[{"type":"pending","value":{"type":"warp"}},{"type":"next","value":{"type":"summary","message_count":1,'
        b'"usage":{}}},{"type":"wait"}]',
        list[Stream[SessionRecord, AgentProgress]],
    )
    assert stream == [
        Stream.Pending(AgentProgress.Unknown(kind="warp")),
        Stream.Next(SessionRecord.Summary(message_count=1, usage=TokenSnapshot())),
        Stream.Wait(),
    ]
    one = from_json(b'{"type":"pending","value":{"type":"warp"}}', Stream[SessionRecord, AgentProgress])
    assert one == Stream.Pending(AgentProgress.Unknown(kind="warp"))


def test_known_progress_variant_with_bad_fields_raises_with_path() -> None:
    with pytest.raises(JsonFormatError) as info:
        from_json(b'{"type":"generating","model":"m","tokens_so_far":"many"}', AgentProgress)
    assert info.value.path == "$.tokens_so_far"
    with pytest.raises(JsonFormatError) as info:
        from_json(b'[{"type":"warp"},{"type":"generating"}]', list[AgentProgress])
    assert info.value.path == "$[1]" and "model" in info.value.reason
    with pytest.raises(JsonFormatError) as info:
        from_json(
            b'[{"type":"pending","value":{"type":"generating","model":1}}]',
            list[Stream[SessionRecord, AgentProgress]],
        )
    assert info.value.path == "$[0].value.model"
    with pytest.raises(JsonFormatError):
        from_json(b"[1, 2]", AgentProgress)
