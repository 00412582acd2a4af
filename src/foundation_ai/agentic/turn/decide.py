"""Phase ``decide``: what a finished generation means for the turn."""

from __future__ import annotations

from typing import Any

from ...types import AgentProgress, SessionRecord, StopReason, Stream, TextContent, ToolCall
from ..events import TurnOutcome
from ..ledger import price_usage
from ..output import check_output
from .hooks import Phase
from .host import TurnHost
from .persist import persist
from .policy import is_vacuous
from .recover import after_error, after_interrupt, overflowed
from .state import NOTHING_LIVE, TurnState, fail

__all__ = ["decide"]

_MESSAGE_STOP = type(StopReason.Message("refusal"))
_PLAIN_STOPS = frozenset(type(s) for s in (StopReason.Stop(), StopReason.ToolUse(), StopReason.Length()))
"""Exact types of the usual stop reasons (none is a ``Message``): no ``isinstance`` for them."""


def decide(host: TurnHost, state: TurnState) -> Phase:
    """Record the generation's usage in the ledger, then:

    - interrupted by steering or abort: :func:`~.recover.after_interrupt`;
    - a provider error, or a context overflow: :func:`~.recover.after_error` (retry with less
      context, fall back to another model, or fail);
    - a refusal with no tool calls (an output whose ``refusal()`` is set: Anthropic
      ``stop_reason: "refusal"``, an OpenAI ``refusal``, a content filter): persisted as the
      answer, never retried as vacuous; the outcome is ``TurnOutcome.Refused`` with the refusal
      text in ``state.refusal`` -> ``follow_ups``;
    - an answer with no tool calls: with an output type (:mod:`foundation_ai.agentic.output`)
      the answer is validated, and one that does not match is persisted with a
      ``Messages.system`` note of its errors -> another generation (up to ``retries`` times),
      then the turn fails (``output_validation``); without one, a vacuous answer (empty,
      punctuation) is ``Retracted`` and retried once; else it is persisted (emits
      ``FlushingRecords``) -> ``follow_ups``;
    - tool calls (text before them never makes a response final): the response is persisted
      (emits ``FlushingRecords`` and ``ExecutingTools(completed=0)``) -> ``execute_tools``.
    """
    gen = state.generation
    assert gen is not None
    state.live = NOTHING_LIVE  # from here on, every path persists or retracts the outputs before yielding
    descriptor = getattr(gen.model, "descriptor", None)
    host.ledger.record(price_usage(gen.usage, descriptor))
    produced = list(gen.outputs.values())
    if gen.interrupted:
        return after_interrupt(host, state, produced)
    if gen.error is not None or (
        getattr(descriptor, "context_window", None) is not None and overflowed(host, state, produced)
    ):
        return after_error(host, state, produced)
    out, emit = state.out, state.emit
    calls = []
    for m in produced:  # a loop: no comprehension frame for the usual one or two outputs
        c = m.content
        if type(c) is ToolCall or (type(c) is not TextContent and isinstance(c, ToolCall)):
            calls.append(c)
    if not calls:
        refusal = _refusal(produced)
        if refusal is not None:  # a typed outcome: one model call, the refusal kept
            persist(host, state, produced)
            state.outcome, state.refusal = TurnOutcome.Refused, refusal
            if emit:
                out.append(Stream.Pending(AgentProgress.FlushingRecords(count=len(produced))))
            return Phase.FOLLOW_UPS
        text = _text(produced)
        spec = state.output_spec
        if spec is not None:
            verdict = check_output(spec, state, produced, text)
            if verdict is not None:
                persist(host, state, produced)
                if isinstance(verdict, str):
                    fail(state, "output_validation", verdict, model=gen.model.descriptor.name)
                    return Phase.FINISH
                persist(host, state, [verdict])  # the errors go back to the model
                if emit:
                    out.append(Stream.Next(SessionRecord.Conversation(message=verdict)))
                return Phase.DRAIN_STEERING
        if is_vacuous(text) and not state.vacuous_retried and spec is None:
            state.vacuous_retried = True
            rec = SessionRecord.Retracted(
                reason="vacuous answer; retrying once", message_ids=[m.id for m in produced]
            )
            state.records.append(rec)
            out.append(Stream.Next(rec))
            return Phase.DRAIN_STEERING
        persist(host, state, produced)
        if emit:
            out.append(Stream.Pending(AgentProgress.FlushingRecords(count=len(produced))))
        return Phase.FOLLOW_UPS
    persist(host, state, produced)
    state.calls = calls
    state.results = [None] * len(calls)
    if emit:
        out.append(Stream.Pending(AgentProgress.FlushingRecords(count=len(produced))))
        out.append(Stream.Pending(AgentProgress.ExecutingTools(total=len(calls), completed=0)))
    return Phase.EXECUTE_TOOLS


def _refusal(produced: list[Any]) -> str | None:
    """The refusal text of the last output that reports one, else ``None``."""
    for m in reversed(produced):
        stop = m.stop_reason  # exact types first: ``isinstance`` on these classes is slower
        if m.metadata is None and (type(stop) in _PLAIN_STOPS or not isinstance(stop, _MESSAGE_STOP)):
            continue  # no refusal metadata, and only a ``Message`` stop can be a refusal
        refusal = m.refusal()
        if refusal is not None:
            return refusal  # type: ignore[no-any-return]
    return None


def _text(produced: list[Any]) -> str:
    """The text outputs, joined."""
    if len(produced) == 1:  # the usual answer: one output, no comprehension frame
        only = produced[0].content
        return only.content if type(only) is TextContent or isinstance(only, TextContent) else ""
    return "".join([m.content.content for m in produced if isinstance(m.content, TextContent)])
