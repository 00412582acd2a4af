"""The three memory tiers: the memory tool's versions, observation and reflection generation
(structured output, validated), triggers, failures that never raise, replay on resume, and
JSON round trips of the new fields."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foundation_ai.agentic import InMemorySessionStore, ScriptedModel, say
from foundation_ai.agentic.scripted import fail
from foundation_ai.memory import (
    EstimateCounter,
    MemoryConfig,
    MemoryGenerationError,
    MemoryManager,
    MemoryState,
    MessageTokens,
    observe,
    reflect,
)
from foundation_ai.types import (
    AgentProgress,
    MemoryFact,
    Messages,
    ModelId,
    ObservationEntry,
    OutputFormat,
    ReflectionEntry,
    SessionRecord,
    Stream,
    TextContent,
    TimeRange,
    ToolCall,
    from_json,
    to_json,
)
from tests._strategies import ids, text, utc_times

MODEL = ModelId.Name("m")


def tk() -> MessageTokens:
    return MessageTokens(EstimateCounter())


def obs_json(*contents: str, source: int | None = 0) -> str:
    items = [
        {"type": "assertion", "content": c} | ({"source": source} if source is not None else {})
        for c in contents
    ]
    return json.dumps({"observations": items})


def host(model: Any, store: InMemorySessionStore | None = None) -> SimpleNamespace:
    """The attributes a MemoryManager reads from its session."""
    return SimpleNamespace(
        models=[model], messages=[], store=store or InMemorySessionStore(), session_id="s1", context_start=0
    )


def manager(
    model: Any, config: MemoryConfig | None = None, store: InMemorySessionStore | None = None
) -> MemoryManager:
    m = MemoryManager(config or MemoryConfig(embedder=False))
    m.bind(host(model, store))
    return m


async def run_tool(mgr: MemoryManager, command: str, **args: Any) -> str:
    from foundation_ai.agentic import ToolRegistry

    reg = ToolRegistry(mgr.tools())
    res = await reg.run(ToolCall(id="c", name="memory", arguments={"command": command, **args}))
    assert isinstance(res.content, TextContent)
    if res.error_detail:
        raise AssertionError(res.content.content)
    return res.content.content


async def test_memory_tool_writes_a_new_version_per_command() -> None:
    store = InMemorySessionStore()
    mgr = manager(ScriptedModel(), store=store)
    await run_tool(mgr, "add", fact="The user's name is Ada.")
    await run_tool(mgr, "add", fact="Ada prefers metric units.", confidence=0.8)
    await run_tool(mgr, "replace", fact="metric units", new_fact="Ada prefers imperial units.")
    await run_tool(mgr, "remove", fact="The user's name is Ada.")
    recs = [r for r in store.load("s1") if isinstance(r, SessionRecord.WorkingMemory)]
    assert [r.version for r in recs] == [1, 2, 3, 4]
    assert [f.content for f in recs[1].facts] == ["The user's name is Ada.", "Ada prefers metric units."]
    assert recs[1].facts[1].confidence == 0.8
    assert [f.content for f in recs[2].facts] == ["The user's name is Ada.", "Ada prefers imperial units."]
    assert [f.content for f in recs[3].facts] == ["Ada prefers imperial units."]
    assert [f.content for f in mgr.facts()] == ["Ada prefers imperial units."]
    # removal by id works too
    fid = mgr.facts()[0].id
    await run_tool(mgr, "remove", fact=fid)
    assert mgr.facts() == [] and mgr.state is not None and mgr.state.version == 5


async def test_memory_tool_reports_a_missing_fact_to_the_model() -> None:
    mgr = manager(ScriptedModel())
    with pytest.raises(AssertionError, match="no single fact matches"):
        await run_tool(mgr, "remove", fact="nothing like this")
    with pytest.raises(AssertionError, match="confidence"):
        await run_tool(mgr, "add", fact="x", confidence=3.0)
    assert mgr.state is not None and mgr.state.version == 0


def test_memory_tool_is_one_multi_command_declaration() -> None:
    from foundation_ai.types import Tool

    decl = manager(ScriptedModel()).tools()[0].declaration
    assert isinstance(decl, Tool.MultiCommands) and decl.name() == "memory"
    assert [c.name for c in decl.commands] == ["add", "remove", "replace"]


async def test_observe_sends_the_schema_and_builds_validated_entries() -> None:
    model = ScriptedModel(
        [
            say(
                obs_json("User is called Ada.", source=0)[:-2]
                + ', {"type": "question", "content": "Which city?", "priority": 2}]}'
            )
        ]
    )
    msgs = [Messages.user("Hi, I am Ada."), Messages.Assistant(model=MODEL, content=TextContent("Hello Ada"))]
    rec = await observe(model, msgs, tk())
    assert [(e.type, e.content) for e in rec.observations] == [
        ("assertion", "User is called Ada."),
        ("question", "Which city?"),
    ]
    assert rec.observations[0].source_message_id == msgs[0].id
    assert rec.observations[1].priority == 2
    assert rec.token_count > 0
    sent = model.interactions[0]
    assert "[0] user: Hi, I am Ada." in sent.messages[0].content.content
    params = model.params[0]
    assert params is not None and isinstance(params.output_format, OutputFormat.JsonSchema)
    assert params.output_format.schema["required"] == ["observations"]


@pytest.mark.parametrize(
    "answer",
    [
        "no json here",
        '{"observations": [{"type": "opinion", "content": "x"}]}',
        '{"observations": [{"content": ""}]}',
        '{"notes": []}',
    ],
)
async def test_observe_rejects_answers_that_break_the_schema(answer: str) -> None:
    with pytest.raises(MemoryGenerationError):
        await observe(ScriptedModel([say(answer)]), [Messages.user("hello")], tk())


async def test_observe_reports_a_provider_error() -> None:
    with pytest.raises(MemoryGenerationError, match="boom"):
        await observe(ScriptedModel([fail("boom")]), [Messages.user("hello")], tk())


async def test_long_inputs_are_observed_in_chunks() -> None:
    model = ScriptedModel(
        [say(obs_json("a", source=None)), say(obs_json("b", source=None)), say(obs_json("c", source=None))]
    )
    msgs = [Messages.user("word " * 200) for _ in range(6)]
    rec = await observe(model, msgs, tk(), chunk_tokens=600)  # two ~255-token lines per chunk
    assert len(model.interactions) == 3
    assert [e.content for e in rec.observations] == ["a", "b", "c"]


async def test_reflect_condenses_observations_with_importance_and_time_range() -> None:
    t1, t2 = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    o1 = SessionRecord.Observation(
        observations=[ObservationEntry(content="Ada is a chemist", timestamp=t1)], token_count=5
    )
    o2 = SessionRecord.Observation(
        observations=[ObservationEntry(content="Ada works on pH", timestamp=t2)], token_count=6
    )
    answer = {
        "reflections": [
            {"summary": "Ada is a chemist studying pH", "importance": 0.9, "observation_refs": [0, 1, 7]}
        ]
    }
    model = ScriptedModel([say(json.dumps(answer))])
    rec = await reflect(model, None, [o1, o2], tk())
    (entry,) = rec.reflections
    assert entry.content == "Ada is a chemist studying pH" and entry.importance == 0.9
    assert entry.source_observations == [o1.observations[0].id, o2.observations[0].id]
    assert entry.time_range == TimeRange(from_=t1, to=t2)
    assert rec.observation_token_count_before == 11 and rec.reflection_token_count_after > 0
    assert "[1] Ada works on pH" in model.interactions[0].messages[0].content.content
    bad = ScriptedModel([say('{"reflections": [{"summary": "x", "importance": 1.5}]}')])
    with pytest.raises(MemoryGenerationError):
        await reflect(bad, None, [o1], tk())
    empty = ScriptedModel([say('{"reflections": []}')])  # would erase the previous reflection
    with pytest.raises(MemoryGenerationError, match="no reflection"):
        await reflect(empty, rec, [o1], tk())


def conversation_records(n: int, words: int = 50) -> list[SessionRecord]:
    out: list[SessionRecord] = []
    for i in range(n):
        out.append(SessionRecord.Conversation(message=Messages.user(f"message {i} " + "word " * words)))
        out.append(
            SessionRecord.Conversation(
                message=Messages.Assistant(model=MODEL, content=TextContent("ok " * words))
            )
        )
    return out


async def test_triggers_run_observation_then_reflection_and_announce_them() -> None:
    reflection = json.dumps({"reflections": [{"summary": "condensed", "importance": 0.5}]})
    model = ScriptedModel(
        [say(obs_json("o1", source=None)), say(obs_json("o2", source=None)), say(reflection)]
    )
    store = InMemorySessionStore()
    mgr = manager(
        model,
        MemoryConfig(embedder=False, observation_trigger_tokens=200, reflection_trigger_tokens=6),
        store,
    )
    mgr.absorb(conversation_records(1, words=10))  # ~40 tokens: below the trigger
    assert [i async for i in mgr.passes()] == []
    mgr.absorb(conversation_records(2))
    items = [i async for i in mgr.passes()]
    kinds = [type(i.value).__name__ for i in items]
    assert items[0] == Stream.Pending(AgentProgress.ProcessingMemory(kind="observation"))
    assert kinds == [
        "AgentProgress.ProcessingMemory",
        "SessionRecord.Observation",
    ]  # one observation ('- "o1"', the entry quoted): 5 tokens < 6
    assert mgr.state is not None and mgr.state.tokens_since_observation == 0
    mgr.absorb(conversation_records(2))
    items = [i async for i in mgr.passes()]
    assert [i.value.kind for i in items if isinstance(i, Stream.Pending)] == ["observation", "reflection"]
    ref = items[-1].value
    assert isinstance(ref, SessionRecord.Reflection) and ref.reflections[0].content == "condensed"
    assert mgr.state.reflection == ref and mgr.state.observations_since_reflection == []
    stored = store.load("s1")
    assert [type(r).__name__ for r in stored] == [
        "SessionRecord.Observation",
        "SessionRecord.Observation",
        "SessionRecord.Reflection",
    ]


async def test_a_failed_memory_call_yields_a_failed_action_and_never_raises() -> None:
    mgr = manager(
        ScriptedModel([fail("memory model down")]),
        MemoryConfig(embedder=False, observation_trigger_tokens=10),
    )
    mgr.absorb(conversation_records(2))
    items = [i async for i in mgr.passes()]
    assert isinstance(items[0].value, AgentProgress.ProcessingMemory)
    failed = items[-1].value
    assert isinstance(failed, SessionRecord.FailedAction)
    assert failed.error.kind == "memory" and "memory model down" in failed.error.message
    assert mgr.state is not None and mgr.state.unobserved  # nothing lost: retried next time


async def test_a_separate_memory_model_is_used_when_configured() -> None:
    main, cheap = ScriptedModel(), ScriptedModel([say(obs_json("x", source=None))])
    mgr = manager(main, MemoryConfig(embedder=False, observation_trigger_tokens=10, memory_model=cheap))
    mgr.absorb(conversation_records(1))
    [i async for i in mgr.passes()]
    assert len(cheap.interactions) == 1 and main.interactions == []


def test_replaying_the_log_restores_the_tiers_and_counters_exactly() -> None:
    t = tk()
    log: list[SessionRecord] = []
    log += conversation_records(2)
    log.append(SessionRecord.WorkingMemory(facts=[MemoryFact(content="a")], version=1))
    log.append(SessionRecord.Observation(observations=[ObservationEntry(content="o")], token_count=7))
    log += conversation_records(1)
    log.append(
        SessionRecord.WorkingMemory(facts=[MemoryFact(content="a"), MemoryFact(content="b")], version=2)
    )
    log.append(SessionRecord.Reflection(reflections=[ReflectionEntry(content="r", importance=0.7)]))
    log.append(SessionRecord.Observation(observations=[ObservationEntry(content="o2")], token_count=9))
    log += conversation_records(3)
    retract = conversation_records(1)
    log += retract
    log.append(SessionRecord.Retracted(reason="x", message_ids=[retract[1].message.id]))  # type: ignore[attr-defined]
    live = MemoryState(t)
    for r in log:
        live.apply(r)
    decoded = [from_json(to_json(r), SessionRecord) for r in log]
    again = MemoryState.from_records(decoded, t)
    assert again.working == live.working and [f.content for f in again.facts] == ["a", "b"]
    assert again.reflection == live.reflection
    assert again.observations == live.observations
    assert again.observations_since_reflection == live.observations_since_reflection
    assert again.tokens_since_observation == live.tokens_since_observation
    assert again.observation_tokens_since_reflection == 9
    assert len(again.unobserved) == 7
    assert again.tokens_since_observation == sum(t(m) for m in again.unobserved)


def test_config_rejects_nonsense() -> None:
    from foundation_ai.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        MemoryConfig(pressure=1.5)
    with pytest.raises(ConfigurationError):
        MemoryConfig(observation_trigger_tokens=0)
    with pytest.raises(ConfigurationError):
        MemoryConfig(context_window=10)


# ---- JSON round trips of the new fields ------------------------------------------------------

observation_entries = st.builds(
    ObservationEntry,
    id=ids,
    content=text,
    priority=st.integers(-5, 5),
    timestamp=utc_times,
    type=st.sampled_from(["assertion", "question"]),
    source_message_id=st.none() | ids,
    scope=st.none() | text,
)
reflection_entries = st.builds(
    ReflectionEntry,
    id=ids,
    content=text,
    source_observations=st.lists(ids, max_size=3),
    time_range=st.none() | st.builds(TimeRange, from_=utc_times, to=utc_times),
    importance=st.floats(0.0, 1.0),
)
memory_records = st.one_of(
    st.builds(
        SessionRecord.Observation,
        id=ids,
        observations=st.lists(observation_entries, max_size=3),
        token_count=st.integers(0, 10**6),
        timestamp=utc_times,
    ),
    st.builds(
        SessionRecord.Reflection,
        id=ids,
        reflections=st.lists(reflection_entries, max_size=3),
        generated_at=utc_times,
        observation_token_count_before=st.integers(0, 10**6),
        reflection_token_count_after=st.integers(0, 10**6),
    ),
    st.builds(
        SessionRecord.WorkingMemory,
        id=ids,
        facts=st.lists(
            st.builds(
                MemoryFact,
                id=ids,
                content=text,
                confidence=st.floats(0, 1),
                source=st.none() | ids,
                timestamp=utc_times,
            ),
            max_size=3,
        ),
        version=st.integers(0, 10**6),
        timestamp=utc_times,
    ),
)


@settings(max_examples=150, deadline=None)
@given(memory_records)
def test_memory_records_round_trip_through_json(record: SessionRecord) -> None:
    assert from_json(to_json(record), SessionRecord) == record


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 10**6),
    st.none() | st.integers(0, 10**7),
    st.none() | st.sampled_from(["tokenizer", "estimate"]),
)
def test_generating_progress_with_context_figures_round_trips(
    so_far: int, ctx: int | None, how: str | None
) -> None:
    p = AgentProgress.Generating(model="m", tokens_so_far=so_far, context_tokens=ctx, token_counter=how)
    assert from_json(to_json(p), AgentProgress) == p


def test_reflection_importance_outside_the_unit_range_does_not_load() -> None:
    from foundation_ai.errors import FoundationAIError

    with pytest.raises(FoundationAIError, match="importance"):
        from_json(b'{"type":"reflection","reflections":[{"content":"x","importance":1.2}]}', SessionRecord)
    with pytest.raises(ValueError):
        ReflectionEntry(content="x", importance=-0.1)
    assert msgspec.json.decode(to_json(ObservationEntry(content="q", type="question")))["type"] == "question"


async def test_memory_tool_refuses_a_fact_over_the_documented_size() -> None:
    store = InMemorySessionStore()
    mgr = manager(ScriptedModel(), store=store)
    big = "BIG " + "y" * 100_000
    with pytest.raises(AssertionError, match=r"100,004 characters; a fact holds at most 1,000"):
        await run_tool(mgr, "add", fact=big)
    assert mgr.facts() == []
    from foundation_ai.memory import MAX_FACT_CHARS

    await run_tool(mgr, "add", fact="x" * MAX_FACT_CHARS)  # the limit itself is accepted
    with pytest.raises(AssertionError, match="new fact is 1,001 characters"):
        await run_tool(mgr, "replace", fact="x" * MAX_FACT_CHARS, new_fact="z" * (MAX_FACT_CHARS + 1))
    assert [len(f.content) for f in mgr.facts()] == [MAX_FACT_CHARS]
    assert [r.version for r in store.load("s1") if isinstance(r, SessionRecord.WorkingMemory)] == [1]


async def test_memory_tool_does_not_add_an_exact_duplicate_and_says_so() -> None:
    store = InMemorySessionStore()
    mgr = manager(ScriptedModel(), store=store)
    await run_tool(mgr, "add", fact="The user drinks tea.")
    first = mgr.facts()[0].id
    said = await run_tool(mgr, "add", fact="  the user drinks TEA. ")
    assert said == f"already remembered (fact id {first}); nothing added"
    assert [f.content for f in mgr.facts()] == ["The user drinks tea."]
    assert [r.version for r in store.load("s1") if isinstance(r, SessionRecord.WorkingMemory)] == [1]
    await run_tool(mgr, "add", fact="The user likes green tea.")
    with pytest.raises(
        AssertionError,
        match=r"no single fact matches 'tea': 2 facts contain it; name one by its id: " + first,
    ):
        await run_tool(mgr, "remove", fact="tea")
    with pytest.raises(AssertionError, match="already remembered"):
        await run_tool(mgr, "replace", fact="green tea", new_fact="The user drinks tea.")
    await run_tool(mgr, "remove", fact="drinks tea")  # the only fact containing it
    assert [f.content for f in mgr.facts()] == ["The user likes green tea."]
