"""What a session and a turn hold for the cycle collector: at 10,000 concurrent sessions every
object the collector tracks is scanned by each full collection, so an idle session and a turn
waiting for its model keep only the objects that carry state (``docs/turn-loop.md``, "What a
turn costs"). These tests check that the shared empty values a turn starts with are never
written, that the untracked parts hold no tracked object, that a waiting turn holds no empty
container, and that sharing the default hooks and the steering lock changes nothing a user sees.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import AsyncIterator
from typing import Any

from foundation_ai import AgentSession
from foundation_ai.agentic import InMemorySessionStore, Reply, ScriptedModel, call, say, tool
from foundation_ai.agentic.turn import TurnState
from foundation_ai.agentic.turn.hooks import Allow, Ask, Deny
from foundation_ai.agentic.turn.state import DISCARD, NO_DECISIONS, NOTHING_LIVE
from foundation_ai.types import Messages, ToolResultMessage, UsageReport


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _endless() -> ScriptedModel:
    """A model that calls ``add`` once per round, then answers "42"."""
    calling, answer = call("add", {"a": 2, "b": 40}), say("42")

    class Endless(ScriptedModel):
        def _next_reply(self, interaction: Any) -> Any:  # type: ignore[override]
            last = interaction.messages[-1]
            return Reply([answer if isinstance(last, ToolResultMessage) else calling])

    return Endless(chunk_words=0, record=0)


class Gated:
    """A model whose stream waits for ``gate`` before its first chunk."""

    chunk_mode = "snapshot"

    def __init__(self, inner: ScriptedModel, gate: asyncio.Event) -> None:
        self.inner, self.gate = inner, gate
        self.descriptor, self.model_id = inner.descriptor, inner.model_id

    async def astream(self, interaction: Any, params: Any = None) -> AsyncIterator[Any]:
        await self.gate.wait()
        async for item in self.inner.astream(interaction, params):
            yield item


def _session(model: Any, **hooks: Any) -> AgentSession:
    builder = AgentSession.builder(model).with_tools(add).with_store(InMemorySessionStore())
    if "gate" in hooks:
        builder = builder.with_tool_gate(hooks["gate"])
    return builder.build()


def test_the_shared_empty_values_of_a_turn_stay_empty_after_every_kind_of_turn() -> None:
    asks = {"n": 0}

    def gate(request: Any) -> Any:
        asks["n"] += 1
        return Ask("ok?") if asks["n"] == 1 else Allow()

    async def go() -> None:
        plain = _session(_endless())
        assert (await plain.arun_turn("one")).text() == "42"
        plain.follow_up("and again")
        assert (await plain.arun_turn("two")).text() == "42"
        async for _ in plain.run_turn_stream("streamed").events():
            pass
        asking = _session(_endless(), gate=gate)
        paused = await asking.arun_turn("needs approval")
        assert [c.name for c in paused.awaiting] == ["add"]
        done = await asking.aapprove(paused.awaiting[0].id)
        assert done is not None and done.text() == "42"
        denying = _session(_endless(), gate=lambda request: Deny("no"))
        denied = await denying.arun_turn("denied")
        assert "denied" in denied.tool_results()[0].error_detail  # type: ignore[operator]

    asyncio.run(go())
    assert NOTHING_LIVE == {} and NO_DECISIONS == {}
    assert len(DISCARD) == 0 and list(DISCARD) == []


def test_a_fresh_turn_state_holds_no_tracked_container_it_has_not_filled() -> None:
    state = TurnState((Messages.user("hi"),), None, emit=False, out=DISCARD)
    gc.collect()  # tuples holding only untracked values stop being tracked
    for name in ("prompts", "choices", "calls", "results", "awaiting", "output_errors", "live", "decisions"):
        assert not gc.is_tracked(getattr(state, name)), name
    assert state.out is DISCARD
    assert isinstance(TurnState(["x"], None).out, list)  # a driver that yields gets its own list


def test_the_ledger_the_breaker_and_idle_steering_hold_nothing_the_collector_tracks() -> None:
    agent = _session(_endless())
    asyncio.run(agent.arun_turn("one"))
    ledger = agent.ledger
    assert not gc.is_tracked(agent.breaker)
    for holder in (ledger, agent.steering):  # (a slotted object's referents include its class)
        assert not [r for r in gc.get_referents(holder) if gc.is_tracked(r) and r is not type(holder)]
    assert ledger.generations == 2 and ledger.total.total_tokens > 0


def test_a_finished_turns_usage_is_fixed_while_the_ledger_goes_on() -> None:
    agent = _session(_endless())
    first = asyncio.run(agent.arun_turn("one"))
    before = first.usage()
    agent.ledger.record(UsageReport(input=1000.0, output=7.0, total_tokens=1007.0))
    assert first.usage() == before
    assert agent.ledger.total.input == before.input + 1000.0
    second = asyncio.run(agent.arun_turn("two"))
    assert second.usage() == agent.ledger.turn and first.usage() == before


def test_a_turn_waiting_for_its_model_holds_no_empty_container_and_few_objects_of_ours() -> None:
    async def go() -> None:
        gate = asyncio.Event()
        model = Gated(_endless(), gate)
        sessions = [_session(model) for _ in range(20)]
        tasks = [asyncio.ensure_future(s.arun_turn(f"session {k}")) for k, s in enumerate(sessions)]
        for _ in range(20):
            await asyncio.sleep(0)
        gc.collect()
        states = [o for o in gc.get_objects() if type(o) is TurnState]
        assert len(states) == 20
        for state in states:
            held = [r for r in gc.get_referents(state) if gc.is_tracked(r) and r is not DISCARD]  # shared
            assert not [r for r in held if isinstance(r, list | dict | tuple) and not r]
            assert state.generation is not None and state.out is DISCARD
        assert len({id(s.hooks) for s in sessions}) == 1  # the shared default
        gate.set()
        turns = await asyncio.gather(*tasks)
        assert [t.text() for t in turns] == ["42"] * 20

    asyncio.run(go())


def test_sessions_without_hooks_share_them_and_setting_hooks_on_one_builder_leaves_others_alone() -> None:
    a, b = _session(_endless()), _session(_endless())
    assert a.hooks is b.hooks and a.hooks.gate is None
    gated = _session(_endless(), gate=lambda request: Deny("no"))
    assert gated.hooks.gate is not None and a.hooks.gate is None and b.hooks.gate is None


def test_steering_queues_keep_every_message_in_order_from_many_threads() -> None:
    agent = _session(_endless())
    steering = agent.steering

    def post(k: int) -> None:
        for i in range(50):
            steering.follow_up(f"t{k} m{i}")
            steering.steer(f"t{k} s{i}")

    threads = [threading.Thread(target=post, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    follows = [m.content.content for m in steering.take_follow_ups()]  # type: ignore[attr-defined]
    steers = [m.content.content for m in steering.take_steers()]  # type: ignore[attr-defined]
    assert len(follows) == len(steers) == 200
    for k in range(4):
        assert [x for x in follows if x.startswith(f"t{k} ")] == [f"t{k} m{i}" for i in range(50)]
        assert [x for x in steers if x.startswith(f"t{k} ")] == [f"t{k} s{i}" for i in range(50)]
    assert steering.take_follow_ups() == [] and steering.take_steers() == [] and steering.idle()


def test_the_ledgers_sums_and_cost_status_follow_usage_report_addition() -> None:
    import itertools
    import random

    from foundation_ai.agentic.ledger import TokenLedger
    from foundation_ai.types import CostStatus, UsageCosting

    rng = random.Random(7)
    statuses = [CostStatus.Unknown, CostStatus.Estimated, CostStatus.Actual]

    def report(status: CostStatus) -> UsageReport:
        i, o = float(rng.randint(0, 900)), float(rng.randint(0, 90))
        cost = UsageCosting(input=i / 1e6, output=o / 1e5, total=i / 1e6 + o / 1e5, status=status)
        return UsageReport(input=i, output=o, cache_read=1.0, total_tokens=i + o + 1.0, cost=cost)

    for seq in itertools.product(statuses, repeat=3):
        ledger = TokenLedger()
        reports = [report(s) for s in seq]
        expected = UsageReport()
        for k, u in enumerate(reports):
            if k == 2:
                ledger.start_turn()
                turn_expected = UsageReport()
            ledger.record(u)
            expected = expected + u
            if k == 2:
                turn_expected = turn_expected + u
        assert ledger.total == expected, seq
        assert ledger.turn == turn_expected, seq
        assert ledger.generations == 3


def test_one_turn_at_a_time_per_session_and_sessions_do_not_block_each_other() -> None:
    from foundation_ai.errors import FoundationAIError

    async def go() -> None:
        gate = asyncio.Event()
        model = Gated(_endless(), gate)
        a, b = _session(model), _session(model)
        first = asyncio.ensure_future(a.arun_turn("first"))
        other = asyncio.ensure_future(b.arun_turn("other session"))
        for _ in range(5):
            await asyncio.sleep(0)
        try:
            await a.arun_turn("second, while the first waits")
        except FoundationAIError as exc:
            assert "already running" in str(exc)
        else:
            raise AssertionError("a second turn ran while the first held the session")
        gate.set()
        assert (await first).text() == "42" and (await other).text() == "42"
        assert (await a.arun_turn("after the first")).text() == "42"  # the guard was given back

    asyncio.run(go())


def test_blocking_turns_from_two_threads_on_one_session_one_runs_the_other_is_refused() -> None:
    from foundation_ai.errors import FoundationAIError

    started, release = threading.Event(), threading.Event()

    @tool
    def slow() -> str:
        """Wait until released."""
        started.set()
        release.wait(10)
        return "done"

    model = ScriptedModel([call("slow", {}), say("ok")])
    agent = AgentSession.builder(model).with_tools(slow).with_store(InMemorySessionStore()).build()
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(agent.run_turn("go").text()))
    worker.start()
    assert started.wait(10)
    try:
        agent.run_turn("again")
    except FoundationAIError as exc:
        results.append(type(exc).__name__)
    release.set()
    worker.join(10)
    assert sorted(results) == ["FoundationAIError", "ok"]
