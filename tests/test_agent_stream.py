"""The agent-level stream item type has its seed name, ``AgentStream`` (the seed's
``agentic::internals::AgentStream``), and ``Stream.Spread`` at the agent level yields the events
of its records, in order (issue 28, section 5; docs/concepts.md, "The stream contract")."""

from __future__ import annotations

import asyncio
from typing import Any

from foundation_ai import agentic
from foundation_ai.agentic import AgentStream, ScriptedModel, TurnEvent, TurnStream, call, say, tool
from foundation_ai.agentic.events import EventMapper
from foundation_ai.ids import new_call_id
from foundation_ai.types import (
    AgentProgress,
    AssistantMessage,
    Messages,
    ModelId,
    SessionRecord,
    Stream,
    TextContent,
    ToolCall,
)


def test_agent_stream_is_the_documented_alias_of_the_agent_level_stream() -> None:
    assert "AgentStream" in agentic.__all__
    assert AgentStream == Stream[SessionRecord, AgentProgress]
    import inspect

    source = inspect.getsource(agentic.events)  # documented where it is defined, with the seed's name
    assert 'AgentStream = Stream[SessionRecord, AgentProgress]\n"""The agent-level stream item' in source
    assert "``agentic::internals::AgentStream``" in source


def _answer(text: str, mid: str) -> SessionRecord:
    return SessionRecord.Conversation(
        message=AssistantMessage(id=mid, model=ModelId.Name("m"), content=TextContent(text))
    )


def test_a_spread_maps_to_the_events_of_each_of_its_records_in_order() -> None:
    cid = new_call_id()
    call_msg = AssistantMessage(
        id="m2", model=ModelId.Name("m"), content=ToolCall(id=cid, name="add", arguments={})
    )
    result = Messages.ToolResult(tool_call_id=cid, name="add", content=TextContent("3"))
    spread = Stream.Spread(
        [
            _answer("Hel", "m1"),
            _answer("Hello", "m1"),
            SessionRecord.Conversation(message=call_msg),
            SessionRecord.Conversation(message=result),
            SessionRecord.Retracted(message_ids=["m1"], reason="steered"),
        ]
    )
    events = EventMapper().map(spread)
    assert [type(e).__name__ for e in events] == [
        "TurnEvent.Text",
        "TurnEvent.Text",
        "TurnEvent.ToolCall",
        "TurnEvent.ToolResult",
        "TurnEvent.Retract",
    ]
    assert [e.text for e in events[:2]] == ["Hel", "lo"]  # snapshots inside a spread are deltas too


@tool
def add(a: int, b: int) -> int:
    """Add.

    Args:
        a: One.
        b: Two.
    """
    return a + b


def test_a_turn_stream_that_spreads_its_records_gives_the_same_events_as_one_that_does_not() -> None:
    agent = (
        agentic.AgentSession.builder(ScriptedModel([[call("add", {"a": 1, "b": 2})], say("3")]))
        .with_tools(add)
        .build()
    )
    items = list(agent.run_turn_stream("1+2"))

    loop = asyncio.new_event_loop()

    def plain() -> list[Any]:
        return list(TurnStream(_agen(items), loop.run_until_complete, lambda: None).events())

    def spread() -> list[Any]:
        batched: list[Any] = []
        records = [i.value for i in items if isinstance(i, Stream.Next)]
        others = [i for i in items if not isinstance(i, Stream.Next)]
        batched += others[:1]
        batched.append(Stream.Spread(records))  # every record at once, at the agent level
        batched += others[1:]
        return list(TurnStream(_agen(batched), loop.run_until_complete, lambda: None).events())

    want = [e for e in plain() if not isinstance(e, TurnEvent.Progress)]
    got = [e for e in spread() if not isinstance(e, TurnEvent.Progress)]
    assert [type(e) for e in got] == [type(e) for e in want]
    assert [type(e).__name__ for e in got][-1] == "TurnEvent.Done"
    assert any(isinstance(e, TurnEvent.ToolResult) for e in got) and any(
        isinstance(e, TurnEvent.Text) for e in got
    )
    loop.close()
    agent.close()


async def _agen(items: list[Any]) -> Any:
    for i in items:
        yield i
