"""The only code of the turn loop that writes to the session store.

Idempotent on replay: a durable runner that runs a turn again after a crash (see
``docs/turn-loop.md``, "Step runner") sets ``host.replay`` to a :class:`Replay` holding what the
interrupted run already stored; the same messages (same id, equal value) and the ``Summary`` are
then taken from it instead of being written twice. Without ``host.replay`` nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ...types import Messages, SessionRecord
from .host import TurnHost
from .state import TurnState

__all__ = ["Replay", "persist", "persist_records", "persist_summary"]


@dataclass(slots=True)
class Replay:
    """What an interrupted run of the same turn already stored (set as ``host.replay``).

    ``messages``: the conversation messages stored by that run, by id; ``summary``: its stored
    ``Summary`` (``None``: not reached). :func:`persist` skips a message equal to the stored
    one with its id (it still joins the conversation and the turn's records);
    :func:`persist_summary` skips the write when ``summary`` is set.
    """

    messages: dict[str, Messages] = field(default_factory=dict)
    summary: SessionRecord | None = None


def _not_stored(host: TurnHost, msgs: Sequence[Messages]) -> Sequence[Messages]:
    replay: Replay | None = getattr(host, "replay", None)
    if replay is None or not replay.messages:
        return msgs
    fresh = []
    for m in msgs:
        if replay.messages.get(m.id) == m:
            del replay.messages[m.id]
        else:
            fresh.append(m)
    return fresh


def persist(host: TurnHost, state: TurnState, msgs: Sequence[Messages]) -> None:
    """Append ``msgs`` to the conversation, to ``state.records`` (as ``Conversation``) and to
    the store, in one ``append`` call."""
    if not msgs:
        return
    recs = [SessionRecord.Conversation(message=m) for m in msgs]
    host.messages.extend(msgs)
    state.records.extend(recs)
    state.persisted += len(msgs)
    fresh = _not_stored(host, msgs)
    if fresh is not msgs:
        recs = [SessionRecord.Conversation(message=m) for m in fresh]
    if recs:
        host.store.append(host.session_id, recs)


def persist_summary(host: TurnHost, state: TurnState) -> SessionRecord:
    """Store the turn's ``Summary`` (messages persisted, cumulative usage) and return it; it is
    not added to ``state.records`` (the caller places it)."""
    summary = SessionRecord.Summary(message_count=state.persisted, usage=host.ledger.snapshot())
    state.snapshot = summary.usage
    replay: Replay | None = getattr(host, "replay", None)
    if replay is not None and replay.summary is not None:
        replay.summary = None  # stored by the interrupted run
        return summary
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
