"""Phase ``finish`` and how a turn ends when it cannot finish (abandoned, crashed)."""

from __future__ import annotations

import logging

import msgspec

from ...types import AgenticError, AgentProgress, SessionRecord, StopReason, Stream
from ..context import dangling_calls, interrupted_results
from ..events import TurnOutcome
from .host import TurnHost
from .persist import persist, persist_summary
from .state import DISCARD, TurnState

__all__ = ["close_abandoned", "close_crashed", "finish", "release"]

log = logging.getLogger(__name__)
_FAILED, _CONVERSATION = SessionRecord.FailedAction, SessionRecord.Conversation


def release(host: TurnHost) -> None:
    """However the turn ends: unbind steering, forget a pending abort and the in-turn cut."""
    host.steering.release()
    host.context_cut = None


def finish(host: TurnHost, state: TurnState) -> None:
    """Persist the ``Summary`` (messages persisted, cumulative usage). Emits
    ``AgentProgress.TurnComplete`` (streaming, when the turn did not fail), the ``Summary``
    and, for a failed turn, the ``FailedAction`` last (it is moved after the ``Summary``)."""
    records = state.records
    summary = persist_summary(host, state)
    last = records[-1] if records else None
    failed = (
        last
        if type(last) is _FAILED or (type(last) is not _CONVERSATION and isinstance(last, _FAILED))
        else None
    )
    out = state.out
    if state.emit and failed is None:
        out.append(Stream.Pending(AgentProgress.TurnComplete(usage=state.snapshot)))
    if failed is not None:
        records.pop()
    records.append(summary)
    if out is not DISCARD:  # a driver that yields nothing keeps no item
        out.append(Stream.Next(summary))
    if failed is not None:
        records.append(failed)
        out.append(Stream.Next(failed))


def close_crashed(host: TurnHost, state: TurnState) -> None:
    """A phase raised: give every tool call of the turn still without a result an
    "interrupted" result, so the conversation stays loadable (the error propagates)."""
    open_calls = dangling_calls(host.messages[state.keep_from :])
    if open_calls:
        persist(host, state, interrupted_results(open_calls, "turn abandoned"))


def close_abandoned(host: TurnHost, state: TurnState) -> None:
    """Close a turn whose stream was closed or dropped, or whose task was cancelled, the way
    ``abort()`` does (nothing can be emitted any more): keep the partial outputs with
    ``StopReason.Aborted`` and the results of tools that finished, give every other open tool
    call an "aborted" result and persist a ``Summary``. A store failure here is logged, never
    raised over the ``GeneratorExit``/``CancelledError`` ending the turn."""
    try:
        persist(
            host,
            state,
            [msgspec.structs.replace(m, stop_reason=StopReason.Aborted()) for m in state.live.values()],
        )
        persist(host, state, [r for r in state.results if r is not None])
        persist(host, state, interrupted_results(dangling_calls(host.messages[state.keep_from :]), "aborted"))
        state.outcome = TurnOutcome.Aborted
        state.error = AgenticError(kind="aborted", message="the turn stream was closed before the turn ended")
        state.records.append(persist_summary(host, state))
    except Exception:
        log.warning(
            "session %s: could not persist the end of an abandoned turn", host.session_id, exc_info=True
        )
