"""The turn hooks (docs/turn-loop.md): phase hooks around every phase, the context assembler,
the tool gate (allow / deny / ask) and the step runner, each set from the builder."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import InMemorySessionStore, ScriptedModel, TurnOutcome, call, say, tool
from foundation_ai.agentic.turn import (
    Allow,
    Ask,
    ContextRequest,
    Deny,
    GateRequest,
    Generation,
    GenerationRecord,
    InProcessSteps,
    Phase,
    PhaseHooks,
    StepRunner,
    TurnState,
)
from foundation_ai.types import (
    Messages,
    ModelInteraction,
    SessionRecord,
    Stream,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

RAN: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(f"add({a}, {b})")
    return a + b


@tool
def wipe(path: str) -> str:
    """Delete a path."""
    RAN.append(f"wipe({path})")
    return "wiped"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def session(model: ScriptedModel, **hooks: Any) -> AgentSession:
    b = AgentSession.builder(model).with_tools(add, wipe).with_store(InMemorySessionStore())
    for name, value in hooks.items():
        b = getattr(b, f"with_{name}")(value)
    return b.build()


class Recorder(PhaseHooks):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Phase, str | None]] = []

    def before_phase(self, phase: Phase, state: TurnState) -> None:
        self.seen.append(("before", phase, None))

    def after_phase(self, phase: Phase, state: TurnState, error: BaseException | None) -> None:
        self.seen.append(("after", phase, None if error is None else type(error).__name__))


TOOL_TURN = [
    Phase.OPEN,
    Phase.PROMPT,
    Phase.DRAIN_STEERING,
    Phase.ADMIT,
    Phase.ASSEMBLE_CONTEXT,
    Phase.GENERATE,
    Phase.DECIDE,
    Phase.EXECUTE_TOOLS,
    Phase.DRAIN_STEERING,
    Phase.ADMIT,
    Phase.ASSEMBLE_CONTEXT,
    Phase.GENERATE,
    Phase.DECIDE,
    Phase.FOLLOW_UPS,
    Phase.FINISH,
]


# -- phase hooks -------------------------------------------------------------------------------


def test_phase_hooks_wrap_every_phase_in_order() -> None:
    rec = Recorder()
    agent = session(ScriptedModel([call("add", {"a": 2, "b": 40}), say("42")]), phase_hooks=rec)
    turn = agent.run_turn("2 + 40?")
    assert turn.ok and turn.text() == "42"
    expected = [e for p in TOOL_TURN for e in (("before", p, None), ("after", p, None))]
    assert rec.seen == expected


def test_several_phase_hooks_nest_like_spans() -> None:
    log: list[str] = []

    class Named(PhaseHooks):
        def __init__(self, name: str) -> None:
            self.name = name

        def before_phase(self, phase: Phase, state: TurnState) -> None:
            if phase is Phase.FINISH:
                log.append(f"{self.name}>")

        def after_phase(self, phase: Phase, state: TurnState, error: BaseException | None) -> None:
            if phase is Phase.FINISH:
                log.append(f"<{self.name}")

    b = AgentSession.builder(ScriptedModel([say("hi")])).with_store(InMemorySessionStore())
    agent = b.with_phase_hooks(Named("trace")).with_phase_hooks(Named("memory"), Named("audit")).build()
    agent.run_turn("hello")
    assert log == ["trace>", "memory>", "audit>", "<audit", "<memory", "<trace"]


def test_phase_hooks_see_the_live_turn_state() -> None:
    counts: list[tuple[Phase, int, int]] = []

    class Counting(PhaseHooks):
        def after_phase(self, phase: Phase, state: TurnState, error: BaseException | None) -> None:
            counts.append((phase, state.generations, state.persisted))

    agent = session(ScriptedModel([call("add", {"a": 1, "b": 1}), say("2")]), phase_hooks=Counting())
    agent.run_turn("1 + 1?")
    assert counts[1] == (Phase.PROMPT, 0, 1)  # the prompt persisted
    assert (Phase.EXECUTE_TOOLS, 1, 3) in counts  # prompt, call, result
    assert counts[-1] == (Phase.FINISH, 2, 4)


def test_after_phase_gets_the_error_when_the_stream_is_closed_mid_generation() -> None:
    rec = Recorder()
    agent = session(ScriptedModel([say("one two three four five six")], chunk_words=1), phase_hooks=rec)

    async def go() -> None:
        stream = agent.arun_turn_stream("count")
        async for item in stream:
            value = item.value if isinstance(item, Stream.Next) else None
            if isinstance(value, SessionRecord.Conversation) and not isinstance(value.message, UserMessage):
                break  # the first snapshot of the answer: inside `generate`
        await stream.aclose()

    asyncio.run(go())
    assert ("after", Phase.GENERATE, "GeneratorExit") in rec.seen
    assert ("after", Phase.DECIDE, None) not in rec.seen
    assert ("before", Phase.FINISH, None) not in rec.seen  # an abandoned turn cannot emit any more
    assert rec.seen.count(("before", Phase.GENERATE, None)) == 1


def test_a_phase_hook_that_raises_ends_the_turn_with_its_error() -> None:
    class Broken(PhaseHooks):
        def before_phase(self, phase: Phase, state: TurnState) -> None:
            if phase is Phase.EXECUTE_TOOLS:
                raise RuntimeError("tracer down")

    agent = session(ScriptedModel([call("add", {"a": 1, "b": 2}), say("3")]), phase_hooks=Broken())
    with pytest.raises(RuntimeError, match="tracer down"):
        agent.run_turn("1 + 2?")
    assert RAN == []
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 1 and "interrupted" in (results[0].error_detail or "")  # the call is paired
    assert agent.run_turn("again?").text() == "3"  # the session is usable afterwards


# -- context assembler -------------------------------------------------------------------------


def test_context_assembler_changes_what_the_model_receives() -> None:
    seen: list[ContextRequest] = []

    def remember(req: ContextRequest) -> ModelInteraction:
        seen.append(req)
        note = Messages.system("memory: the user likes short answers")
        return msgspec.structs.replace(
            req.interaction,
            messages=[note, *req.interaction.messages],
            system_prompt=(req.interaction.system_prompt or "") + " Recall memories.",
        )

    model = ScriptedModel([say("ok"), say("fine")])
    agent = session(model, context_assembler=remember)
    agent.run_turn("hello")
    agent.run_turn("again")
    sent = model.interactions[1]
    assert sent.messages[0].text() == "memory: the user likes short answers"
    assert [m.text() for m in sent.messages[1:]] == ["hello", "ok", "again"]
    assert sent.system_prompt == " Recall memories."
    assert [m.text() for m in agent.messages] == ["hello", "ok", "again", "fine"]  # history untouched
    assert seen[1].history is agent.messages and seen[1].session_id == agent.session_id
    assert seen[1].model is model and seen[1].state.generations == 1


def test_async_context_assembler_is_awaited_once_per_generation() -> None:
    calls: list[int] = []

    async def assemble(req: ContextRequest) -> ModelInteraction:
        await asyncio.sleep(0)
        calls.append(len(req.interaction.messages))
        return req.interaction

    model = ScriptedModel([call("add", {"a": 2, "b": 3}), say("5")])
    agent = session(model, context_assembler=assemble)
    assert agent.run_turn("2 + 3?").text() == "5"
    assert calls == [1, 3]  # prompt; prompt + call + result
    assert model.interactions[1].messages == agent.messages[:3]


def test_context_assembler_returning_messages_is_a_type_error() -> None:
    model = ScriptedModel([say("never")])
    agent = session(model, context_assembler=lambda req: req.interaction.messages)
    with pytest.raises(TypeError, match="ModelInteraction"):
        agent.run_turn("hello")
    assert model.interactions == []  # nothing was sent
    assert [m.text() for m in agent.messages] == ["hello"]


# -- tool gate ---------------------------------------------------------------------------------


def test_denied_call_gets_an_error_result_with_the_reason_and_never_runs() -> None:
    asked: list[GateRequest] = []

    def gate(req: GateRequest) -> Allow | Deny:
        asked.append(req)
        return Deny("deleting files is not allowed") if req.call.name == "wipe" else Allow()

    model = ScriptedModel(
        [[call("wipe", {"path": "/"}), call("add", {"a": 1, "b": 2})], say("I could only add: 3")]
    )
    agent = session(model, tool_gate=gate)
    turn = agent.run_turn("wipe / and add 1 + 2")
    assert turn.ok and turn.text() == "I could only add: 3"
    assert RAN == ["add(1, 2)"]
    denied, added = turn.tool_results()
    assert denied.name == "wipe" and denied.error_detail is not None
    assert "deleting files is not allowed" in denied.error_detail
    assert "deleting files is not allowed" in denied.text()  # the model sees the reason
    assert added.error_detail is None and added.text() == "3"
    assert [r.call.name for r in asked] == ["wipe", "add"]
    assert [c.name for c in asked[0].calls] == ["wipe", "add"] and asked[0].session_id == agent.session_id
    assert model.interactions[1].messages[-2:] == [denied, added]


def test_async_gate_allows_calls() -> None:
    async def gate(req: GateRequest) -> Allow:
        await asyncio.sleep(0)
        return Allow()

    agent = session(ScriptedModel([call("add", {"a": 4, "b": 4}), say("8")]), tool_gate=gate)
    assert agent.run_turn("4 + 4?").text() == "8"
    assert RAN == ["add(4, 4)"]


def test_denied_call_still_pairs_with_its_dependents() -> None:
    def gate(req: GateRequest) -> Allow | Deny:
        return Deny("no") if req.call.id == "first" else Allow()

    first = call("add", {"a": 1, "b": 1}, id="first")
    second = call("add", {"a": 2, "b": 2}, id="second", depends_on=["first"])
    agent = session(ScriptedModel([[first, second], say("done")]), tool_gate=gate)
    turn = agent.run_turn("go")
    assert turn.ok
    assert [r.tool_call_id for r in turn.tool_results()] == ["first", "second"]
    assert RAN == ["add(2, 2)"]


def test_ask_pauses_the_turn_awaiting_approval_and_runs_nothing() -> None:
    agent = session(
        ScriptedModel([[call("add", {"a": 1, "b": 2}), call("wipe", {"path": "/tmp/x"})], say("never")]),
        tool_gate=lambda req: Ask("delete /tmp/x?") if req.call.name == "wipe" else Allow(),
    )
    turn = agent.run_turn("add and wipe")
    assert turn.outcome is TurnOutcome.AwaitingApproval and turn.error is None
    assert isinstance(turn.records[-1], SessionRecord.Summary)
    assert turn.records[-1].awaiting_approval == [c.id for c in turn.awaiting]
    assert [c.name for c in turn.awaiting] == ["wipe"]
    assert RAN == []  # not even the allowed call
    assert turn.tool_results() == []


def test_a_gate_answer_that_is_not_a_decision_is_a_type_error() -> None:
    agent = session(ScriptedModel([call("add", {"a": 1, "b": 2}), say("3")]), tool_gate=lambda req: True)
    with pytest.raises(TypeError, match="Allow"):
        agent.run_turn("1 + 2?")
    assert RAN == []


def test_steering_interrupts_a_gate_waiting_for_an_answer() -> None:
    agent: AgentSession

    async def slow_gate(req: GateRequest) -> Allow:  # e.g. waiting for a human
        asyncio.get_running_loop().call_soon(agent.steer, "stop, do something else")
        await asyncio.sleep(30)
        return Allow()

    agent = session(ScriptedModel([call("add", {"a": 1, "b": 2}), say("ok")]), tool_gate=slow_gate)
    turn = agent.run_turn("add")
    assert turn.ok and turn.text() == "ok" and RAN == []
    (result,) = turn.tool_results()
    assert "steered" in (result.error_detail or "")


# -- step runner -------------------------------------------------------------------------------


class Journal(StepRunner):
    """A step runner that records every step as JSON and, when a step is already recorded,
    replays it instead of running it (what a durable runner does after a restart)."""

    def __init__(self, log: dict[str, bytes] | None = None) -> None:
        self.log: dict[str, bytes] = {} if log is None else log
        self.ran: list[str] = []
        self.replayed: list[str] = []

    async def generation(self, step: Generation) -> Any:  # type: ignore[override]
        saved = self.log.get(step.key)
        if saved is not None:
            self.replayed.append(step.key)
            step.restore(msgspec.json.decode(saved, type=GenerationRecord))
            return
        self.ran.append(step.key)
        async for item in step.stream():
            yield item
        self.log[step.key] = msgspec.json.encode(step.snapshot())

    async def tool_call(
        self, call: ToolCall, run: Callable[[], Awaitable[ToolResultMessage]]
    ) -> ToolResultMessage:
        key = f"tool:{call.id}"
        saved = self.log.get(key)
        if saved is not None:
            self.replayed.append(key)
            return msgspec.json.decode(saved, type=ToolResultMessage)
        self.ran.append(key)
        result = await run()
        self.log[key] = msgspec.json.encode(result)
        return result


def test_step_runner_runs_each_generation_and_tool_call_as_a_step() -> None:
    journal = Journal()
    agent = session(ScriptedModel([call("add", {"a": 2, "b": 40}, id="c1"), say("42")]), step_runner=journal)
    turn = agent.run_turn("2 + 40?")
    assert turn.text() == "42"
    assert journal.ran == ["generation:1", "tool:c1", "generation:2"]
    assert RAN == ["add(2, 40)"]


def test_recorded_steps_replay_without_calling_the_model_or_the_tool() -> None:
    first = Journal()
    agent = session(ScriptedModel([call("add", {"a": 2, "b": 40}, id="c1"), say("42")]), step_runner=first)
    original = agent.run_turn("2 + 40?")
    RAN.clear()
    replay = Journal(dict(first.log))
    empty = ScriptedModel([])  # fails every generation ("script exhausted") if it is called
    again = session(empty, step_runner=replay).run_turn("2 + 40?")
    assert again.ok and again.text() == "42"
    assert replay.ran == [] and replay.replayed == ["generation:1", "tool:c1", "generation:2"]
    assert RAN == [] and empty.interactions == []
    assert [m.id for m in again.messages()[1:]] == [m.id for m in original.messages()[1:]]
    assert again.usage() == original.usage()


def test_default_step_runner_is_in_process() -> None:
    agent = session(ScriptedModel([say("hi")]))
    assert isinstance(agent.hooks.steps, InProcessSteps)
    assert agent.hooks.phases is None and agent.hooks.context is None and agent.hooks.gate is None


def test_streamed_turn_with_every_hook_set_yields_the_same_items() -> None:
    def items(agent: AgentSession) -> list[str]:
        out = []
        for item in agent.run_turn_stream("2 + 40?"):
            v = item.value if isinstance(item, Stream.Next | Stream.Pending) else None
            out.append(type(v).__name__ if v is not None else type(item).__name__)
        return out

    script = [call("add", {"a": 2, "b": 40}, id="c1"), say("42")]
    plain = items(session(ScriptedModel(list(script))))
    hooked = items(
        session(
            ScriptedModel(list(script)),
            phase_hooks=Recorder(),
            context_assembler=lambda r: r.interaction,
            tool_gate=lambda r: Allow(),
            step_runner=Journal(),
        )
    )
    assert hooked == plain
    assert "AgentProgress.TurnComplete" in plain and "AgentProgress.ToolCallRequested" in plain


# -- with a real model -------------------------------------------------------------------------


def test_hooks_on_a_real_llama_server_turn(llama_server: Any) -> None:
    """Over real HTTP to the loopback llama.cpp server: the forced tool call is denied by the
    gate (the tool never runs, the server receives the reason as the tool message), the context
    assembler's note reaches every request's system message, and the phase hooks see the turn."""
    import json

    import httpx2

    from foundation_ai.backends import openai_chat
    from foundation_ai.types import ModelParams, ToolChoice

    bodies: list[dict[str, Any]] = []
    client = httpx2.Client(
        timeout=300,
        trust_env=False,
        event_hooks={"request": [lambda r: bodies.append(json.loads(r.content))]},
    )
    model = openai_chat("smollm2", base_url=llama_server.base_url, http_client=client, timeout=300)

    def remember(req: ContextRequest) -> ModelInteraction:
        return msgspec.structs.replace(req.interaction, system_prompt="Memory: the user is called Ada.")

    rec = Recorder()
    agent = (
        AgentSession.builder(model)
        .with_tools(add)
        .with_params(ModelParams(temperature=0.0, seed=42, max_tokens=32))
        .with_max_iterations(inner=2)
        .with_store(InMemorySessionStore())
        .with_context_assembler(remember)
        .with_tool_gate(lambda req: Deny("the calculator is switched off"))
        .with_phase_hooks(rec)
        .build()
    )
    turn = agent.run_turn("What is 2 + 40?", tool_choice=[ToolChoice.Function("add"), ToolChoice.None_()])
    assert turn.ok, turn.error
    assert RAN == []
    (call_,) = turn.tool_calls()
    (result,) = turn.tool_results()
    assert call_.name == "add" and result.tool_call_id == call_.id
    assert "the calculator is switched off" in (result.error_detail or "")
    assert turn.text().strip()
    # a request the server dropped on a reused keep-alive connection is sent again, unchanged
    # (httpx "Server disconnected without sending a response"; the backend retries it): the
    # model calls are the distinct consecutive bodies
    bodies = [b for i, b in enumerate(bodies) if i == 0 or b != bodies[i - 1]]
    assert len(bodies) == 2
    for body in bodies:  # (the first also carries the backend's instruction forcing the call)
        assert body["messages"][0]["role"] == "system"
        assert body["messages"][0]["content"].startswith("Memory: the user is called Ada.")
    tool_msg = bodies[1]["messages"][-1]
    assert tool_msg["role"] == "tool" and "the calculator is switched off" in tool_msg["content"]
    phases = [p for kind, p, _ in rec.seen if kind == "before"]
    assert phases.count(Phase.GENERATE) == 2 and phases[-1] is Phase.FINISH
    agent.close()
