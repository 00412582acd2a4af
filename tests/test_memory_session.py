"""Memory in an agent session: the builder option, passes after turns, failures that never fail
a turn, resume, session.end(), and the 300-turn proof in a 2,000-token window."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import pytest

from foundation_ai.agentic import (
    AgentSession,
    InMemorySessionStore,
    ScriptedModel,
    say,
)
from foundation_ai.agentic.scripted import fail
from foundation_ai.memory import MemoryConfig
from foundation_ai.memory.generation import OBSERVATION_INSTRUCTION, REFLECTION_INSTRUCTION
from foundation_ai.types import AgentProgress, ModelInteraction, SessionRecord, Stream, TextContent

WINDOW = 2000


def independent_tokens(interaction: ModelInteraction) -> int:
    """A count of the request made here, not by the library: 4 characters per token (rounded
    up) per message text plus 4 per message, the system prompt, and the tool declarations as
    JSON."""
    total = 0
    for m in interaction.messages:
        content: Any = getattr(m, "content", None)
        if isinstance(content, TextContent):
            text = content.content
        else:
            text = msgspec.json.encode(msgspec.to_builtins(content)).decode()
        total += math.ceil(len(text) / 4) + 4
    system = interaction.full_system_prompt() or ""
    total += math.ceil(len(system) / 4) + 4
    if interaction.tools_shed.tools:
        total += math.ceil(len(msgspec.json.encode(interaction.tools_shed)) / 4)
    return total


def request_text(interaction: ModelInteraction) -> str:
    return "\n".join(m.text() or "" for m in interaction.messages)


class MemoryScript:
    """A memory model: answers observation calls with one observation per transcript line that
    states a fact ("My ... is ..."), else a summary line; reflection calls with one reflection
    per two observations."""

    def __init__(self) -> None:
        self.observation_calls = 0
        self.reflection_calls = 0

    def __call__(self, interaction: ModelInteraction) -> Any:
        text = interaction.messages[0].text() or ""
        if interaction.system_prompt == OBSERVATION_INSTRUCTION:
            self.observation_calls += 1
            lines = [ln for ln in text.splitlines() if ln.startswith("[")]
            facts = [ln.split(": ", 1)[1][:200] for ln in lines if " user: My " in ln]
            items = [{"type": "assertion", "content": f, "priority": 3} for f in facts]
            items.append({"type": "assertion", "content": f"talked about {len(lines)} messages"})
            return say(json.dumps({"observations": items}))
        assert interaction.system_prompt == REFLECTION_INSTRUCTION
        self.reflection_calls += 1
        obs = [ln for ln in text.splitlines() if ln.startswith("[")]
        keep = [ln.split("] ", 1)[1] for ln in obs if "My " in ln] or ["a long friendly chat"]
        refs = [{"summary": k[:300], "importance": 0.9, "observation_refs": [0]} for k in keep[:4]]
        return say(json.dumps({"reflections": refs}))


def memory_model() -> tuple[ScriptedModel, MemoryScript]:
    script = MemoryScript()
    return ScriptedModel([script] * 5000, name="memory-model"), script


def scripted_session(store: Any, *replies: Any, config: MemoryConfig | None = None) -> AgentSession:
    model = ScriptedModel(list(replies), context_window=WINDOW)
    return (
        AgentSession.builder(model)
        .with_store(store)
        .with_memory(config or MemoryConfig(embedder=False))
        .build()
    )


def test_a_failed_memory_pass_yields_a_failed_action_and_the_turn_completes() -> None:
    mem = ScriptedModel([fail("memory backend down")])
    agent = scripted_session(
        InMemorySessionStore(),
        say("Hello there, nice to meet you."),
        config=MemoryConfig(embedder=False, observation_trigger_tokens=5, memory_model=mem),
    )
    items = list(agent.run_turn_stream("Hi, I am Ada."))
    values = [getattr(i, "value", None) for i in items]
    kinds = [v.kind for v in values if isinstance(v, AgentProgress.ProcessingMemory)]
    assert kinds == ["observation"]
    failed = [v for v in values if isinstance(v, SessionRecord.FailedAction)]
    assert len(failed) == 1 and failed[0].error.kind == "memory"
    assert any(isinstance(v, AgentProgress.TurnComplete) for v in values)
    agent.close()


def test_run_turn_records_memory_records_and_keeps_the_turn_completed() -> None:
    mem, _ = memory_model()
    agent = scripted_session(
        InMemorySessionStore(),
        say("Nice to meet you, Ada."),
        config=MemoryConfig(embedder=False, observation_trigger_tokens=5, memory_model=mem),
    )
    turn = agent.run_turn("My name is Ada.")
    assert turn.ok
    obs = [r for r in turn.records if isinstance(r, SessionRecord.Observation)]
    assert len(obs) == 1 and obs[0].observations[0].content.startswith("My name is Ada")
    assert isinstance(turn.records[-1], SessionRecord.Observation)
    agent.close()


def test_end_emits_session_ending_runs_a_final_observation_and_closes() -> None:
    mem, script = memory_model()
    store = InMemorySessionStore()
    agent = scripted_session(
        store, say("Hello!"), config=MemoryConfig(embedder=False, memory_model=mem)
    )  # default triggers: nothing observed during the turn
    agent.run_turn("My name is Ada.")
    assert script.observation_calls == 0
    items = agent.end()
    assert items[0] == Stream.Pending(AgentProgress.SessionEnding())
    assert items[1] == Stream.Pending(AgentProgress.ProcessingMemory(kind="observation"))
    assert isinstance(items[2].value, SessionRecord.Observation)
    assert script.observation_calls == 1
    from foundation_ai.agentic import SessionClosedError

    with pytest.raises(SessionClosedError):
        agent.run_turn("more")


def test_end_without_memory_just_announces_and_closes() -> None:
    agent = AgentSession.builder(ScriptedModel([say("hi")])).with_store(InMemorySessionStore()).build()
    assert agent.end() == [Stream.Pending(AgentProgress.SessionEnding())]
    assert agent.memory is None


def test_memory_tools_are_offered_to_the_model() -> None:
    model = ScriptedModel([say("ok")])
    agent = AgentSession.builder(model).with_store(InMemorySessionStore()).with_memory().build()
    agent.run_turn("hi")
    names = [t.name() for t in model.interactions[0].tools_shed.tools]
    assert names == ["memory", "search_context"]
    agent.close()


def test_an_abandoned_turn_is_still_taken_into_memory() -> None:
    agent = scripted_session(InMemorySessionStore(), say("a long answer " * 5), say("second"))
    stream = agent.run_turn_stream("My name is Ada.")
    for item in stream:
        value = getattr(item, "value", None)
        if isinstance(value, SessionRecord.Conversation) and value.message.text() == "a ":
            break  # the answer is streaming
    stream.close()
    state = agent.memory.state
    assert [m.text() for m in state.unobserved] == ["My name is Ada.", "a "]  # the partial answer kept
    assert state.tokens_since_observation == sum(agent.memory.tokens(m) for m in state.unobserved)
    assert agent.run_turn("again").ok  # the session is free again
    agent.close()
