"""TurnStream and TurnEvent (issue 5, item 3): raw items with `for` and `async for`, typed events
carrying only the new piece whatever the chunk mode, one ToolCall event per call, exactly one
terminal event."""

from __future__ import annotations

from typing import Any

import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import InMemorySessionStore, ScriptedModel, TurnEvent, call, hook, say, think, tool
from foundation_ai.types import AssistantMessage, SessionRecord, Stream, TextContent

MODES = ["snapshot", "delta"]


@tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text.upper()


def agent_for(model: ScriptedModel) -> AgentSession:
    return AgentSession.builder(model).with_tools(echo).with_store(InMemorySessionStore()).build()


def script(mode: str, words: int = 1) -> ScriptedModel:
    return ScriptedModel(
        [
            [think("I should echo it first."), say("Calling echo now."), call("echo", {"text": "hey there"})],
            [think("Done."), say("The echo said HEY THERE, and that is all.")],
        ],
        chunk_mode=mode,  # type: ignore[arg-type]
        chunk_words=words,
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("words", [1, 3])
def test_events_carry_only_new_pieces(mode: str, words: int) -> None:
    stream = agent_for(script(mode, words)).run_turn_stream("echo hey there")
    events = list(stream.events())
    by_id: dict[str, str] = {}
    thinking: dict[str, str] = {}
    for e in events:
        if isinstance(e, TurnEvent.Text):
            assert e.text, "no empty text events"
            by_id[e.message_id] = by_id.get(e.message_id, "") + e.text
        elif isinstance(e, TurnEvent.Thinking):
            thinking[e.message_id] = thinking.get(e.message_id, "") + e.text
    assert list(by_id.values()) == ["Calling echo now.", "The echo said HEY THERE, and that is all."]
    assert list(thinking.values()) == ["I should echo it first.", "Done."]
    # the pieces add up to exactly what was persisted
    turn = stream.turn
    persisted = [
        m for m in turn.messages() if isinstance(m, AssistantMessage) and isinstance(m.content, TextContent)
    ]
    assert [by_id[m.id] for m in persisted] == [m.content.content for m in persisted]  # type: ignore[union-attr]
    calls = [e for e in events if isinstance(e, TurnEvent.ToolCall)]
    assert len(calls) == 1 and calls[0].call.arguments == {"text": "hey there"}
    results = [e for e in events if isinstance(e, TurnEvent.ToolResult)]
    assert len(results) == 1 and results[0].result.content == TextContent("HEY THERE")
    terminal = [e for e in events if isinstance(e, TurnEvent.Done | TurnEvent.Failed)]
    assert terminal == [events[-1]] and isinstance(events[-1], TurnEvent.Done)
    assert events[-1].summary.message_count == len(turn.messages())
    # order: tool call before its result, result before the final text
    kinds = [type(e).__name__ for e in events if not isinstance(e, TurnEvent.Progress)]
    assert kinds.index("TurnEvent.ToolCall") < kinds.index("TurnEvent.ToolResult")


@pytest.mark.parametrize("mode", MODES)
def test_raw_items_are_snapshots_and_last_one_is_persisted(mode: str) -> None:
    stream = agent_for(script(mode, 2)).run_turn_stream("go")
    items = list(stream)
    assert isinstance(items[0], Stream.Init)
    last: dict[str, Any] = {}
    for it in items:
        assert not it.is_scheduling()
        if isinstance(it, Stream.Next) and isinstance(it.value, SessionRecord.Conversation):
            m = it.value.message
            if m.id in last and isinstance(m.content, TextContent):
                # a snapshot only grows
                assert m.content.content.startswith(last[m.id].content.content)
            last[m.id] = m
    persisted = stream.turn.messages()
    assert [last[m.id] for m in persisted] == persisted
    assert isinstance(items[-1].value, SessionRecord.Summary)


async def test_async_for_raw_and_events() -> None:
    agent = agent_for(script("delta"))
    items = [i async for i in agent.run_turn_stream("a")]
    assert isinstance(items[-1].value, SessionRecord.Summary)
    agent2 = agent_for(script("snapshot"))
    s = agent2.arun_turn_stream("b")
    text = ""
    async for e in s.events():
        if isinstance(e, TurnEvent.Text):
            text += e.text
    assert text == "Calling echo now.The echo said HEY THERE, and that is all."
    assert s.turn is not None and s.turn.ok


def test_stream_is_single_use() -> None:
    from foundation_ai.errors import FoundationAIError

    s = agent_for(script("delta")).run_turn_stream("x")
    list(s)
    with pytest.raises(FoundationAIError):
        list(s)


def test_sync_iteration_inside_running_loop_is_refused() -> None:
    import asyncio

    from foundation_ai.errors import FoundationAIError

    agent = agent_for(script("delta"))

    async def main() -> None:
        with pytest.raises(FoundationAIError):
            list(agent.run_turn_stream("x"))

    asyncio.run(main())


def test_abandoned_stream_releases_the_session_and_pairs_calls() -> None:
    m = script("snapshot")
    agent = agent_for(m)
    s = agent.run_turn_stream("x")
    for e in s.events():
        if isinstance(e, TurnEvent.Progress) and type(e.progress).__name__ == "AgentProgress.ExecutingTools":
            break  # the consumer walks away with a call persisted and not run
    del s
    import gc

    gc.collect()
    m.extend(say("ok"))
    # the session is usable again and the open call got an "interrupted" result
    from foundation_ai.types import ToolResultMessage

    results = [x for x in agent.messages if isinstance(x, ToolResultMessage)]
    assert results and results[0].is_error and "interrupted" in (results[0].error_detail or "")
    assert agent.run_turn("again").ok


def test_spread_items_pending_usage_and_non_assistant_data() -> None:
    """A backend may batch outputs in Stream.Spread and report GeneratingTokens; both are handled."""
    from foundation_ai.backends.base import ModelDescriptor
    from foundation_ai.types import Messages, ModelId, ModelState, StopReason, UsageReport

    mid = ModelId.Name("spready")

    class Spready:
        descriptor = ModelDescriptor(name="spready", provider="test")
        chunk_mode = "snapshot"
        model_id = mid

        async def astream(self, interaction: Any, params: Any = None) -> Any:
            a = Messages.Assistant(model=mid, content=TextContent("Hello"))
            b = Messages.Assistant(
                id=a.id, model=mid, content=TextContent("Hello there"), usage=UsageReport.of(5, 2)
            )
            yield Stream.Init()
            yield Stream.Pending(ModelState.GeneratingTokens(UsageReport.of(5, 1)))
            yield Stream.Spread([a, Messages.user("not an output")])
            yield Stream.Wait()
            yield Stream.Next(
                Messages.Assistant(
                    id=a.id, model=mid, content=b.content, usage=b.usage, stop_reason=StopReason.STOP
                )
            )
            yield Stream.Pending(ModelState.Finished())

    agent = AgentSession.builder(Spready()).with_store(InMemorySessionStore()).build()
    stream = agent.run_turn_stream("hi")
    events = list(stream.events())
    assert "".join(e.text for e in events if isinstance(e, TurnEvent.Text)) == "Hello there"
    gen = [
        e.progress
        for e in events
        if isinstance(e, TurnEvent.Progress) and "Generating" in type(e.progress).__name__
    ]
    assert any(p.tokens_so_far == 1 for p in gen)
    assert stream.turn.text() == "Hello there" and stream.turn.usage().output == 2


def test_two_steers_during_one_generation_interrupt_once() -> None:
    """Steering called from inside the model's own stream (same task) is seen at the next chunk
    boundary; both messages are sent, in order, and the interrupted output is retracted."""
    box: list[AgentSession] = []
    m = ScriptedModel(
        [
            [
                say("done"),
                hook(lambda: box[0].steer("wait, one more")),
                hook(lambda: box[0].steer("and another")),
            ],
            say("ok, both"),
        ]
    )
    agent = agent_for(m)
    box.append(agent)
    stream = agent.run_turn_stream("go")
    events = list(stream.events())
    turn = stream.turn
    from foundation_ai.types import UserMessage

    assert len([e for e in events if isinstance(e, TurnEvent.Retract)]) == 1
    assert "done" not in [x.text() for x in turn.messages()]
    users = [x.content for x in turn.messages() if isinstance(x, UserMessage)]
    assert users == [TextContent("go"), TextContent("wait, one more"), TextContent("and another")]
    assert turn.text() == "ok, both"


def test_generating_once_at_start_and_no_turn_complete_before_failed() -> None:
    """Tester defect 6: ``Generating`` came twice at the start of each generation (the loop's own
    hint plus the backend's first usage report, both at 0 tokens), and a failed turn emitted
    ``TurnComplete`` just before ``Failed``."""
    from foundation_ai.agentic import fail
    from foundation_ai.backends.base import ModelDescriptor
    from foundation_ai.types import AgentProgress, Messages, ModelId, ModelState, UsageReport

    mid = ModelId.Name("counting")

    class Counting:
        descriptor = ModelDescriptor(name="counting", provider="test")
        chunk_mode = "snapshot"
        model_id = mid

        async def astream(self, interaction: Any, params: Any = None) -> Any:
            yield Stream.Init()
            yield Stream.Pending(ModelState.GeneratingTokens(UsageReport.of(5, 0)))
            yield Stream.Next(
                Messages.Assistant(model=mid, content=TextContent("Hi"), usage=UsageReport.of(5, 1))
            )
            yield Stream.Pending(ModelState.GeneratingTokens(UsageReport.of(5, 1)))
            yield Stream.Pending(ModelState.GeneratingTokens(UsageReport.of(5, 3)))

    events = list(agent_for(Counting()).run_turn_stream("hi").events())  # type: ignore[arg-type]
    gen = [
        e.progress.tokens_so_far
        for e in events
        if isinstance(e, TurnEvent.Progress) and isinstance(e.progress, AgentProgress.Generating)
    ]
    assert gen == [0, 1, 3]
    assert isinstance(events[-2], TurnEvent.Progress) and isinstance(
        events[-2].progress, AgentProgress.TurnComplete
    )
    assert isinstance(events[-1], TurnEvent.Done)

    failed = list(agent_for(ScriptedModel([fail("boom")])).run_turn_stream("hi").events())
    assert isinstance(failed[-1], TurnEvent.Failed)
    kinds = [type(e.progress).__name__ for e in failed if isinstance(e, TurnEvent.Progress)]
    assert "AgentProgress.TurnComplete" not in kinds
    assert kinds.count("AgentProgress.Generating") == 1


def _conversation(agent: AgentSession) -> list[Any]:
    return [r.message for r in agent.history() if isinstance(r, SessionRecord.Conversation)]


def test_break_out_of_events_keeps_the_partial_output_as_aborted() -> None:
    """Tester defect 3: breaking out of ``events()`` lost the partial output and orphaned the
    prompt. Now it ends the turn like ``abort()``: partial output kept with ``Aborted``, a
    Summary persisted, the session usable at once."""
    from foundation_ai.agentic import TurnOutcome, pause
    from foundation_ai.types import StopReason, UserMessage

    m = ScriptedModel(
        [[say("first long answer"), pause(30), say("never")], say("second")], chunk_mode="delta"
    )
    agent = agent_for(m)
    stream = agent.run_turn_stream("a")
    for e in stream.events():
        if isinstance(e, TurnEvent.Text):
            break
    assert stream.turn is not None and stream.turn.outcome is TurnOutcome.Aborted
    conv = _conversation(agent)
    assert isinstance(conv[0], UserMessage) and conv[0].text() == "a"
    partial = conv[1]
    assert isinstance(partial, AssistantMessage) and isinstance(partial.stop_reason, StopReason.Aborted)
    assert partial.text() == "first "  # the piece seen before the break
    assert isinstance(agent.history()[-1], SessionRecord.Summary)
    assert agent.run_turn("b").text() == "second"
    kinds = [type(x).__name__ for x in _conversation(agent)]
    assert kinds == ["Messages.User", "Messages.Assistant", "Messages.User", "Messages.Assistant"]


def test_closing_a_stream_during_a_streamed_call_pairs_it_with_an_aborted_result() -> None:
    from foundation_ai.agentic import pause
    from foundation_ai.types import StopReason, ToolResultMessage

    from .test_agentic_loop import check_pairs

    m = ScriptedModel([[call("echo", {"text": "x"}), pause(30)], say("ok")])
    agent = agent_for(m)
    stream = agent.run_turn_stream("go")
    it = iter(stream.events())
    for e in it:
        if isinstance(e, TurnEvent.ToolCall):
            break
    stream.close()  # explicit close, the iterator still referenced
    conv = _conversation(agent)
    check_pairs(conv)
    call_msg = conv[1]
    assert isinstance(call_msg, AssistantMessage) and isinstance(call_msg.stop_reason, StopReason.Aborted)
    result = conv[2]
    assert (
        isinstance(result, ToolResultMessage) and result.is_error and "aborted" in (result.error_detail or "")
    )
    assert agent.run_turn("again").ok
    stream.close()  # idempotent


async def test_async_break_then_next_turn_at_once() -> None:
    """Tester defect 3, async path: ``arun_turn`` right after ``break`` raised "a turn is
    already running" until the event loop had closed the abandoned stream."""
    from foundation_ai.agentic import pause
    from foundation_ai.types import StopReason

    m = ScriptedModel([[say("x y z"), pause(30)], say("second"), say("third")])
    agent = agent_for(m)
    async for e in agent.run_turn_stream("a").events():
        if isinstance(e, TurnEvent.Text):
            break
    assert (await agent.arun_turn("b")).text() == "second"
    # explicit aclose (here before any generation started) waits until the turn is over
    stream = agent.run_turn_stream("c")
    async for _ in stream:
        if stream is not None and agent.messages and agent.messages[-1].text() == "c":
            break
    await stream.aclose()
    assert stream.turn is not None and stream.turn.outcome.name == "Aborted"
    assert (await agent.aask("d")).text == "third"
    conv = _conversation(agent)
    aborted = [
        x for x in conv if isinstance(x, AssistantMessage) and isinstance(x.stop_reason, StopReason.Aborted)
    ]
    assert [x.text() for x in conv if not isinstance(x, AssistantMessage)] == ["a", "b", "c", "d"]
    assert aborted and aborted[0].text() == "x "  # the one word seen before the break


def test_close_before_iterating_runs_nothing() -> None:
    agent = agent_for(ScriptedModel([say("ok")]))
    stream = agent.run_turn_stream("never sent")
    stream.close()
    assert agent.history() == []
    assert agent.run_turn("hi").ok


def test_a_turn_nobody_streams_folds_the_chunks_as_a_streamed_turn_does() -> None:
    """``arun_turn`` (nothing streamed: the loop consumes the model without an async generator
    of its own) keeps the same messages as a streamed turn: delta chunks merged, ``Spread``
    batches and non-assistant data handled, the last usage kept; a ``ModelState.Error`` fails it."""
    from foundation_ai.backends.base import ModelDescriptor
    from foundation_ai.errors import TurnFailedError
    from foundation_ai.types import Messages, ModelId, ModelState, StopReason, UsageReport

    mid = ModelId.Name("deltas")

    class Deltas:
        descriptor = ModelDescriptor(name="deltas", provider="test")
        chunk_mode = "delta"
        model_id = mid
        fail = False

        async def astream(self, interaction: Any, params: Any = None) -> Any:
            first = Messages.Assistant(model=mid, content=TextContent("Hel"), usage=UsageReport.of(5, 1))
            yield Stream.Init()
            yield Stream.Next(first)
            yield Stream.Pending(ModelState.GeneratingTokens(UsageReport.of(5, 2)))
            yield Stream.Spread(
                [
                    Messages.Assistant(
                        id=first.id, model=mid, content=TextContent("lo "), usage=UsageReport.of(5, 2)
                    ),
                    Messages.user("not an output"),
                ]
            )
            if self.fail:
                yield Stream.Pending(ModelState.Error("the server went away"))
                return
            yield Stream.Next(
                Messages.Assistant(
                    id=first.id,
                    model=mid,
                    content=TextContent("there"),
                    usage=UsageReport.of(5, 3),
                    stop_reason=StopReason.STOP,
                )
            )
            yield Stream.Pending(ModelState.Finished())

    model = Deltas()
    quiet = AgentSession.builder(model).with_store(InMemorySessionStore()).build()
    turn = quiet.run_turn("hi")
    streamed = AgentSession.builder(model).with_store(InMemorySessionStore()).build().run_turn_stream("hi")
    for _ in streamed:
        pass

    def kept(t: Any) -> list[tuple[Any, ...]]:
        return [(type(m).__name__, m.text(), getattr(m, "usage", None)) for m in t.messages()]

    assert turn.text() == "Hello there" and turn.usage().output == 3
    assert kept(turn) == kept(streamed.turn)
    model.fail = True
    with pytest.raises(TurnFailedError) as failed:
        quiet.run_turn("again")
    assert failed.value.turn.error is not None and failed.value.turn.error.kind == "provider"
    assert "the server went away" in failed.value.turn.error.message
