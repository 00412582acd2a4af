"""The only code of the turn loop that writes to the session store."""

from __future__ import annotations

from collections.abc import Sequence

from ...types import Messages, SessionRecord
from .host import TurnHost
from .state import TurnState

__all__ = ["persist", "persist_records", "persist_summary"]


def persist(host: TurnHost, state: TurnState, msgs: Sequence[Messages]) -> None:
    """Append ``msgs`` to the conversation, to ``state.records`` (as ``Conversation``) and to
    the store, in one ``append`` call."""
    if not msgs:
        return
    recs = [SessionRecord.Conversation(message=m) for m in msgs]
    host.messages.extend(msgs)
    state.records.extend(recs)
    state.persisted += len(msgs)
    host.store.append(host.session_id, recs)


def persist_summary(host: TurnHost, state: TurnState) -> SessionRecord:
    """Store the turn's ``Summary`` (messages persisted, cumulative usage) and return it; it is
    not added to ``state.records`` (the caller places it)."""
    summary = SessionRecord.Summary(
        message_count=state.persisted,
        usage=host.ledger.snapshot(),
        awaiting_approval=[c.id for c in state.awaiting],
    )
    state.snapshot = summary.usage
    host.store.append(host.session_id, [summary])
    return summary


def persist_records(host: TurnHost, state: TurnState, records: Sequence[SessionRecord]) -> None:
    """Store other records of the turn (e.g. ``WorkingMemory``, ``Observation``,
    ``Reflection``) and add them to ``state.records``. ``Conversation`` records go through
    :func:`persist` (it keeps the conversation in step); ``Summary`` through
    :func:`persist_summary`.

    Raises:
        ValueError: a ``Conversation`` or ``Summary`` record (nothing is stored).
    """
    for r in records:
        if isinstance(r, SessionRecord.Conversation | SessionRecord.Summary):
            raise ValueError(f"persist_records takes no {type(r).__name__} (use persist / persist_summary)")
    if records:
        state.records.extend(records)
        host.store.append(host.session_id, list(records))
