"""Hardening round 2, a refusal is a typed turn outcome: with structured output requested, a
refusal from any of the three HTTP backends ends the turn ``Refused`` after one model call, with
the refusal text kept (persisted message and ``TurnSummary.refusal``); it is never retracted
as a vacuous answer nor failed as invalid JSON.

Real sessions (in-memory store) over the real backends, served the project's own wire fixtures
(tests/fixtures/, written from provider docs) by the loopback fixture server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import InMemorySessionStore, TurnEvent, TurnOutcome
from foundation_ai.backends import anthropic, openai_chat, openai_responses
from foundation_ai.types import AssistantMessage, ModelParams, OutputFormat, StopReason
from tests._backend_helpers import Canned, Fixtures, FixtureServer, reset, serve
from tests._fixture_server import sse

STRUCTURED = ModelParams(output_format=OutputFormat.JsonSchema(name="answer", schema={"type": "object"}))

REFUSALS = [
    (
        "openai_chat",
        lambda url: openai_chat("gpt-4o-mini", base_url=url, api_key="k", max_retries=0),
        Fixtures("openai_chat"),
        "c33_refusal.sse",
        "I'm sorry, I can't help with that.",
    ),
    (
        "openai_responses",
        lambda url: openai_responses("gpt-5-mini", base_url=url, api_key="k", max_retries=0),
        Fixtures("openai_responses"),
        "refusal.sse",
        "I'm sorry, but I can't help with that.",
    ),
    (
        "anthropic",
        lambda url: anthropic("claude-opus-4-5", base_url=url, api_key="k", max_retries=0),
        Fixtures("anthropic"),
        "refusal_stop_details.sse",
        "This request was declined under the usage policy.",
    ),
]


@pytest.fixture(scope="module")
def srv() -> Iterator[FixtureServer]:
    yield from serve()


@pytest.fixture
def fresh(srv: FixtureServer) -> FixtureServer:
    return reset(srv)


def session(model: Any) -> AgentSession:
    return AgentSession.builder(model).with_params(STRUCTURED).with_store(InMemorySessionStore()).build()


@pytest.mark.parametrize(
    ("name", "make", "fixtures", "fixture", "text"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_a_refusal_ends_the_turn_refused_after_one_model_call(
    fresh: FixtureServer, name: str, make: Any, fixtures: Fixtures, fixture: str, text: str
) -> None:
    fresh.queue(fixtures.sse(fixture))
    turn = session(make(fresh.base_url)).run_turn("Help me with something forbidden.")
    assert turn.outcome is TurnOutcome.Refused
    assert turn.summary.refusal == text
    assert turn.stop_reason == StopReason.REFUSAL
    assert turn.error is None and not turn.ok
    assert len(fresh.requests) == 1 and turn.summary.generations == 1  # no vacuous retry
    last = [m for m in turn.messages() if isinstance(m, AssistantMessage)][-1]
    assert last.refusal() == text  # the refusal is persisted as the answer


def test_a_streamed_refused_turn_ends_with_done_carrying_the_refusal(fresh: FixtureServer) -> None:
    _, make, fixtures, fixture, text = REFUSALS[2]
    fresh.queue(fixtures.sse(fixture))
    events = list(session(make(fresh.base_url)).run_turn_stream("Forbidden?").events())
    assert not any(isinstance(e, TurnEvent.Retract) for e in events)
    done = events[-1]
    assert isinstance(done, TurnEvent.Done)
    assert done.summary.outcome is TurnOutcome.Refused and done.summary.refusal == text


def test_an_empty_answer_that_is_not_a_refusal_is_still_retried(fresh: FixtureServer) -> None:
    empty = [{"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}]}, "[DONE]"]
    fresh.queue(Canned(chunks=sse(empty)), Fixtures("openai_chat").sse("text.sse"))
    model = openai_chat("gpt-4o-mini", base_url=fresh.base_url, api_key="k", max_retries=0)
    turn = AgentSession.builder(model).with_store(InMemorySessionStore()).build().run_turn("hi")
    assert turn.outcome is TurnOutcome.Completed and turn.summary.refusal is None
    assert len(fresh.requests) == 2  # the vacuous answer was retried once
