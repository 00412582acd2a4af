"""The turn loop: one turn of an ``AgentSession`` (the phases live in
:mod:`foundation_ai.agentic.turn`; see ``docs/turn-loop.md``).

One turn streams ``Stream[SessionRecord, AgentProgress]`` items: the prompt is persisted; the
model is called with the context oldest-first (system prompt and soul apart, the session's
tools); a response holding tool calls is never final: it is persisted, its calls run
(validated, gated, ``depends_on`` stages) and the model is called again; an answer without
tool calls ends the turn unless follow-ups are queued. A vacuous answer is retracted and
retried once, a context overflow trims the oldest context, a rate limit falls back to the next
model, any other error ends the turn with a ``FailedAction`` (never persisted). The turn ends
with a persisted ``Summary``.

This module re-exports the loop's entry points for code that imported them from here.
"""

from __future__ import annotations

from .turn import CircuitBreaker, TurnState, is_rate_limit, is_vacuous, run_turn

__all__ = ["CircuitBreaker", "TurnState", "is_rate_limit", "is_vacuous", "run_turn"]
