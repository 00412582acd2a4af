"""Session stores (docs/concepts.md: Stores): where a session's ``SessionRecord``s are persisted.

:class:`SessionStore` is the protocol; :class:`InMemorySessionStore` keeps records in a dict and
:class:`SqliteSessionStore` in an SQLite file (the default: ``sessions.sqlite3`` in the user's
data directory, WAL journal, one transaction per batch). ``FailedAction`` records are never
persisted (stores drop them).
"""

from __future__ import annotations

from .base import SessionStore, conversation_of
from .memory import InMemorySessionStore
from .sqlite import SqliteSessionStore, default_store_path

__all__ = [
    "InMemorySessionStore",
    "SessionStore",
    "SqliteSessionStore",
    "conversation_of",
    "default_store_path",
]
