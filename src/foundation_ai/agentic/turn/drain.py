"""Phases ``drain_steering`` and ``admit``: the safe point before every generation."""

from __future__ import annotations

from ...types import AgenticError, AgentProgress, SessionRecord, Stream
from ..events import TurnOutcome
from .hooks import Phase
from .host import TurnHost
from .persist import persist
from .state import TurnState, fail

__all__ = ["admit", "drain_steering"]


def drain_steering(host: TurnHost, state: TurnState) -> Phase:
    """Apply what was steered since the last safe point: an ``abort()`` ends the turn as
    ``Aborted`` (emits ``AgentProgress.Steering(source="abort")``); steering messages are
    persisted (emits ``Steering(source="steer")`` and a ``Conversation`` per message).
    Next: ``admit``, or ``finish`` when aborted."""
    steering = host.steering
    if steering.aborted:
        state.outcome = TurnOutcome.Aborted
        state.error = AgenticError(kind="aborted", message="aborted by the caller")
        state.out.append(Stream.Pending(AgentProgress.Steering(source="abort")))
        return Phase.FINISH
    steers = steering.take_steers()
    if steers:
        state.out.append(Stream.Pending(AgentProgress.Steering(source="steer")))
        persist(host, state, steers)
        state.out += [Stream.Next(SessionRecord.Conversation(message=m)) for m in steers]
    return Phase.ADMIT


def admit(host: TurnHost, state: TurnState) -> Phase:
    """May the turn call a model? Checks the round's iteration limit (``max_inner``), the token
    budget and the circuit breakers (picks the first model not rate limited into
    ``state.model_index``), then counts the model call. Fails the turn (``iteration_limit``,
    ``budget_exhausted``, ``rate_limited``) otherwise. Next: ``assemble_context``, or ``finish``."""
    if state.inner >= host.max_inner:
        fail(state, "iteration_limit", f"reached the limit of {host.max_inner} model calls in one turn")
        return Phase.FINISH
    ledger = host.ledger
    why = None if ledger.budget is None else ledger.exhausted()
    if why is not None:
        fail(state, "budget_exhausted", why)
        return Phase.FINISH
    breaker = host.breaker
    # no breaker open (the usual case): the primary model, as ``pick`` answers
    index = (0 if host.models else None) if not breaker._open_until else breaker.pick(len(host.models))
    if index is None:
        fail(state, "rate_limited", "every model is rate limited (circuit breakers open)", retryable=True)
        return Phase.FINISH
    state.model_index = index
    state.inner += 1
    state.generations += 1
    return Phase.ASSEMBLE_CONTEXT
