"""The turn loop on the deterministic ScriptedModel (issue 5, items 3, 4 and 7): context, merging,
tools, C47/C06/C28/C40, vacuous answers, overflow trimming, rate-limit fallback, failures,
iteration limits, ledger and budget."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import (
    InMemorySessionStore,
    Reply,
    ScriptedModel,
    TurnEvent,
    TurnOutcome,
    call,
    fail,
    hook,
    overflow,
    rate_limited,
    say,
    think,
    tool,
)
from foundation_ai.errors import TurnFailedError
from foundation_ai.types import (
    AgentProgress,
    AssistantMessage,
    ModelInteraction,
    ModelParams,
    SessionRecord,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolChoice,
    ToolResultMessage,
    UsageReport,
    UserMessage,
)

MODES = ["snapshot", "delta"]
RAN: list[tuple[int, int]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append((a, b))
    return a + b


def failed(run: Any) -> Any:
    """The ``Turn`` of a turn that ended without an answer (``run_turn`` raises
    ``TurnFailedError`` carrying it)."""
    with pytest.raises(TurnFailedError) as caught:
        run()
    return caught.value.turn


def build(model: Any, **kw: Any) -> AgentSession:
    b = AgentSession.builder(model).with_tools(add).with_store(kw.pop("store", InMemorySessionStore()))
    for k, v in kw.items():
        b = getattr(b, f"with_{k}")(*v) if isinstance(v, tuple) else getattr(b, f"with_{k}")(v)
    return b.build()


def check_pairs(messages: list[Any]) -> None:
    """C40: every tool call is followed by exactly its result before the next user message."""
    open_calls: list[str] = []
    for m in messages:
        if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall):
            open_calls.append(m.content.id)
        elif isinstance(m, ToolResultMessage):
            assert m.tool_call_id in open_calls, f"result without call: {m.tool_call_id}"
            open_calls.remove(m.tool_call_id)
        elif isinstance(m, UserMessage):
            assert not open_calls, f"user message while calls are open: {open_calls}"
    assert not open_calls


@pytest.mark.parametrize("mode", MODES)
def test_turn_with_a_tool_call(mode: str) -> None:
    RAN.clear()
    m = ScriptedModel(
        [[say("Let me add those numbers."), call("add", {"a": 2, "b": 40})], say("The sum is 42.")],
        chunk_mode=mode,
    )  # type: ignore[arg-type]
    agent = build(m, system_prompt="Be brief.", soul="A calm accountant.")
    turn = agent.run_turn("What is 2 + 40?")
    assert turn.outcome is TurnOutcome.Completed and turn.ok and turn.stop_reason == StopReason.STOP
    assert RAN == [(2, 40)]
    assert turn.text() == "The sum is 42."
    assert [c.arguments for c in turn.tool_calls()] == [{"a": 2, "b": 40}]
    assert [r.content for r in turn.tool_results()] == [TextContent("42")]
    msgs = turn.messages()
    # one persisted message per output, whatever the chunk mode
    assert [type(x).__name__ for x in msgs] == [
        "Messages.User",
        "Messages.Assistant",
        "Messages.Assistant",
        "Messages.ToolResult",
        "Messages.Assistant",
    ]
    assert msgs[1].content == TextContent("Let me add those numbers.")  # type: ignore[union-attr]
    assert msgs[4].stop_reason == StopReason.STOP  # type: ignore[union-attr]
    # system prompt and soul ride on the interaction, never as messages; context oldest-first
    i2: ModelInteraction = m.interactions[1]
    assert i2.system_prompt == "Be brief." and i2.soul == "A calm accountant."
    assert [x.id for x in i2.messages] == [x.id for x in msgs[:4]]
    assert i2.tools_shed.functions()[0].name == "add"
    # cumulative usage: the two generations' last reports summed
    u = turn.usage()
    assert u.input == 10 + 40 and u.output == turn.summary.usage.output
    summary = [r for r in turn.records if isinstance(r, SessionRecord.Summary)]
    assert len(summary) == 1 and summary[0].message_count == 5
    assert turn.summary.generations == 2
    assert agent.messages == msgs


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("streaming", [False, True])
def test_preamble_then_tool_calls_is_not_final(mode: str, streaming: bool) -> None:
    """C47: whitespace/preamble text then tool calls: the tools run and the loop continues,
    streaming and not."""
    RAN.clear()
    m = ScriptedModel(
        [
            [say(" "), call("add", {"a": 1, "b": 1})],
            [say("I will call a tool:"), call("add", {"a": 2, "b": 2})],
            say("Done: 2 and 4."),
        ],
        chunk_mode=mode,
    )  # type: ignore[arg-type]
    agent = build(m)
    if streaming:
        stream = agent.run_turn_stream("go")
        events = list(stream.events())
        turn = stream.turn
        assert isinstance(events[-1], TurnEvent.Done)
    else:
        turn = agent.run_turn("go")
    assert RAN == [(1, 1), (2, 2)]
    assert turn.text() == "Done: 2 and 4."
    assert m.remaining == 0


def test_truncated_call_is_reported_to_the_model_and_the_turn_goes_on() -> None:
    RAN.clear()
    m = ScriptedModel(
        [
            Reply([call("add", None, raw_arguments='{"a": 1, "b"')], stop_reason=StopReason.LENGTH),
            call("add", {"a": 1, "b": 2}),
            say("3"),
        ]
    )
    turn = build(m).run_turn("1+2?")
    assert RAN == [(1, 2)]
    first = turn.tool_results()[0]
    assert first.is_error and "not a complete JSON object" in (first.error_detail or "")
    # the model saw the error result in its next request
    seen = m.interactions[1].messages[-1]
    assert isinstance(seen, ToolResultMessage) and seen.is_error
    assert turn.text() == "3"


def test_validation_error_goes_back_and_turn_continues() -> None:
    RAN.clear()
    m = ScriptedModel([call("add", {"a": "one"}), call("add", {"a": 1, "b": 1}), say("2")])
    turn = build(m).run_turn("1+1")
    r = turn.tool_results()[0]
    assert (
        r.is_error
        and "$.a" in (r.error_detail or "")
        and '"b" is a required property' in (r.error_detail or "")
    )
    assert RAN == [(1, 1)] and turn.ok


@pytest.mark.parametrize("mode", MODES)
def test_vacuous_answer_retracted_and_retried_once(mode: str) -> None:
    m = ScriptedModel([say("..."), say("Real answer.")], chunk_mode=mode)  # type: ignore[arg-type]
    stream = build(m).run_turn_stream("hi")
    events = list(stream.events())
    retracts = [e for e in events if isinstance(e, TurnEvent.Retract)]
    assert len(retracts) == 1 and "vacuous" in retracts[0].reason
    assert stream.turn.text() == "Real answer."
    # the vacuous output is not persisted
    assert all(x.id not in retracts[0].message_ids for x in stream.turn.messages())


def test_second_vacuous_answer_is_accepted() -> None:
    m = ScriptedModel([say(""), say("!"), say("never")])
    turn = build(m).run_turn("hi")
    assert turn.ok and turn.text() == "!" and m.remaining == 1


def _long_history_model() -> ScriptedModel:
    return ScriptedModel(
        [
            # exchange 1: thinking + tool call + result + answer
            [think("need to add", signature="sig1"), call("add", {"a": 1, "b": 1}, id="call_1")],
            say("2"),
            # exchange 2
            [think("again", signature="sig2"), call("add", {"a": 2, "b": 2}, id="call_2")],
            say("4"),
            # exchange 3: overflow once, then answer
            overflow(),
            say("6"),
        ]
    )


def test_overflow_drops_oldest_whole_exchanges_and_retries() -> None:
    m = _long_history_model()
    agent = build(m)
    agent.run_turn("1+1")
    agent.run_turn("2+2")
    stream = agent.run_turn_stream("3+3")
    items = list(stream)
    turn = stream.turn
    assert turn.ok and turn.text() == "6"
    assert any(isinstance(i.value, AgentProgress.ProcessingMemory) for i in items if hasattr(i, "value"))
    retry = m.interactions[-1]
    before = m.interactions[-2]
    assert len(retry.messages) < len(before.messages)
    # the first whole exchange (prompt, thinking, call, result, answer) is gone; nothing is split
    first = retry.messages[0]
    assert isinstance(first, UserMessage) and first.content == TextContent("2+2")
    ids = {x.id for x in retry.messages}
    kinds = [x.content for x in retry.messages if isinstance(x, AssistantMessage)]
    assert any(isinstance(k, ThinkingContent) and k.signature == "sig2" for k in kinds)
    assert not any(isinstance(k, ThinkingContent) and k.signature == "sig1" for k in kinds)
    assert not any(isinstance(k, ToolCall) and k.id == "call_1" for k in kinds)
    assert not any(isinstance(x, ToolResultMessage) and x.tool_call_id == "call_1" for x in retry.messages)
    check_pairs(list(retry.messages))
    assert len(ids) == len(retry.messages)
    # the stored history is untouched
    assert len(agent.messages) == 5 + 5 + 2


def test_overflow_with_nothing_left_to_drop_fails() -> None:
    m = ScriptedModel([overflow()])
    agent = build(m)
    stream = agent.run_turn_stream("huge prompt")
    events = list(stream.events())
    assert isinstance(events[-1], TurnEvent.Failed)
    assert events[-1].error.kind == "context_overflow"
    assert stream.turn.outcome is TurnOutcome.Failed


def test_silent_overflow_by_usage_trims_and_retries() -> None:
    m = ScriptedModel(
        [say("a"), Reply([say("garbled")], usage=UsageReport.of(input=5000, output=1)), say("fine")],
        context_window=4096,
    )
    agent = build(m)
    agent.run_turn("first")
    turn = agent.run_turn("second")
    assert turn.text() == "fine"
    assert m.interactions[-1].messages[0].content == TextContent("second")  # type: ignore[union-attr]


def test_rate_limit_moves_to_fallback_through_circuit_breaker() -> None:
    primary = ScriptedModel([rate_limited(), say("never used")], name="primary")
    backup = ScriptedModel([say("from backup"), say("backup again")], name="backup")
    agent = build(primary, fallback_models=(backup,))
    turn = agent.run_turn("hi")
    assert turn.ok and turn.text() == "from backup"
    assert turn.messages()[-1].model.name() == "backup"  # type: ignore[union-attr]
    # the primary's breaker is open: the next turn goes straight to the backup
    assert agent.run_turn("again").text() == "backup again"
    assert primary.remaining == 1


def test_rate_limited_everywhere_fails() -> None:
    agent = build(
        ScriptedModel([rate_limited()]),
        fallback_models=(ScriptedModel([fail("Error 429: rate_limit_exceeded")]),),
    )
    turn = failed(lambda: agent.run_turn("hi"))
    assert turn.outcome is TurnOutcome.Failed and turn.error is not None and turn.error.kind == "rate_limited"


@pytest.mark.parametrize("mode", MODES)
def test_provider_error_fails_turn_failed_action_not_persisted(mode: str) -> None:
    store = InMemorySessionStore()
    m = ScriptedModel(
        [[say("partial answer that"), fail("HTTP 500: internal server error")]], chunk_mode=mode
    )  # type: ignore[arg-type]
    agent = build(m, store=store)
    stream = agent.run_turn_stream("hi")
    events = list(stream.events())
    texts = "".join(e.text for e in events if isinstance(e, TurnEvent.Text))
    assert texts == "partial answer that"
    assert any(isinstance(e, TurnEvent.Retract) for e in events)
    last = events[-1]
    assert isinstance(last, TurnEvent.Failed)
    assert last.error.kind == "provider" and "HTTP 500" in last.error.message
    assert [e for e in events if isinstance(e, TurnEvent.Done | TurnEvent.Failed)] == [last]
    assert isinstance(stream.turn.records[-1], SessionRecord.FailedAction)
    stored = agent.history()
    assert not any(isinstance(r, SessionRecord.FailedAction) for r in stored)
    assert isinstance(stored[-1], SessionRecord.Summary)


def test_backend_that_raises_is_a_provider_failure() -> None:
    class Broken(ScriptedModel):
        async def astream(self, interaction: Any, params: Any = None) -> Any:  # type: ignore[override]
            raise RuntimeError("socket closed")
            yield  # pragma: no cover

    turn = failed(lambda: build(Broken()).run_turn("hi"))
    assert turn.outcome is TurnOutcome.Failed and "socket closed" in (
        turn.error.message if turn.error else ""
    )


def test_inner_iteration_limit() -> None:
    m = ScriptedModel([call("add", {"a": 1, "b": 1})] * 10)
    turn = failed(lambda: build(m, max_iterations=(3, 10)).run_turn("loop forever"))
    assert turn.outcome is TurnOutcome.IterationLimit
    assert turn.error is not None and turn.error.kind == "iteration_limit"
    assert len(turn.tool_results()) == 3 and m.remaining == 7
    check_pairs(turn.messages())


def test_follow_ups_and_outer_iteration_limit() -> None:
    agent_box: list[AgentSession] = []
    m = ScriptedModel(
        [
            [hook(lambda: agent_box[0].follow_up("and then?")), say("one")],
            [hook(lambda: agent_box[0].follow_up("more?")), say("two")],
            say("three"),
        ]
    )
    agent = build(m, max_iterations=(25, 2))
    agent_box.append(agent)
    turn = failed(lambda: agent.run_turn("start"))
    users = [x.content.content for x in turn.messages() if isinstance(x, UserMessage)]  # type: ignore[union-attr]
    # the first follow-up is an outer iteration; the second would exceed outer=2
    assert users == ["start", "and then?"]
    assert turn.outcome is TurnOutcome.IterationLimit
    assert [x.content.content for x in turn.messages() if isinstance(x, AssistantMessage)] == ["one", "two"]  # type: ignore[union-attr]
    # the follow-up left over goes with the next prompt
    m.extend(say("four"))
    turn2 = agent.run_turn("next")
    users2 = [x.content.content for x in turn2.messages() if isinstance(x, UserMessage)]  # type: ignore[union-attr]
    assert users2 == ["next", "more?"] and turn2.ok


def test_follow_ups_queued_before_a_turn_go_with_the_prompt() -> None:
    m = ScriptedModel([say("one")])
    agent = build(m)
    agent.follow_up("and then?")
    turn = agent.run_turn("start")
    assert [x.content.content for x in turn.messages() if isinstance(x, UserMessage)] == [
        "start",
        "and then?",
    ]  # type: ignore[union-attr]


def test_progress_hints() -> None:
    m = ScriptedModel([call("add", {"a": 1, "b": 2}), say("3")])
    progress = [
        e.progress for e in build(m).run_turn_stream("x").events() if isinstance(e, TurnEvent.Progress)
    ]
    kinds = [type(p).__name__ for p in progress]
    for k in (
        "Initializing",
        "Generating",
        "ToolCallRequested",
        "ExecutingTools",
        "FlushingRecords",
        "TurnComplete",
    ):
        assert f"AgentProgress.{k}" in kinds
    done = [p for p in progress if isinstance(p, AgentProgress.ExecutingTools)]
    assert (done[0].total, done[-1].completed) == (1, 1)


def test_ledger_totals_and_estimated_cost() -> None:
    m = ScriptedModel(
        [Reply([say("hi")], usage=UsageReport.of(input=1000, output=500, cache_read=200))],
        input_price=2.0,
        output_price=10.0,
    )
    agent = build(m)
    turn = agent.run_turn("x")
    assert agent.ledger.total.input == 1000 and agent.ledger.total.cache_read == 200
    cost = agent.ledger.total.cost
    assert cost.status.value == "estimated"
    assert cost.total == pytest.approx((1000 * 2 + 500 * 10 + 200 * 2) / 1e6)
    assert turn.summary.usage.cost_usd == pytest.approx(cost.total)
    assert agent.ledger.tokens == 1700


def test_token_budget_exhausted() -> None:
    m = ScriptedModel(
        [Reply([call("add", {"a": 1, "b": 1})], usage=UsageReport.of(input=80, output=30)), say("never")]
    )
    stream = build(m, token_budget=100).run_turn_stream("x")
    events = list(stream.events())
    assert isinstance(events[-1], TurnEvent.Failed) and events[-1].error.kind == "budget_exhausted"
    turn = stream.turn
    assert turn.outcome is TurnOutcome.BudgetExhausted
    check_pairs(turn.messages())  # the call got its result before the loop stopped
    assert m.remaining == 1


def test_cost_budget() -> None:
    m = ScriptedModel(
        [Reply([call("add", {"a": 1, "b": 1})], usage=UsageReport.of(input=1e6)), say("x")], input_price=1.0
    )
    agent = (
        AgentSession.builder(m)
        .with_tools(add)
        .with_store(InMemorySessionStore())
        .with_token_budget(max_cost_usd=0.5)
        .build()
    )
    assert failed(lambda: agent.run_turn("x")).outcome is TurnOutcome.BudgetExhausted


def test_ask_and_tool_choice_first_generation_only() -> None:
    m = ScriptedModel([call("add", {"a": 3, "b": 4}), say("7")])
    agent = build(m, params=ModelParams(temperature=0.0))
    answer = agent.ask("3+4", tool_choice=ToolChoice.Function("add"))
    assert str(answer) == "7" and answer.turn.ok and answer.usage.output > 0
    assert m.interactions[0].tool_choice == ToolChoice.Function("add")
    assert m.interactions[1].tool_choice is None
    assert m.params[0] == ModelParams(temperature=0.0)


def test_ask_answer_equals_its_text_and_says_when_it_was_cut() -> None:
    agent = build(ScriptedModel([say("yes"), Reply([say("The answer is")], stop_reason=StopReason.Length())]))
    answer = agent.ask("Yes or no?")
    assert answer == "yes" and answer != "no" and hash(answer) == hash("yes")
    assert "yes" == answer  # noqa: SIM300 - str.__eq__ defers to Answer.__eq__
    assert not answer.truncated
    cut = agent.ask("Why?")
    assert cut == "The answer is" and cut.truncated  # an incomplete text is returned, flagged


def test_ask_raises_instead_of_an_empty_answer_cut_at_max_tokens() -> None:
    """A reasoning model can spend every ``max_tokens`` on reasoning: the answer is empty with
    stop ``Length``. ``ask`` raises ``TurnFailedError(kind="length")`` rather than return ``""``;
    ``run_turn`` returns the turn as it is."""
    cut = Reply([think("pondering"), say("")], stop_reason=StopReason.Length())
    agent = build(ScriptedModel([cut] * 6))  # a vacuous answer is retried once: 2 per turn
    with pytest.raises(TurnFailedError, match="cut at max_tokens before any text") as err:
        agent.ask("Hi")
    assert err.value.kind == "length"
    with pytest.raises(TurnFailedError):
        agent.ask("Hi", output_type=str)
    turn = agent.run_turn("Hi")
    assert turn.text() == "" and turn.ok


async def test_async_twins() -> None:
    m = ScriptedModel([call("add", {"a": 1, "b": 2}), say("3"), say("again"), say("streamed")])
    agent = build(m)
    turn = await agent.arun_turn("1+2")
    assert turn.text() == "3"
    assert (await agent.aask("more")).text == "again"
    texts = [e.text async for e in agent.arun_turn_stream("s").events() if isinstance(e, TurnEvent.Text)]
    assert "".join(texts) == "streamed"


async def test_blocking_call_inside_running_loop_uses_a_thread() -> None:
    agent = build(ScriptedModel([say("ok")]))
    turn = await asyncio.to_thread(agent.run_turn, "x")
    assert turn.text() == "ok"
    assert agent.run_turn is not None
    m2 = ScriptedModel([say("inside")])
    assert build(m2).run_turn("y").text() == "inside"  # called from the event loop thread


def test_one_turn_at_a_time() -> None:
    from foundation_ai.errors import FoundationAIError

    agent = build(ScriptedModel([say("a"), say("b")]))
    s = iter(agent.run_turn_stream("x"))
    next(s)  # the turn is running
    with pytest.raises(FoundationAIError):
        agent.run_turn("y")
    list(s)
    agent.run_turn_stream("never iterated")  # creating a stream does not hold the session
    assert agent.run_turn("z").text() == "b"


def test_a_blocking_turn_from_a_second_thread_is_refused_with_the_typed_error() -> None:
    """Two threads calling ``run_turn`` on one session: the second used to get asyncio's
    ``RuntimeError: This event loop is already running`` and "coroutine was never awaited"
    warnings; it now gets ``FoundationAIError`` at once and the first turn is unharmed."""
    import threading
    import warnings

    from foundation_ai.agentic import hook
    from foundation_ai.errors import FoundationAIError

    # the first turn holds its model call until the second call was refused (no timing to
    # depend on, however loaded the machine); the hook blocks only the first turn's own loop
    in_model, refused = threading.Event(), threading.Event()
    agent = build(ScriptedModel([[hook(lambda: (in_model.set(), refused.wait(30))), say("one")], say("two")]))
    results: dict[str, Any] = {}

    def first() -> None:
        results["first"] = agent.run_turn("slow").text()

    t = threading.Thread(target=first)
    t.start()
    assert in_model.wait(30)  # the first thread's blocking turn is calling its model
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine ... was never awaited"
        with pytest.raises(FoundationAIError, match="a turn is already running"):
            agent.run_turn("fast")
    refused.set()
    t.join()
    assert results["first"] == "one"
    assert agent.run_turn("again").text() == "two"  # the session is usable afterwards


def test_builder_accepts_a_provider_router() -> None:
    from foundation_ai.errors import ConfigurationError
    from foundation_ai.router import Provider, ProviderRouter

    a = ScriptedModel([rate_limited()], name="model-a")
    b = ScriptedModel([say("from b")], name="model-b")
    router = ProviderRouter([Provider.of(a, "pa"), Provider.of(b, "pb")], default="model-a")
    agent = (
        AgentSession.builder(router)
        .with_fallback_models("model-b")
        .with_store(InMemorySessionStore())
        .build()
    )
    assert agent.model is a and agent.models[1] is b
    turn = agent.run_turn("hi")
    assert turn.text() == "from b"
    direct = AgentSession.builder(router).with_model_id("model-b").with_store(InMemorySessionStore()).build()
    assert direct.model is b
    with pytest.raises(ConfigurationError):
        AgentSession.builder(ScriptedModel()).with_fallback_models("model-b").build()
    with pytest.raises(ConfigurationError):
        AgentSession.builder(object()).with_store(InMemorySessionStore()).build()


def test_tool_choice_list_applies_to_the_first_generations() -> None:
    m = ScriptedModel([call("add", {"a": 1, "b": 1}), say("2")])
    agent = build(m)
    agent.run_turn("1+1", tool_choice=[ToolChoice.Function("add"), ToolChoice.None_()])
    assert [i.tool_choice for i in m.interactions] == [ToolChoice.Function("add"), ToolChoice.None_()]


def test_overflow_inside_one_long_turn_drops_its_oldest_rounds() -> None:
    """No older exchange to drop: the oldest tool rounds of the running turn go (each with its
    thinking, call and result), the prompt stays, and the stored history is untouched."""
    m = ScriptedModel(
        [
            [think("r1", signature="s1"), call("add", {"a": 1, "b": 1}, id="r1")],
            [think("r2", signature="s2"), call("add", {"a": 2, "b": 2}, id="r2")],
            [think("r3", signature="s3"), say("and a third"), call("add", {"a": 3, "b": 3}, id="r3")],
            overflow(),
            overflow(),
            say("done"),
        ]
    )
    agent = build(m)
    turn = agent.run_turn("add things")
    assert turn.ok and turn.text() == "done"
    first_retry, second_retry = m.interactions[4], m.interactions[5]
    for inter, kept in ((first_retry, {"r2", "r3"}), (second_retry, {"r3"})):
        msgs = list(inter.messages)
        assert isinstance(msgs[0], UserMessage) and msgs[0].content == TextContent("add things")
        calls = {
            x.content.id for x in msgs if isinstance(x, AssistantMessage) and isinstance(x.content, ToolCall)
        }
        sigs = {
            x.content.signature
            for x in msgs
            if isinstance(x, AssistantMessage) and isinstance(x.content, ThinkingContent)
        }
        assert calls == kept and sigs == {"s" + k[1] for k in kept}
        check_pairs(msgs)
    assert agent.context_cut is None  # only for the running turn
    assert len(agent.messages) == 1 + 3 + 3 + 4 + 1  # nothing dropped from the history


def test_overflow_with_a_single_round_left_fails() -> None:
    m = ScriptedModel([call("add", {"a": 1, "b": 1}), overflow()])
    turn = failed(lambda: build(m).run_turn("x"))
    assert (
        turn.outcome is TurnOutcome.Failed
        and turn.error is not None
        and turn.error.kind == "context_overflow"
    )
