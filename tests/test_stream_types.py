"""Seed 000 section 10: the ``Stream`` contract and ``ModelState``."""

from __future__ import annotations

import pytest

from foundation_ai.types import (
    AgentProgress,
    Messages,
    ModelState,
    SessionRecord,
    Stream,
    UsageReport,
    from_json,
    to_json,
)


def _items() -> list[Stream[Messages, ModelState]]:
    m = Messages.user("hi")
    return [
        Stream.Init(),
        Stream.Pending(ModelState.GeneratingTokens(UsageReport.of(input=3))),
        Stream.Pending(ModelState.GeneratingEmbeddings()),
        Stream.Next(m),
        Stream.Spread([m, Messages.system("x")]),
        Stream.Wait(),
        Stream.Delayed(0.5),
        Stream.Ignore(),
        Stream.Pending(ModelState.Error("boom")),
        Stream.Pending(ModelState.Finished()),
    ]


def test_payload_is_in_value_and_match_works_positionally() -> None:
    seen: list[str] = []
    for item in _items():
        match item:
            case Stream.Next(m):
                seen.append(f"next {m.text()}")
            case Stream.Spread(ms):
                seen.append(f"spread {len(ms)}")
            case Stream.Pending(ModelState.Error(message=text)):
                seen.append(f"error {text}")
            case Stream.Pending(ModelState.GeneratingTokens(usage=u)):
                seen.append(f"tokens {u.input if u else None}")
            case Stream.Pending(state):
                seen.append(type(state).__name__)
            case Stream.Delayed(secs):
                seen.append(f"delayed {secs}")
            case Stream.Init():
                seen.append("init")
            case _:
                seen.append("skip")
    assert seen == [
        "init",
        "tokens 3.0",
        "ModelState.GeneratingEmbeddings",
        "next hi",
        "spread 2",
        "skip",
        "delayed 0.5",
        "skip",
        "error boom",
        "ModelState.Finished",
    ]


def test_scheduling_signals() -> None:
    flags = [i.is_scheduling() for i in _items()]
    assert flags == [False, False, False, False, False, True, True, True, False, False]


def test_stream_items_round_trip_with_type_tags() -> None:
    items = _items()
    data = to_json(items)
    assert b'{"type":"init"}' in data and b'"type":"delayed","value":0.5' in data
    assert from_json(data, list[Stream[Messages, ModelState]]) == items


def test_agent_level_stream_round_trips() -> None:
    items: list[Stream[SessionRecord, AgentProgress]] = [
        Stream.Pending(AgentProgress.Generating(model="m", tokens_so_far=4)),
        Stream.Next(SessionRecord.Conversation(message=Messages.user("x"))),
    ]
    assert from_json(to_json(items), list[Stream[SessionRecord, AgentProgress]]) == items


def test_model_state_default_usage_none() -> None:
    assert ModelState.GeneratingTokens().usage is None
    assert to_json(ModelState.Finished()) == b'{"type":"finished"}'


@pytest.mark.parametrize("name", ["Init", "Pending", "Next", "Spread", "Wait", "Delayed", "Ignore"])
def test_variant_names(name: str) -> None:
    assert getattr(Stream, name).__name__ == f"Stream.{name}"
