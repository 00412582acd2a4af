"""Phase ``follow_ups``: after an answer, go on with queued follow-ups (an outer round)."""

from __future__ import annotations

from ...types import AgentProgress, SessionRecord, Stream
from ..events import TurnOutcome
from .hooks import Phase
from .host import TurnHost
from .persist import persist
from .state import TurnState, fail

__all__ = ["take_follow_ups"]


def take_follow_ups(host: TurnHost, state: TurnState) -> Phase:
    """Take the follow-ups (and steering messages) queued while the answer was produced. None:
    the turn is complete. Otherwise a new round starts (emits ``Steering(source="follow_up")``
    and a ``Conversation`` per message; the round's counters restart), unless that would exceed
    ``max_outer`` rounds: then the messages go back to the queue for the next turn and the turn
    fails with ``iteration_limit``. Next: ``drain_steering`` or ``finish``."""
    steering = host.steering
    more = steering.take_follow_ups() + steering.take_steers()
    if not more:
        return Phase.FINISH
    state.outer += 1
    if state.outer >= host.max_outer:
        for m in more:
            steering.follow_up(m)
        fail(state, "iteration_limit", f"reached the limit of {host.max_outer} follow-up rounds")
        return Phase.FINISH
    state.out.append(Stream.Pending(AgentProgress.Steering(source="follow_up")))
    persist(host, state, more)
    state.out += [Stream.Next(SessionRecord.Conversation(message=m)) for m in more]
    state.inner = 0
    state.vacuous_retried = False
    if state.outcome is TurnOutcome.Refused:  # the new round's answer decides the outcome
        state.outcome, state.refusal = TurnOutcome.Completed, None
    return Phase.DRAIN_STEERING
