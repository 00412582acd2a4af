"""A request that cannot fit the context window, with memory on: what no assembly can leave out
(system prompt, tool declarations, answer reserve, the current prompt) is checked against the
whole window before the model is called."""

from __future__ import annotations

import logging

import pytest

from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel, TurnEvent, call, say
from foundation_ai.errors import TurnFailedError
from foundation_ai.memory import MemoryConfig
from foundation_ai.types import AgentProgress, ModelParams, SessionRecord

HUGE = "HUGE " + "blah " * 3000 + "\nWhat word repeats above?"


def test_a_prompt_larger_than_the_window_fails_context_overflow_before_the_bundled_model_runs() -> None:
    pytest.importorskip("xllamacpp")
    from foundation_ai.backends._llamacpp import llamacpp

    model = llamacpp(None, n_ctx=1024)
    config = MemoryConfig(context_window=768, embedder=False, observation_trigger_tokens=10**6)
    agent = (
        AgentSession.builder(model)
        .with_store(InMemorySessionStore())
        .with_params(ModelParams(max_tokens=16, temperature=0.0))
        .with_memory(config)
        .build()
    )
    events = list(agent.run_turn_stream(HUGE).events())
    generating = [
        e
        for e in events
        if isinstance(e, TurnEvent.Progress) and isinstance(e.progress, AgentProgress.Generating)
    ]
    assert generating == []  # the model was never called
    failed = events[-1]
    assert isinstance(failed, TurnEvent.Failed) and failed.error.kind == "context_overflow"
    message = failed.error.message
    assert "768-token context window" in message and "answer reserve" in message
    needed = int(message.split("at least ")[1].split(" tokens")[0].replace(",", ""))
    assert needed > 6000  # the prompt's own tokens, by the model's tokenizer
    records = agent.store.load(agent.session_id)
    prompts = [r for r in records if isinstance(r, SessionRecord.Conversation)]
    assert [p.message.text() for p in prompts] == [HUGE]  # the prompt is kept, nothing answered
    summary = next(r for r in records if isinstance(r, SessionRecord.Summary))
    assert summary.usage.input == 0  # no generation was paid for
    with pytest.raises(TurnFailedError) as raised:
        agent.run_turn(HUGE)
    assert raised.value.kind == "context_overflow"
    assert agent.run_turn("Say hi.").ok  # a prompt that fits still runs
    agent.close()


def test_an_estimated_overflow_is_sent_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([say("blah")], context_window=768)
    agent = (
        AgentSession.builder(model)
        .with_store(InMemorySessionStore())
        .with_memory(MemoryConfig(embedder=False, observation_trigger_tokens=10**6))
        .build()
    )
    with caplog.at_level(logging.WARNING, logger="foundation_ai.memory.manager"):
        turn = agent.run_turn(HUGE)
    assert turn.ok and turn.text() == "blah"  # an estimate cannot prove the request too large
    assert len(model.interactions) == 1
    warned = [
        r.getMessage() for r in caplog.records if "more than the 768-token context window" in r.getMessage()
    ]
    assert warned and "counted by the estimate" in warned[0] and "sent anyway" in warned[0]
    agent.close()


def test_memory_blocks_are_left_out_when_only_they_push_the_request_over_the_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    facts = [f"The user's favourite number {i} is {i * 7}." for i in range(40)]
    model = ScriptedModel(
        [[call("memory", {"command": "add", "fact": f}) for f in facts], say("noted"), say("done")],
        context_window=2000,
    )
    agent = (
        AgentSession.builder(model)
        .with_store(InMemorySessionStore())
        .with_memory(
            MemoryConfig(
                embedder=False, observation_trigger_tokens=10**6, memory_model=ScriptedModel([say("{}")] * 4)
            )
        )
        .build()
    )
    assert agent.run_turn("remember these").ok
    mem = agent.memory
    assert mem is not None and mem.tokens is not None and mem.last_context is not None
    fixed = mem.fixed_tokens(model.interactions[-1])
    # the longest prompt that fits beside the fixed part: the [working_memory] block cannot
    prompt = next(
        "word " * n for n in range(2000, 0, -10) if fixed + mem.tokens.text("word " * n) <= 2000 - 20
    )
    with caplog.at_level(logging.WARNING, logger="foundation_ai.memory.manager"):
        turn = agent.run_turn(prompt)
    assert turn.ok
    last = model.interactions[-1]
    assert [m.text() for m in last.messages] == [prompt]  # no [working_memory] block
    assert any("memory blocks" in r.getMessage() and "left out" in r.getMessage() for r in caplog.records)
    ctx = agent.memory.last_context
    assert ctx is not None and ctx.tokens <= 2000 and ctx.blocks == 0
    agent.close()
