"""The only code of the turn loop that writes to the session store."""

from __future__ import annotations

from collections.abc import Sequence

from ...types import Messages, SessionRecord
from .host import TurnHost
from .state import TurnState

__all__ = ["persist", "persist_summary"]


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
    summary = SessionRecord.Summary(message_count=state.persisted, usage=host.ledger.snapshot())
    state.snapshot = summary.usage
    host.store.append(host.session_id, [summary])
    return summary
