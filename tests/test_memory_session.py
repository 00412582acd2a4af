"""Memory in an agent session: the builder option, passes after turns, failures that never fail
a turn, resume, session.end(), and the 300-turn proof in a 2,000-token window."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import msgspec
import pytest

from foundation_ai.agentic import (
    AgentSession,
    InMemorySessionStore,
    ScriptedModel,
    SqliteSessionStore,
    call,
    say,
)
from foundation_ai.agentic.scripted import fail
from foundation_ai.memory import EstimateCounter, MemoryConfig, MemoryState, MessageTokens
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


def test_three_hundred_turns_in_a_two_thousand_token_window(tmp_path: Path) -> None:
    """No request exceeds the window, no overflow happens, a fact of turn 3 reaches turn 300, and
    observations and reflections are generated exactly at the configured triggers."""
    sizes: list[int] = []
    seen_fact: list[bool] = []
    filler = "and then we talked about the weather, the trains and a few books " * 2

    def answer(t: int) -> Any:
        def reply(interaction: ModelInteraction) -> Any:
            sizes.append(independent_tokens(interaction))
            seen_fact.append("Pixel" in request_text(interaction))
            return say(f"Answer {t}: {filler}")

        return reply

    script: list[Any] = []
    for t in range(1, 301):
        if t == 3:
            script.append([call("memory", {"command": "add", "fact": "The user's cat is named Pixel."})])
        script.append(answer(t))
    model = ScriptedModel(script, context_window=WINDOW, record=None)
    mem_model, mem_script = memory_model()
    config = MemoryConfig(
        # low enough that each observation is due before the window's pressure leaves unobserved
        # messages out (that also starts one, below the trigger: the exact check below would fail)
        observation_trigger_tokens=350,
        reflection_trigger_tokens=40,
        memory_model=mem_model,
        output_reserve=150,
    )
    store = SqliteSessionStore(tmp_path / "s.db")
    agent = (
        AgentSession.builder(model)
        .with_store(store)
        .with_memory(config)
        .with_system_prompt("Be brief.")
        .build()
    )
    progress: list[Any] = []
    for t in range(1, 301):
        if t == 3:
            prompt = "My cat is named Pixel. Please remember that."
        elif t == 300:
            prompt = "What is my cat's name?"
        else:
            prompt = f"Turn {t}: tell me something about item {t}. {filler}"
        stream = agent.run_turn_stream(prompt)
        for item in stream:
            if isinstance(item, Stream.Pending):
                progress.append(item.value)
    records = store.load(agent.session_id)
    failed = [
        p for p in progress if isinstance(p, AgentProgress.ProcessingMemory) and p.kind == "trim_context"
    ]
    assert failed == []  # the loop's overflow recovery never ran
    assert len(model.interactions) == 301  # one generation per turn, plus the tool round of turn 3
    assert max(independent_tokens(i) for i in model.interactions) <= WINDOW
    assert max(sizes) <= WINDOW and len(sizes) == 300
    assert seen_fact[-1], "the fact of turn 3 is in the request of turn 300"
    gens = [p for p in progress if isinstance(p, AgentProgress.Generating) and p.tokens_so_far == 0]
    assert gens and all(p.context_tokens is not None and p.context_tokens <= WINDOW for p in gens)
    assert {p.token_counter for p in gens} == {"estimate"}
    # observations and reflections at the triggers: replay the log and check each one
    counter = MessageTokens(EstimateCounter())
    state = MemoryState(counter)
    n_obs = n_ref = 0
    turn_over = False
    for r in records:
        if turn_over and isinstance(r, SessionRecord.Conversation):
            # a turn and its memory passes are over: no pass is overdue
            assert state.tokens_since_observation < config.observation_trigger_tokens
            assert state.observation_tokens_since_reflection < config.reflection_trigger_tokens
            turn_over = False
        if isinstance(r, SessionRecord.Observation):
            assert state.tokens_since_observation >= config.observation_trigger_tokens
            n_obs += 1
        elif isinstance(r, SessionRecord.Reflection):
            assert state.observation_tokens_since_reflection >= config.reflection_trigger_tokens
            n_ref += 1
        elif isinstance(r, SessionRecord.Summary):
            turn_over = True
        state.apply(r)
    assert n_obs == mem_script.observation_calls and n_obs >= 30
    assert n_ref == mem_script.reflection_calls and n_ref >= 5
    print(f"observations {n_obs}, reflections {n_ref}, largest request {max(sizes)} tokens")
    wm = [r for r in records if isinstance(r, SessionRecord.WorkingMemory)]
    assert [f.content for f in wm[-1].facts] == ["The user's cat is named Pixel."]
    agent.close()


def test_resume_restores_every_tier_and_the_next_request_carries_them(tmp_path: Path) -> None:
    mem, _ = memory_model()
    config = MemoryConfig(
        embedder=False, observation_trigger_tokens=5, reflection_trigger_tokens=1, memory_model=mem
    )
    store = SqliteSessionStore(tmp_path / "s.db")
    agent = scripted_session(
        store,
        [call("memory", {"command": "add", "fact": "Ada likes green tea."})],
        say("Noted."),
        config=config,
    )
    agent.run_turn("My favourite drink is green tea.")
    sid = agent.session_id
    before = agent.memory.state
    agent.close()
    store2 = SqliteSessionStore(tmp_path / "s.db")
    model = ScriptedModel([say("You like green tea.")], context_window=WINDOW)
    again = AgentSession.builder(model).with_store(store2).with_memory(config).resume(sid)
    after = again.memory.state
    assert after.working == before.working and after.version == 1
    assert after.observations == before.observations and len(after.observations) == 1
    assert after.reflection == before.reflection and after.reflection is not None
    assert after.tokens_since_observation == before.tokens_since_observation
    again.run_turn("What do I like to drink?")
    sent = request_text(model.interactions[0])
    assert '[working_memory]\n- "Ada likes green tea."' in sent
    assert "[reflection]" in sent
    again.close()


def test_the_same_conversation_runs_on_the_bundled_model_without_error() -> None:
    """The bundled SmolLM2-135M as the session's and the memory model, in a 2,048-token window,
    with tiny triggers so that observation and reflection passes run within a few turns (kept
    short for CI: 3 turns). Answer quality and memory quality are not asserted; every turn must
    complete and every request must fit the window."""
    pytest.importorskip("xllamacpp")
    from foundation_ai.backends._llamacpp import llamacpp
    from foundation_ai.types import ModelParams

    model = llamacpp(None, n_ctx=2048, seed=7)
    config = MemoryConfig(
        observation_trigger_tokens=40,
        reflection_trigger_tokens=10,
        memory_output_tokens=96,
        output_reserve=64,
    )
    store = InMemorySessionStore()
    agent = (
        AgentSession.builder(model)
        .with_store(store)
        .with_memory(config)
        .with_params(ModelParams(max_tokens=48, temperature=0.0))
        .build()
    )
    prompts = ["Hi! My cat is named Pixel.", "I live in Porto and I like trains.", "What is my cat's name?"]
    progress: list[Any] = []
    for p in prompts:
        stream = agent.run_turn_stream(p)
        for item in stream:
            if isinstance(item, Stream.Pending):
                progress.append(item.value)
        assert any(isinstance(v, AgentProgress.TurnComplete) for v in progress)
    gens = [p for p in progress if isinstance(p, AgentProgress.Generating) and p.tokens_so_far == 0]
    assert gens and all(p.token_counter == "tokenizer" and p.context_tokens <= 2048 for p in gens)
    kinds = [p.kind for p in progress if isinstance(p, AgentProgress.ProcessingMemory)]
    assert "observation" in kinds and "trim_context" not in kinds
    records = store.load(agent.session_id)
    assert sum(isinstance(r, SessionRecord.Summary) for r in records) == len(prompts)
    agent.close()


def test_a_users_context_assembler_receives_the_memory_assembled_request() -> None:
    seen: list[list[str | None]] = []

    def mine(request: Any) -> ModelInteraction:
        seen.append([m.text() for m in request.interaction.messages])
        return request.interaction

    model = ScriptedModel(
        [[call("memory", {"command": "add", "fact": "Ada is left-handed."})], say("Noted."), say("Sure.")],
        context_window=WINDOW,
    )
    agent = (
        AgentSession.builder(model)
        .with_store(InMemorySessionStore())
        .with_context_assembler(mine)
        .with_memory(MemoryConfig(embedder=False))
        .build()
    )
    agent.run_turn("I am left-handed.")
    agent.run_turn("Which hand do I write with?")
    assert len(seen) == 3  # every generation went through both
    assert seen[-1][0] == '[working_memory]\n- "Ada is left-handed." (id ' + agent.memory.facts()[0].id + ")"
    assert model.interactions[-1].messages[0].text() == seen[-1][0]
    agent.close()


def test_a_failing_embedder_never_fails_a_turn() -> None:
    class Broken:
        model_id = "broken"
        dimensions = 4

        def embed(self, texts: Any) -> Any:
            raise RuntimeError("embedding service down")

    model = ScriptedModel([say("Red is nice."), say("It is red.")], context_window=WINDOW)
    agent = (
        AgentSession.builder(model)
        .with_store(InMemorySessionStore())
        .with_memory(MemoryConfig(embedder=Broken()))
        .build()
    )
    assert agent.run_turn("My bike is red.").ok
    assert agent.run_turn("What colour is my bike?").ok
    assert agent.memory.retriever.flush(10.0) and agent.memory.retriever.errors >= 1
    agent.close()


def test_resume_with_memory_does_not_warn_about_the_memory_tools(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mem, _ = memory_model()
    config = MemoryConfig(embedder=False, memory_model=mem)
    store = SqliteSessionStore(tmp_path / "s.db")
    agent = scripted_session(store, say("Hello."), config=config)
    agent.run_turn("Hi.")
    sid = agent.session_id
    assert "memory" in _recorded_tools(store, sid)
    agent.close()
    model = ScriptedModel([say("Again.")], context_window=WINDOW)
    with caplog.at_level("WARNING", logger="foundation_ai"):
        again = AgentSession.builder(model).with_store(SqliteSessionStore(tmp_path / "s.db"))
        resumed = again.with_memory(config).with_tool_catalog([]).resume(sid)
    assert not [r for r in caplog.records if "tool catalog" in r.getMessage()], caplog.text
    assert {"memory"} <= set(resumed.registry.names())
    resumed.close()


def _recorded_tools(store: SqliteSessionStore, sid: str) -> tuple[str, ...]:
    meta = store.session_meta(sid)
    return tuple(meta.tools) if meta else ()
