"""``InMemorySessionStore``: records in a dict (tests, benchmarks, throwaway sessions)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ...types import SessionRecord

__all__ = ["InMemorySessionStore"]

_FAILED = SessionRecord.FailedAction


class InMemorySessionStore:
    """A ``SessionStore`` in memory; lost when the process ends. Thread-safe."""

    def __init__(self) -> None:
        self._data: dict[str, list[SessionRecord]] = {}
        self._lock = threading.Lock()

    def append(self, session_id: str, records: Sequence[SessionRecord]) -> None:
        """Add a batch (``FailedAction`` records skipped)."""
        keep = [r for r in records if type(r) is not _FAILED]
        with self._lock:
            self._data.setdefault(session_id, []).extend(keep)

    def load(self, session_id: str) -> list[SessionRecord]:
        """A copy of the session's records (``[]`` when unknown)."""
        with self._lock:
            return list(self._data.get(session_id, ()))

    def sessions(self) -> list[str]:
        """Session ids in creation order."""
        with self._lock:
            return list(self._data)

    def close(self) -> None:
        """Nothing to release."""
