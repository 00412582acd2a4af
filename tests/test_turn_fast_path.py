"""The quiet turn driver (``arun_turn`` / ``run_turn`` with no phase hooks, no memory and the
in-process step runner: ``turn.machine.run_quiet``) gives the same turn as the general driver
(``run_turn``, taken when phase hooks are set): the same records, outcome, usage, conversation,
stored records and pending records, scenario by scenario; and a store that fails at any write,
including the one that carries the final answer with its ``Summary``, fails the turn the same way
and loses nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import (
    InMemorySessionStore,
    Reply,
    ScriptedModel,
    StoreError,
    TurnOutcome,
    call,
    fail,
    hook,
    rate_limited,
    say,
    tool,
)
from foundation_ai.agentic.stores import SessionHeader, conversation_of
from foundation_ai.agentic.turn import PhaseHooks
from foundation_ai.agentic.turn.hooks import Allow, Ask, Deny
from foundation_ai.agentic.turn.machine import quiet_ok
from foundation_ai.errors import TurnFailedError
from foundation_ai.types import SessionRecord, StopReason


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def boom() -> str:
    """Always fails."""
    raise RuntimeError("no luck")


class DownFrom(InMemorySessionStore):
    """An in-memory store whose appends fail from the ``n``-th on (a real ``StoreError``), until
    ``up()``."""

    def __init__(self, n: int | None) -> None:
        super().__init__()
        self.n, self.calls = n, 0

    def up(self) -> None:
        self.n = None

    def append(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None:
        self.calls += 1
        if self.n is not None and self.calls >= self.n:
            raise StoreError("disk full (simulated)", path="down", retryable=True)
        super().append(session_id, records, header)


def plain(x: Any) -> Any:
    """``x`` as builtins without what differs between two runs (ids, timestamps)."""
    if isinstance(x, msgspec.Struct):
        x = msgspec.to_builtins(x)
    if isinstance(x, dict):
        return {
            k: (len(v) if k == "message_ids" else plain(v))
            for k, v in x.items()
            if k not in ("id", "timestamp")
        }
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    return x


Scenario = tuple[list[Any], dict[str, Any], Callable[[AgentSession], None] | None]


def scenarios() -> dict[str, Scenario]:
    def follow_up_later(agent: AgentSession) -> None:
        agent.model.extend([say("first"), hook(lambda: agent.follow_up("and then?"))], say("second"))

    def steer_later(agent: AgentSession) -> None:
        agent.model.extend([say("a long answer"), hook(lambda: agent.steer("shorter"))], say("short"))

    def abort_later(agent: AgentSession) -> None:
        agent.model.extend([say("partial"), hook(agent.abort), say("never")])

    return {
        "answer": ([say("hello there")], {}, None),
        "tool call, then answer": ([[call("add", {"a": 1, "b": 2}, id="c1")], say("3")], {}, None),
        "two calls in one response": (
            [
                [
                    say("Adding."),
                    call("add", {"a": 1, "b": 2}, id="c1"),
                    call("add", {"a": 3, "b": 4}, id="c2"),
                ],
                say("3 and 7"),
            ],
            {},
            None,
        ),
        "unknown tool and bad arguments": (
            [[call("nope", {}, id="c1"), call("add", {"a": "x"}, id="c2")], say("sorry")],
            {},
            None,
        ),
        "a tool that raises": ([[call("boom", {}, id="c1")], say("it failed")], {}, None),
        "vacuous answer retried": ([say("..."), say("fine")], {}, None),
        "provider error": ([[say("partial"), fail("HTTP 500 boom")]], {}, None),
        "refusal": ([Reply([say("I cannot help with that.")], stop_reason=StopReason.REFUSAL)], {}, None),
        "follow-up queued before the turn": ([say("one"), say("two")], {}, lambda a: a.follow_up("more?")),
        "follow-up queued while answering": ([], {}, follow_up_later),
        "steering queued before the turn": ([say("brief")], {}, lambda a: a.steer("be brief")),
        "steered while generating": ([], {}, steer_later),
        "aborted while generating": ([], {}, abort_later),
        "iteration limit": ([[call("add", {"a": 1, "b": 2}, id="c1")], say("3")], {"inner": 1}, None),
        "token budget": ([[call("add", {"a": 1, "b": 2}, id="c1")], say("3")], {"budget": 5}, None),
        "tool choice per generation": (
            [[call("add", {"a": 1, "b": 2}, id="c1")], say("3")],
            {"choice": ["add", "none"]},
            None,
        ),
        "rate limited, then the fallback model": (
            [rate_limited()],
            {"fallback": [say("from the fallback")]},
            None,
        ),
        "silent context overflow": ([say("too long"), say("still")], {"window": 5}, None),
        "loop detected": ([[call("add", {"a": 1, "b": 1}, id=f"c{i}")] for i in range(5)], {}, None),
        "a gate denies one call": (
            [[call("add", {"a": 1, "b": 2}, id="c1"), call("boom", {}, id="c2")], say("only 3")],
            {"gate": lambda req: Deny("not now") if req.call.name == "boom" else Allow()},
            None,
        ),
        "a gate asks: the turn pauses": (
            [[call("add", {"a": 1, "b": 2}, id="c1")], say("3")],
            {"gate": lambda req: Ask()},
            None,
        ),
    }


def build(script: list[Any], opts: dict[str, Any], store: Any, general: bool) -> AgentSession:
    model = ScriptedModel(script, input_price=1.0, output_price=2.0, context_window=opts.get("window"))
    b = AgentSession.builder(model).with_tools(add, boom).with_store(store).with_system_prompt("Be brief.")
    if "inner" in opts:
        b = b.with_max_iterations(inner=opts["inner"])
    if "budget" in opts:
        b = b.with_token_budget(opts["budget"])
    if "fallback" in opts:
        b = b.with_fallback_models(ScriptedModel(opts["fallback"], name="fallback"))
    if "gate" in opts:
        b = b.with_tool_gate(opts["gate"])
    if general:
        b = b.with_phase_hooks(PhaseHooks())  # any phase hook: the general driver
    return b.build()


def run(agent: AgentSession, prompt: str = "1+2?", choice: Any = None) -> Any:
    try:
        return agent.run_turn(prompt, tool_choice=choice)
    except TurnFailedError as exc:
        return exc.turn


def observed(agent: AgentSession, turn: Any, store: InMemorySessionStore) -> dict[str, Any]:
    return {
        "outcome": turn.outcome,
        "error": plain(turn.error) if turn.error is not None else None,
        "records": plain(turn.records),
        "summary": plain(turn.summary),
        "usage": plain(turn.usage()),
        "ledger": plain(agent.ledger.total),
        "messages": plain(agent.messages),
        "stored": plain(store.load(agent.session_id)),
        "pending": plain(agent.pending_records),
        "requests": plain(agent.model.interactions),  # what each generation was sent
        "params": plain(agent.model.params),
    }


@pytest.mark.parametrize("name", list(scenarios()))
def test_the_quiet_driver_gives_the_same_turn_as_the_general_one(name: str) -> None:
    script, opts, setup = scenarios()[name]
    seen = []
    for general in (False, True):
        store = InMemorySessionStore()
        agent = build(list(script), opts, store, general)
        assert quiet_ok(agent) is not general
        if setup is not None:
            setup(agent)
        seen.append(observed(agent, run(agent, choice=opts.get("choice")), store))
    quiet, full = seen
    assert quiet == full
    assert quiet["records"]  # the turn did something: the comparison is not vacuous


@pytest.mark.parametrize("down_from", [1, 2, 3, 4])
def test_a_failing_store_fails_the_turn_at_the_same_point_on_both_drivers_and_loses_nothing(
    down_from: int,
) -> None:
    """The writes of a tool-call turn: the prompt, the call, its result, then the answer (the
    quiet driver writes the answer and the ``Summary`` at once; the general one in two writes).
    The store goes down at one of them and stays down for the rest of the turn."""
    seen = []
    for general in (False, True):
        store = DownFrom(down_from)
        agent = build(
            [[call("add", {"a": 1, "b": 2}, id="c1")], say("3"), say("caught up")], {}, store, general
        )
        turn = run(agent)
        assert turn.outcome is TurnOutcome.Failed and turn.error.kind == "store"
        assert isinstance(turn.records[-1], SessionRecord.FailedAction)
        assert isinstance(turn.records[-2], SessionRecord.Summary)
        seen.append(observed(agent, turn, store))
        # nothing lost: what the store holds, then what is pending, is the whole conversation
        held = conversation_of([*store.load(agent.session_id), *agent.pending_records])
        assert plain(held) == plain(agent.messages)
        store.up()
        assert run(agent, "still there?").ok
        assert conversation_of(store.load(agent.session_id)) == agent.messages
    quiet, full = seen
    assert quiet == full
    # where the failure hit: the tool ran only when its call was stored
    results = [m["content"]["content"] for m in quiet["messages"] if m.get("type") == "tool_result"]
    assert ("3" in results) is (down_from > 2)


def test_the_last_write_of_a_quiet_turn_carries_the_answer_with_its_summary() -> None:
    store = DownFrom(None)
    agent = build([[call("add", {"a": 1, "b": 2}, id="c1")], say("3")], {}, store, general=False)
    assert run(agent).ok
    assert store.calls == 4  # the prompt, the call, the result, then the answer and the Summary
    stored = store.load(agent.session_id)
    assert isinstance(stored[-1], SessionRecord.Summary) and stored[-1].message_count == 4
    assert isinstance(stored[-2], SessionRecord.Conversation) and stored[-2].message.text() == "3"


def test_a_turns_usage_stays_its_own_after_the_next_turn() -> None:
    """``Turn.usage()`` is built from the ledger on first need: asked after the session ran
    another turn, it still reports that turn's generations only."""
    store = InMemorySessionStore()
    agent = build([[call("add", {"a": 1, "b": 2}, id="c1")], say("3"), say("again")], {}, store, False)
    first = run(agent)
    right_after = agent.ledger.turn
    second = run(agent, "once more")
    assert first.usage() == right_after
    assert first.usage().output == 2 and second.usage().output == 1  # two generations, then one
    assert second.usage() == agent.ledger.turn
    assert first.summary.usage.input == right_after.input
