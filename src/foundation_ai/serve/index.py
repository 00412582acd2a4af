"""``SessionIndex``: who owns which session, and which Responses id continues which session.

An SQLite file next to the session store (tables ``sessions(session_id, owner, agent, title,
created, updated, waiting)`` and ``responses(response_id, session_id)``; ``waiting``: how many
tool calls of the session wait for approval). The session store keeps the
records; the index keeps what the HTTP layer needs to keep keys apart.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from typing import Any

__all__ = ["SessionIndex"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions(
  session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, agent TEXT NOT NULL,
  title TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_owner ON sessions(owner, updated);
CREATE TABLE IF NOT EXISTS responses(response_id TEXT PRIMARY KEY, session_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS responses_session ON responses(session_id, response_id);
"""


class SessionIndex:
    """Owners and titles of served sessions (thread-safe; one connection behind a lock).

    Args:
        path: an SQLite file, or ``":memory:"``.
    """

    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a commit survives a process crash (WAL)
        self._db.executescript(_SCHEMA)
        cols = [r[1] for r in self._db.execute("PRAGMA table_info(sessions)")]
        if "waiting" not in cols:  # an index file written before approvals existed
            self._db.execute("ALTER TABLE sessions ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0")
        self._lock = threading.Lock()

    def add(self, session_id: str, owner: str, agent: str, title: str) -> None:
        """Record a new session owned by ``owner`` (a key id)."""
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO sessions(session_id, owner, agent, title, created, updated) "
                "VALUES (?,?,?,?,?,?)",
                (session_id, owner, agent, title[:120], now, now),
            )

    def touch(self, session_id: str) -> None:
        """Mark the session as used now (the list is newest first)."""
        with self._lock:
            self._db.execute("UPDATE sessions SET updated=? WHERE session_id=?", (time.time(), session_id))

    def turn_ended(self, session_id: str, waiting: int) -> None:
        """:meth:`set_waiting` and :meth:`touch` in one write (a turn of the session ended with
        ``waiting`` tool calls waiting for approval, 0: none)."""
        with self._lock:
            self._db.execute(
                "UPDATE sessions SET waiting=?, updated=? WHERE session_id=?",
                (waiting, time.time(), session_id),
            )

    def set_waiting(self, session_id: str, count: int) -> None:
        """Record how many tool calls of the session wait for approval (0: none)."""
        with self._lock:
            self._db.execute("UPDATE sessions SET waiting=? WHERE session_id=?", (count, session_id))

    def set_title(self, session_id: str, title: str) -> None:
        """Set the session's title (shown in session lists)."""
        with self._lock:
            self._db.execute("UPDATE sessions SET title=? WHERE session_id=?", (title[:120], session_id))

    def get(self, session_id: str) -> dict[str, Any] | None:
        """``{"id", "owner", "agent", "title", "created", "updated", "waiting"}`` or ``None``."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {_COLS} FROM sessions WHERE session_id=?", (session_id,)
            ).fetchone()
        return _row(row) if row else None

    def list(self, owner: str, limit: int = 100, query: str | None = None) -> list[dict[str, Any]]:
        """The owner's sessions, most recently used first; with ``query``, only those whose
        title contains it (case-insensitive for ASCII letters, SQLite's ``LIKE``)."""
        where, args = _title_filter(query, "?")
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLS} FROM sessions WHERE owner=?{where} ORDER BY updated DESC LIMIT ?",
                (owner, *args, limit),
            ).fetchall()
        return [_row(r) for r in rows]

    def delete(self, session_id: str) -> None:
        """Forget the session (and its Responses ids): no key can reach it afterwards. Deleted
        with ``secure_delete`` and the WAL folded into the file: its title leaves the file."""
        with self._lock:
            self._db.execute("PRAGMA secure_delete=ON")
            try:
                self._db.execute("DELETE FROM responses WHERE session_id=?", (session_id,))
                self._db.execute("DELETE FROM sessions WHERE session_id=?", (session_id,))
            finally:
                self._db.execute("PRAGMA secure_delete=OFF")
            with contextlib.suppress(sqlite3.Error):  # a reader meanwhile: at its end
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def add_response(self, response_id: str, session_id: str) -> None:
        """Remember that ``response_id`` ended a turn of ``session_id``."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?,?)", (response_id, session_id))

    def session_of_response(self, response_id: str) -> str | None:
        """The session a Responses id belongs to, or ``None``."""
        with self._lock:
            row = self._db.execute(
                "SELECT session_id FROM responses WHERE response_id=?", (response_id,)
            ).fetchone()
        return row[0] if row else None

    def latest_response(self, session_id: str) -> str | None:
        """The session's latest Responses id (ids sort by creation time), or ``None``."""
        with self._lock:
            row = self._db.execute(
                "SELECT max(response_id) FROM responses WHERE session_id=?", (session_id,)
            ).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()


def _title_filter(query: str | None, mark: str) -> tuple[str, tuple[str, ...]]:
    """An SQL condition on ``title`` containing ``query`` (``%``, ``_`` and ``\\`` matched
    literally), with its argument; ``("", ())`` without a query. ``mark``: the placeholder."""
    if not query:
        return "", ()
    pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    return f" AND title LIKE {mark} ESCAPE '\\'", (pattern,)


_COLS = "session_id, owner, agent, title, created, updated, waiting"


def _row(r: Any) -> dict[str, Any]:
    return {
        "id": r[0],
        "owner": r[1],
        "agent": r[2],
        "title": r[3],
        "created": r[4],
        "updated": r[5],
        "waiting": r[6],
    }
