"""``ScriptedModel`` keeps a bounded number of requests (issue 10, item 13): ``interactions`` and
``params`` hold the latest 100 by default (``record=``), ``requests`` counts all, ``record=None``
keeps everything and ``record=0`` nothing."""

from __future__ import annotations

import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import InMemorySessionStore, ScriptedModel, say
from foundation_ai.errors import ConfigurationError
from foundation_ai.types import TextContent


def run_turns(model: ScriptedModel, n: int) -> None:
    agent = AgentSession.builder(model).with_store(InMemorySessionStore()).build()
    for i in range(n):
        agent.run_turn(f"q{i}")
    agent.close()


def test_interactions_keep_the_latest_hundred_by_default() -> None:
    model = ScriptedModel([say(f"a{i}") for i in range(250)])
    run_turns(model, 250)
    assert model.requests == 250
    assert len(model.interactions) == len(model.params) == 100
    last = model.interactions[-1].messages[-1]
    assert last.content == TextContent("q249")  # type: ignore[union-attr]
    assert model.interactions[0].messages[-1].content == TextContent("q150")  # type: ignore[union-attr]


def test_record_none_keeps_every_request_and_zero_keeps_none() -> None:
    every = ScriptedModel([say("a")] * 120, record=None)
    run_turns(every, 120)
    assert len(every.interactions) == 120
    nothing = ScriptedModel([say("a")] * 5, record=0)
    run_turns(nothing, 5)
    assert nothing.interactions == [] and nothing.requests == 5


def test_a_negative_record_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        ScriptedModel(record=-1)
