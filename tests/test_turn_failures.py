"""Failures cannot pass unnoticed: ``run_turn``, ``ask`` and their async twins raise one typed
``TurnFailedError`` (carrying the ``Turn``, the error kind and the provider's text) on an HTTP
500, a bad key (401) and a refused connection, each against a real loopback socket; the
value-based contract below the session is unchanged (a model's ``generate`` returns an Assistant
message with ``StopReason.Error``; ``TurnStream.events()`` ends with ``TurnEvent.Failed``)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator

import pytest

from foundation_ai import Messages, ModelInteraction, ModelParams, StopReason
from foundation_ai.agentic import (
    AgentSession,
    InMemorySessionStore,
    ScriptedModel,
    TurnEvent,
    TurnOutcome,
    call,
    fail,
    say,
    tool,
)
from foundation_ai.backends import openai_chat
from foundation_ai.errors import FoundationAIError, TurnFailedError
from tests._fixture_server import Canned, FixtureServer

SECRET = "sk-test-very-secret-key-0123456789"


def _server_error(status: int, message: str, kind: str) -> Canned:
    body = json.dumps({"error": {"message": message, "type": kind, "code": None}}).encode()
    return Canned(status=status, body=body, content_type="application/json")


@pytest.fixture
def server() -> Iterator[FixtureServer]:
    with FixtureServer() as srv:
        yield srv


def _agent(base_url: str) -> AgentSession:
    model = openai_chat("gpt-4o-mini", base_url=base_url, api_key=SECRET, max_retries=0, timeout=10)
    return AgentSession.builder(model).with_store(InMemorySessionStore()).build()


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def test_http_500_makes_run_turn_raise_with_the_turn_and_the_provider_text(server: FixtureServer) -> None:
    server.queue(_server_error(500, "The server had an error while processing your request.", "server_error"))
    agent = _agent(server.base_url)
    with pytest.raises(TurnFailedError) as caught:
        agent.run_turn("hi")
    err = caught.value
    assert isinstance(err, FoundationAIError)
    assert err.kind == "provider" and err.status_code == 500
    assert "The server had an error while processing your request." in err.detail
    assert err.turn.outcome is TurnOutcome.Failed and err.turn.error.kind == "provider"
    assert [m.content.content for m in err.turn.messages()] == ["hi"]  # the prompt was kept
    assert len(server.requests) == 1


def test_bad_key_makes_ask_raise_with_status_401_and_no_key_in_the_text(server: FixtureServer) -> None:
    server.queue(_server_error(401, f"Incorrect API key provided: {SECRET}.", "invalid_request_error"))
    agent = _agent(server.base_url)
    with pytest.raises(TurnFailedError) as caught:
        agent.ask("hi")
    err = caught.value
    assert err.kind == "provider" and err.status_code == 401
    assert "Incorrect API key provided" in err.detail
    assert SECRET not in err.detail and SECRET not in str(err)


def test_refused_connection_makes_ask_raise_rather_than_return_an_empty_answer() -> None:
    agent = _agent(f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(TurnFailedError) as caught:
        agent.ask("hi")
    err = caught.value
    assert err.kind == "provider" and err.status_code is None
    assert "connection failed" in err.detail


def test_async_twins_raise_the_same_error(server: FixtureServer) -> None:
    server.queue(_server_error(500, "upstream exploded", "server_error"))
    agent = _agent(server.base_url)

    async def both() -> list[TurnFailedError]:
        seen = []
        for call_ in (agent.arun_turn, agent.aask):
            try:
                await call_("hi")
            except TurnFailedError as exc:
                seen.append(exc)
        return seen

    errors = asyncio.run(both())
    assert [e.status_code for e in errors] == [500, 500]
    assert all("upstream exploded" in e.detail for e in errors)


def test_value_contract_below_the_session_is_unchanged(server: FixtureServer) -> None:
    """The model's ``generate`` returns the error as an Assistant message; a streamed turn
    yields ``TurnEvent.Failed`` as its last event; neither raises."""
    server.queue(_server_error(500, "upstream exploded", "server_error"))
    model = openai_chat("gpt-4o-mini", base_url=server.base_url, api_key=SECRET, max_retries=0)
    out = model.generate(ModelInteraction(messages=[Messages.user("hi")]), ModelParams())
    errors = [m for m in out if isinstance(m.stop_reason, StopReason.Error)]
    assert errors and "upstream exploded" in (errors[0].error_detail or "")
    agent = _agent(server.base_url)
    events = list(agent.run_turn_stream("hi").events())
    assert isinstance(events[-1], TurnEvent.Failed) and "upstream exploded" in events[-1].error.message


def test_budget_and_iteration_limits_raise_with_their_kind() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    loops = ScriptedModel([call("add", {"a": 1, "b": 1})] * 5)
    agent = (
        AgentSession.builder(loops)
        .with_tools(add)
        .with_max_iterations(inner=2)
        .with_store(InMemorySessionStore())
        .build()
    )
    with pytest.raises(TurnFailedError) as caught:
        agent.run_turn("go")
    assert caught.value.kind == "iteration_limit"
    assert caught.value.turn.outcome is TurnOutcome.IterationLimit
    assert len(caught.value.turn.tool_results()) == 2  # the work done is kept on the turn


def test_a_scripted_provider_error_raises_and_the_session_goes_on() -> None:
    model = ScriptedModel([fail("HTTP 503: overloaded"), say("fine now")])
    agent = AgentSession.builder(model).with_store(InMemorySessionStore()).build()
    with pytest.raises(TurnFailedError) as caught:
        agent.ask("first")
    assert caught.value.status_code == 503 and "overloaded" in caught.value.detail
    assert agent.ask("second").text == "fine now"


def test_an_aborted_turn_does_not_raise() -> None:
    model = ScriptedModel([say("partial answer")])
    agent = AgentSession.builder(model).with_store(InMemorySessionStore()).build()
    stream = agent.run_turn_stream("go")
    for event in stream.events():
        if isinstance(event, TurnEvent.Text):
            agent.abort()
    turn = stream.turn
    assert turn.outcome in (TurnOutcome.Aborted, TurnOutcome.Completed)
    turn.raise_for_outcome()  # returns: an abort is the caller's own choice, not a failure
