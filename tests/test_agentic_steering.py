"""Steering while a turn streams (issue 5, item 5): steer() interrupts generation or tool
execution at the next safe point (seen output Retracted, no call left without a result: C40),
follow_up() queues, abort() ends with Aborted + Summary keeping what was produced. Calls come
from another thread, from another task and from the consumer itself. No timed assertions: the
scripted model pauses for 30 s, so a test only finishes quickly if the interrupt works."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from foundation_ai import AgentSession
from foundation_ai.agentic import (
    InMemorySessionStore,
    ScriptedModel,
    TurnEvent,
    TurnOutcome,
    call,
    hook,
    pause,
    say,
    tool,
)
from foundation_ai.types import (
    AssistantMessage,
    MessageRole,
    Messages,
    StopReason,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

from .test_agentic_loop import check_pairs

TOOL_STARTED = threading.Event()
RELEASE = threading.Event()


@tool
async def slow_async(tag: str) -> str:
    """Wait a long time."""
    TOOL_STARTED.set()
    await asyncio.sleep(30)
    return f"slow {tag}"


@tool
async def quick(tag: str) -> str:
    """Return at once."""
    return f"quick {tag}"


@tool
def slow_sync(tag: str) -> str:
    """Block a worker thread until released."""
    TOOL_STARTED.set()
    RELEASE.wait(30)
    return f"sync {tag}"


def build(model: ScriptedModel) -> AgentSession:
    return (
        AgentSession.builder(model)
        .with_tools(slow_async, quick, slow_sync)
        .with_store(InMemorySessionStore())
        .build()
    )


def in_thread(wait_for: threading.Event, action: Any) -> threading.Thread:
    def run() -> None:
        assert wait_for.wait(10)
        action()

    t = threading.Thread(target=run)
    t.start()
    return t


def test_steer_from_another_thread_interrupts_generation() -> None:
    reached = threading.Event()
    m = ScriptedModel(
        [
            [say("Here is a long answer"), hook(reached.set), pause(30), say("never seen")],
            say("Short, as asked."),
        ],
        chunk_mode="delta",
    )
    agent = build(m)
    t = in_thread(reached, lambda: agent.steer("Stop. Be short."))
    stream = agent.run_turn_stream("Explain everything.")
    events = list(stream.events())
    t.join()
    retract = [e for e in events if isinstance(e, TurnEvent.Retract)]
    assert retract and retract[0].reason.startswith("steered")
    before = events[: events.index(retract[0])]
    assert set(retract[0].message_ids) == {e.message_id for e in before if isinstance(e, TurnEvent.Text)}
    assert "".join(e.text for e in before if isinstance(e, TurnEvent.Text)) == "Here is a long answer"
    steer_progress = [
        e for e in events if isinstance(e, TurnEvent.Progress) and "Steering" in type(e.progress).__name__
    ]
    assert steer_progress
    turn = stream.turn
    assert turn.ok and turn.text() == "Short, as asked."
    users = [x.content for x in turn.messages() if isinstance(x, UserMessage)]
    assert users == [TextContent("Explain everything."), TextContent("Stop. Be short.")]
    # seed 000 section 1: a steering text is Messages.agent (role agent); the prompt stays user
    roles = [x.role for x in turn.messages() if isinstance(x, UserMessage)]
    assert roles == [MessageRole.User, MessageRole.Agent]
    # the interrupted output was never persisted
    assert all(x.id not in retract[0].message_ids for x in turn.messages())
    assert "never seen" not in str(agent.history())
    # the model's second request carries the steering message last
    assert m.interactions[1].messages[-1].content == TextContent("Stop. Be short.")  # type: ignore[union-attr]


def test_steer_from_the_consumer_itself() -> None:
    m = ScriptedModel([[say("one two three four five"), pause(30)], say("ok")], chunk_mode="snapshot")
    agent = build(m)
    out: list[Any] = []
    for e in agent.run_turn_stream("go").events():
        out.append(e)
        if isinstance(e, TurnEvent.Text) and len([x for x in out if isinstance(x, TurnEvent.Text)]) == 2:
            agent.steer("change of plan")
    assert any(isinstance(e, TurnEvent.Retract) for e in out)
    assert isinstance(out[-1], TurnEvent.Done)
    texts = [e.text for e in out if isinstance(e, TurnEvent.Text)]
    assert texts[-1] == "ok"


def test_steer_interrupts_tool_execution_and_pairs_every_call() -> None:
    """C40 after steering: the unfinished call gets an 'interrupted' result, the finished one keeps its own."""
    TOOL_STARTED.clear()
    m = ScriptedModel(
        [
            [
                say("Running two tools."),
                call("quick", {"tag": "a"}, id="c_quick"),
                call("slow_async", {"tag": "b"}, id="c_slow"),
            ],
            say("Stopped the slow one."),
        ]
    )
    agent = build(m)
    t = in_thread(TOOL_STARTED, lambda: agent.steer("never mind the slow tool"))
    stream = agent.run_turn_stream("do both")
    events = list(stream.events())
    t.join()
    turn = stream.turn
    assert turn.ok and turn.text() == "Stopped the slow one."
    results = {r.tool_call_id: r for r in turn.tool_results()}
    assert results["c_quick"].content == TextContent("quick a") and not results["c_quick"].is_error
    assert results["c_slow"].is_error and results["c_slow"].error_detail == "interrupted: steered"
    cancelled = [
        e.progress.id for e in events if isinstance(e, TurnEvent.Progress) and hasattr(e.progress, "id")
    ]
    assert cancelled == ["c_slow"]
    check_pairs(agent.messages)
    # what was streamed before the tools ran stays (it was complete and persisted)
    assert not any(isinstance(e, TurnEvent.Retract) for e in events)


def test_steer_interrupts_a_blocking_sync_tool() -> None:
    TOOL_STARTED.clear()
    RELEASE.clear()
    m = ScriptedModel([call("slow_sync", {"tag": "x"}, id="c1"), say("fine")])
    agent = build(m)
    t = in_thread(TOOL_STARTED, lambda: agent.steer("skip it"))
    turn = agent.run_turn("go")
    t.join()
    RELEASE.set()
    r = turn.tool_results()[0]
    assert r.is_error and r.tool_call_id == "c1"
    assert turn.text() == "fine"
    check_pairs(agent.messages)


async def test_steer_from_another_task() -> None:
    reached = asyncio.Event()
    m = ScriptedModel([[say("thinking out loud"), hook(reached.set), pause(30)], say("redirected")])
    agent = build(m)

    async def steerer() -> None:
        await reached.wait()
        agent.steer("go another way")

    task = asyncio.create_task(steerer())
    events = [e async for e in agent.arun_turn_stream("start").events()]
    await task
    assert any(isinstance(e, TurnEvent.Retract) for e in events)
    assert isinstance(events[-1], TurnEvent.Done)


def test_abort_during_generation_keeps_what_was_produced() -> None:
    reached = threading.Event()
    m = ScriptedModel(
        [[say("A partial answer"), hook(reached.set), pause(30), say("more")]], chunk_mode="delta"
    )
    agent = build(m)
    t = in_thread(reached, agent.abort)
    stream = agent.run_turn_stream("go")
    events = list(stream.events())
    t.join()
    last = events[-1]
    assert isinstance(last, TurnEvent.Done)
    assert last.summary.outcome is TurnOutcome.Aborted
    turn = stream.turn
    assert turn.outcome is TurnOutcome.Aborted and turn.stop_reason == StopReason.ABORTED
    kept = [x for x in turn.messages() if isinstance(x, AssistantMessage)]
    assert [x.content for x in kept] == [TextContent("A partial answer")]
    assert kept[0].stop_reason == StopReason.ABORTED
    assert not any(isinstance(e, TurnEvent.Retract) for e in events)
    # persisted too, with the Summary
    history = agent.history()
    assert kept[0] in [getattr(r, "message", None) for r in history]
    assert type(history[-1]).__name__ == "SessionRecord.Summary"
    # the abort does not leak into the next turn
    m.extend(say("next"))
    assert agent.run_turn("again").ok


def test_abort_during_generation_with_a_call_already_streamed() -> None:
    reached = threading.Event()
    m = ScriptedModel([[call("quick", {"tag": "z"}, id="c9"), hook(reached.set), pause(30)]])
    agent = build(m)
    t = in_thread(reached, agent.abort)
    turn = agent.run_turn("go")
    t.join()
    assert turn.outcome is TurnOutcome.Aborted
    assert [c.id for c in turn.tool_calls()] == ["c9"]
    assert turn.tool_results()[0].error_detail == "interrupted: aborted"
    check_pairs(agent.messages)


def test_abort_during_tools() -> None:
    TOOL_STARTED.clear()
    m = ScriptedModel([[call("quick", {"tag": "q"}, id="a1"), call("slow_async", {"tag": "s"}, id="a2")]])
    agent = build(m)
    t = in_thread(TOOL_STARTED, agent.abort)
    turn = agent.run_turn("go")
    t.join()
    assert turn.outcome is TurnOutcome.Aborted
    res = {r.tool_call_id: r for r in turn.tool_results()}
    assert res["a1"].content == TextContent("quick q")
    assert res["a2"].error_detail == "interrupted: aborted"
    check_pairs(agent.messages)
    assert m.remaining == 0


def test_follow_up_from_another_thread_during_a_turn() -> None:
    reached = threading.Event()
    done = threading.Event()
    m = ScriptedModel(
        [
            [say("first answer"), hook(reached.set), hook(lambda: asyncio.to_thread(done.wait, 10))],
            say("second answer"),
        ]
    )
    agent = build(m)

    def queue() -> None:
        agent.follow_up("one more thing")
        done.set()

    t = in_thread(reached, queue)
    turn = agent.run_turn("go")
    t.join()
    assert done.is_set()
    users = [x.content for x in turn.messages() if isinstance(x, UserMessage)]
    assert users == [TextContent("go"), TextContent("one more thing")]
    assert turn.text() == "second answer"
    texts = [x.content for x in turn.messages() if isinstance(x, AssistantMessage)]
    assert texts == [TextContent("first answer"), TextContent("second answer")]  # nothing retracted
    assert not any(
        isinstance(x.content, ToolCall)
        for x in turn.messages()
        if not isinstance(x, ToolResultMessage | UserMessage)
    )


def test_abort_with_no_turn_running_does_nothing() -> None:
    agent = build(ScriptedModel([say("fine")]))
    agent.abort()
    assert agent.run_turn("go").ok


def test_steer_with_no_turn_running_is_queued_like_a_follow_up() -> None:
    """Tester defect 5: with no turn running, steer() queues its message (as an agent message)
    for right after the next prompt, like follow_up() (a user message); abort() is a no-op."""
    m = ScriptedModel([say("fine")])
    agent = build(m)
    agent.steer("be brief")
    agent.follow_up("and polite")
    agent.abort()
    turn = agent.run_turn("go")
    assert turn.ok and turn.outcome is TurnOutcome.Completed
    users = [(x.role, x.content) for x in turn.messages() if isinstance(x, UserMessage)]
    assert users == [
        (MessageRole.User, TextContent("go")),
        (MessageRole.User, TextContent("and polite")),
        (MessageRole.Agent, TextContent("be brief")),
    ]
    # all three went with the first request, nothing is left queued
    sent = [x.content for x in m.interactions[0].messages if isinstance(x, UserMessage)]
    assert sent == [c for _, c in users]
    assert agent.steering.take_steers() == [] and agent.steering.take_follow_ups() == []


def test_steer_keeps_a_message_as_is() -> None:
    agent = build(ScriptedModel([say("fine")]))
    note = Messages.system("note from the loop")
    agent.steer(note)
    turn = agent.run_turn("go")
    assert note in turn.messages()


async def test_cancelled_turn_ends_like_an_abort_keeping_finished_results() -> None:
    """Tester defect 3 (task side): cancelling the task running ``arun_turn`` during a tool stage
    keeps the results that finished, pairs the others with an "aborted" result and persists a
    Summary; the session is usable at once."""
    from foundation_ai.types import SessionRecord

    TOOL_STARTED.clear()
    m = ScriptedModel([[call("quick", {"tag": "a"}), call("slow_async", {"tag": "b"})], say("next")])
    agent = build(m)
    task = asyncio.create_task(agent.arun_turn("go"))
    while not TOOL_STARTED.is_set():
        await asyncio.sleep(0.01)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    history = agent.history()
    assert isinstance(history[-1], SessionRecord.Summary)
    conv = [r.message for r in history if isinstance(r, SessionRecord.Conversation)]
    check_pairs(conv)
    results = {x.name: x for x in conv if isinstance(x, ToolResultMessage)}
    assert results["quick"].content == TextContent("quick a") and not results["quick"].is_error
    assert results["slow_async"].is_error and "aborted" in (results["slow_async"].error_detail or "")
    assert (await agent.arun_turn("again")).text() == "next"
