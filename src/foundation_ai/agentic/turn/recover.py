"""What ``decide`` does with a generation that did not produce a usable response: interrupted
by steering or abort, a provider error, a context overflow, a rate limit."""

from __future__ import annotations

import msgspec

from ...types import AgentProgress, AssistantMessage, Messages, SessionRecord, StopReason, Stream, ToolCall
from ..context import interrupted_results, trimmed_window
from .hooks import Phase
from .host import TurnHost
from .persist import persist
from .policy import is_rate_limit
from .state import TurnState, fail

__all__ = ["after_error", "after_interrupt", "overflowed"]


def after_interrupt(host: TurnHost, state: TurnState, produced: list[AssistantMessage]) -> Phase:
    """Aborted: keep the partial outputs with ``StopReason.Aborted`` and give each tool call an
    "aborted" result (emits ``ToolCallCancelled`` and the results). Steered: ``Retracted`` the
    partial outputs. Next: ``drain_steering`` (which ends an aborted turn)."""
    out = state.out
    if host.steering.aborted:
        kept: list[Messages] = [
            msgspec.structs.replace(m, stop_reason=StopReason.Aborted()) for m in produced
        ]
        calls = [m.content for m in produced if isinstance(m.content, ToolCall)]
        persist(host, state, kept)
        cancelled = interrupted_results(calls, "aborted")
        persist(host, state, cancelled)
        out += [Stream.Pending(AgentProgress.ToolCallCancelled(id=c.id)) for c in calls]
        out += [Stream.Next(SessionRecord.Conversation(message=r)) for r in cancelled]
    elif produced:
        rec = SessionRecord.Retracted(
            reason="steered: generation interrupted", message_ids=[m.id for m in produced]
        )
        state.records.append(rec)
        out.append(Stream.Next(rec))
    return Phase.DRAIN_STEERING


def overflowed(host: TurnHost, state: TurnState, produced: list[AssistantMessage]) -> bool:
    """A silent overflow: no error, but the usage reports more tokens than the model's context
    window, and something can still be trimmed."""
    gen = state.generation
    assert gen is not None
    window = getattr(gen.model.descriptor, "context_window", None)
    if window is None or not any(m.is_context_overflow(window) for m in produced):
        return False
    return _trimmed(host, state) is not None


def after_error(host: TurnHost, state: TurnState, produced: list[AssistantMessage]) -> Phase:
    """``Retracted`` the partial outputs, then: a context overflow drops the oldest context
    (emits ``ProcessingMemory(kind="trim_context")``) and retries, failing with
    ``context_overflow`` when nothing is left to drop; a rate limit trips the model's circuit
    breaker and retries on the next model (``rate_limited`` when none is left); any other error
    fails the turn (``provider``). A retry does not count as a model call of the round.
    Next: ``drain_steering`` (retry) or ``finish``."""
    gen = state.generation
    assert gen is not None
    error, name = gen.error, gen.model.descriptor.name
    if produced:
        rec = SessionRecord.Retracted(
            reason="generation failed; retrying or failing", message_ids=[m.id for m in produced]
        )
        state.records.append(rec)
        state.out.append(Stream.Next(rec))
    detail = (error.error_detail or "") if error is not None else "usage exceeds the context window"
    window = getattr(gen.model.descriptor, "context_window", None)
    if error is None or error.is_context_overflow(window):
        trimmed = _trimmed(host, state)
        if trimmed is None:
            fail(state, "context_overflow", detail or "context overflow", model=name)
            return Phase.FINISH
        host.context_start, host.context_cut = trimmed
        state.inner -= 1
        state.out.append(Stream.Pending(AgentProgress.ProcessingMemory(kind="trim_context")))
        return Phase.DRAIN_STEERING
    if is_rate_limit(detail):
        host.breaker.trip(state.model_index)
        if host.breaker.pick(len(host.models)) is None:
            fail(state, "rate_limited", detail, retryable=True, model=name)
            return Phase.FINISH
        state.inner -= 1
        return Phase.DRAIN_STEERING
    fail(state, "provider", detail or "the model stream failed", model=name)
    return Phase.FINISH


def _trimmed(host: TurnHost, state: TurnState) -> tuple[int, tuple[int, int] | None] | None:
    return trimmed_window(
        host.messages, host.context_start, host.context_cut, state.keep_from, state.head_end
    )
