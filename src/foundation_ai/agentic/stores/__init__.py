"""Session stores: where a session's ``SessionRecord``s and its metadata are persisted.

:class:`SessionStore` is the protocol (records plus one :class:`SessionMeta` row per session,
written together); :class:`InMemorySessionStore` keeps them in dicts and
:class:`SqliteSessionStore` in an SQLite file (the default: ``sessions.sqlite3`` in
``$FOUNDATION_AI_HOME`` or the user's data directory, WAL journal, one transaction per batch).
``FailedAction`` records are never persisted (stores drop them). Storage failures raise
:class:`~foundation_ai.agentic.errors.StoreError`.
"""

from __future__ import annotations

from .base import (
    SessionHeader,
    SessionMeta,
    SessionStore,
    aappend,
    alist_sessions,
    aload,
    asession_meta,
    conversation_of,
)
from .memory import InMemorySessionStore
from .sqlite import HOME_ENV, SqliteSessionStore, default_store_path

__all__ = [
    "HOME_ENV",
    "InMemorySessionStore",
    "SessionHeader",
    "SessionMeta",
    "SessionStore",
    "SqliteSessionStore",
    "aappend",
    "alist_sessions",
    "aload",
    "asession_meta",
    "conversation_of",
    "default_store_path",
]
