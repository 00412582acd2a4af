"""The ``SessionStore`` protocol and rebuilding a conversation from records."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from ...types import Messages, SessionRecord

__all__ = ["SessionStore", "conversation_of"]


@runtime_checkable
class SessionStore(Protocol):
    """Persists session records.

    ``append`` writes a batch atomically (all or nothing) and must skip records whose
    ``persistable`` is false (``FailedAction``); ``load`` returns a session's records in the
    order appended (``[]`` for an unknown id); ``sessions`` lists ids, oldest first.
    """

    def append(self, session_id: str, records: Sequence[SessionRecord]) -> None: ...

    def load(self, session_id: str) -> list[SessionRecord]: ...

    def sessions(self) -> list[str]: ...

    def close(self) -> None: ...


def conversation_of(records: Iterable[SessionRecord]) -> list[Messages]:
    """The conversation the records describe, oldest first: every ``Conversation`` message,
    in order, except those a ``Retracted`` record names (a message id appears once; a later
    record for the same id replaces the earlier one in place)."""
    order: list[str] = []
    msgs: dict[str, Messages] = {}
    retracted: set[str] = set()
    for r in records:
        if isinstance(r, SessionRecord.Conversation):
            m = r.message
            if m.id not in msgs:
                order.append(m.id)
            msgs[m.id] = m
        elif isinstance(r, SessionRecord.Retracted):
            retracted.update(r.message_ids)
    return [msgs[i] for i in order if i not in retracted]
