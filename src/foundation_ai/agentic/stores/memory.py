"""``InMemorySessionStore``: records in a dict (tests, benchmarks, throwaway sessions)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import msgspec

from ...types import SessionRecord
from .base import SessionHeader, SessionMeta, meta_delta

__all__ = ["InMemorySessionStore"]

_FAILED = SessionRecord.FailedAction


class InMemorySessionStore:
    """A ``SessionStore`` in memory; lost when the process ends. Thread-safe; its methods never
    block on I/O (the ``a*`` methods call them directly). :meth:`close` keeps the data: several
    sessions in turn (build, close, resume) may share one in-memory store."""

    def __init__(self) -> None:
        self._data: dict[str, list[SessionRecord]] = {}
        self._meta: dict[str, SessionMeta] = {}
        self._order: dict[str, int] = {}  # last write number per session: breaks ties of ``updated``
        self._writes = 0
        self._lock = threading.Lock()

    def append(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None:
        """Add a batch (``FailedAction`` records skipped) and update the session's metadata."""
        keep = [r for r in records if type(r) is not _FAILED]
        if not keep and header is None:
            return
        added, title = meta_delta(keep)
        now = time.time()
        with self._lock:
            old = self._meta.get(session_id)
            if old is None:
                old = SessionMeta(session_id=session_id, created=now, updated=now)
                self._data[session_id] = []
            self._data[session_id].extend(keep)
            changes: dict[str, object] = {"updated": now, "message_count": old.message_count + added}
            if old.title is None and title is not None:
                changes["title"] = title
            if header is not None:
                changes.update(
                    model=header.model, system_prompt=header.system_prompt, tools=tuple(header.tools)
                )
            self._meta[session_id] = msgspec.structs.replace(old, **changes)
            self._writes += 1
            self._order[session_id] = self._writes

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
            order = self._order
            rows = sorted(self._meta.values(), key=lambda m: order[m.session_id], reverse=True)
        end = None if limit is None else offset + max(limit, 0)
        return rows[max(offset, 0) : end]

    def session_meta(self, session_id: str) -> SessionMeta | None:
        """The session's metadata row, or ``None`` when unknown."""
        with self._lock:
            return self._meta.get(session_id)

    def close(self) -> None:
        """Nothing to release (the data stays)."""
