"""``InMemorySessionStore``: records in a dict (tests, benchmarks, throwaway sessions)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from ...types import SessionRecord
from .base import SessionHeader, SessionMeta, title_of

__all__ = ["InMemorySessionStore"]

_now = time.time
_FAILED = SessionRecord.FailedAction
_CONVERSATION = SessionRecord.Conversation


class InMemorySessionStore:
    """A ``SessionStore`` in memory; lost when the process ends. Thread-safe; its methods never
    block on I/O (``nonblocking``: the turn loop calls them directly, and the ``a*`` methods
    too). :meth:`close` keeps the data: several sessions in turn (build, close, resume) may share
    one in-memory store."""

    nonblocking: ClassVar[bool] = True
    """Its methods never wait for I/O: async callers may call them on the event loop."""

    def __init__(self) -> None:
        self._data: dict[str, list[SessionRecord]] = {}
        # session id -> [created, updated, message_count, title, model, system_prompt, tools, write#,
        # base_url]
        self._meta: dict[str, list[Any]] = {}
        self._writes = 0  # the write number breaks ties of ``updated`` when listing
        self._lock = threading.Lock()

    def append(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None:
        """Add a batch (``FailedAction`` records skipped) and update the session's metadata."""
        if len(records) == 1 and header is None:  # the usual write: one record, no loop, no copy
            r = records[0]
            kind = type(r)
            if kind is _FAILED:
                return
            now = _now()
            lock = self._lock
            lock.acquire()  # rather than ``with``: fewer instructions for this hot path
            try:
                row = self._meta.get(session_id)
                stored = self._data.get(session_id)
                if row is None or stored is None:
                    self._add(session_id, [r], 1 if kind is _CONVERSATION else 0, None, now)
                    return
                stored.append(r)
                row[1] = now
                if kind is _CONVERSATION:
                    row[2] += 1
                    if row[3] is None:
                        row[3] = title_of((r,))
                row[7] = self._writes = self._writes + 1
            finally:
                lock.release()
            return
        keep: list[SessionRecord] = []
        added = 0
        for r in records:
            kind = type(r)
            if kind is _CONVERSATION:
                keep.append(r)
                added += 1
            elif kind is not _FAILED:
                keep.append(r)
        if not keep and header is None:
            return
        now = _now()
        with self._lock:
            self._add(session_id, keep, added, header, now)

    def _add(
        self, session_id: str, keep: list[SessionRecord], added: int, header: SessionHeader | None, now: float
    ) -> None:
        """Add ``keep`` (``added`` of them ``Conversation`` records) and update the metadata;
        under the lock."""
        meta = self._meta
        row = meta.get(session_id)
        if row is None:
            row = meta[session_id] = [now, now, 0, None, None, None, (), 0, None]
        data = self._data
        stored = data.get(session_id)
        if stored is None:
            data[session_id] = keep
        else:
            stored += keep
        row[1] = now
        if added:
            row[2] += added
            if row[3] is None:
                row[3] = title_of(keep)
        if header is not None:
            row[4], row[5], row[6] = header.model, header.system_prompt, tuple(header.tools)
            row[8] = header.base_url
        row[7] = self._writes = self._writes + 1

    async def aappend(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None:
        """:meth:`append` (nothing blocks: called directly)."""
        self.append(session_id, records, header)

    async def aload(self, session_id: str) -> list[SessionRecord]:
        """:meth:`load`."""
        return self.load(session_id)

    async def alist_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionMeta]:
        """:meth:`list_sessions`."""
        return self.list_sessions(limit, offset)

    async def asession_meta(self, session_id: str) -> SessionMeta | None:
        """:meth:`session_meta`."""
        return self.session_meta(session_id)

    def load(self, session_id: str) -> list[SessionRecord]:
        """A copy of the session's records (``[]`` when unknown)."""
        with self._lock:
            return list(self._data.get(session_id, ()))

    def sessions(self) -> list[str]:
        """Session ids in creation order."""
        with self._lock:
            return list(self._data)

    def list_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionMeta]:
        """Metadata rows, most recently updated first."""
        with self._lock:
            rows = sorted(self._meta.items(), key=lambda item: item[1][7], reverse=True)
            end = None if limit is None else offset + max(limit, 0)
            return [_as_meta(sid, row) for sid, row in rows[max(offset, 0) : end]]

    def session_meta(self, session_id: str) -> SessionMeta | None:
        """The session's metadata row, or ``None`` when unknown."""
        with self._lock:
            row = self._meta.get(session_id)
            return None if row is None else _as_meta(session_id, row)

    def delete_session(self, session_id: str) -> bool:
        """Forget the session's records and metadata; True when it had any."""
        with self._lock:
            had = self._data.pop(session_id, None) is not None
            return self._meta.pop(session_id, None) is not None or had

    def close(self) -> None:
        """Nothing to release (the data stays)."""


def _as_meta(session_id: str, row: list[Any]) -> SessionMeta:
    created, updated, count, title, model, system, tools, _, base_url = row
    return SessionMeta(session_id, created, updated, count, title, model, system, tools, base_url)
