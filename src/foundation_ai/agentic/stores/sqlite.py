"""``SqliteSessionStore``: records as JSON rows in an SQLite file (the default store).

Schema: ``records(session_id TEXT, seq INTEGER, kind TEXT, body BLOB, PRIMARY KEY(session_id,
seq))`` and ``sessions(session_id TEXT PRIMARY KEY, created REAL)``. The body is the record in
the foundation_ai JSON format (``to_json``). The database runs in WAL mode with
``synchronous=NORMAL``: a committed batch survives the process being killed (SIGKILL); each
``append`` is one transaction.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ...types import SessionRecord, from_json, to_json

__all__ = ["SqliteSessionStore", "default_store_path"]


def default_store_path() -> Path:
    """``<user data dir>/foundation-ai/sessions.sqlite3`` (``platformdirs.user_data_dir``)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("foundation-ai", appauthor=False)) / "sessions.sqlite3"


class SqliteSessionStore:
    """A ``SessionStore`` in an SQLite file (created with its parent directories).

    Args:
        path: the database file; default :func:`default_store_path`. ``":memory:"`` works too.

    Thread-safe (one connection guarded by a lock).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        p = default_store_path() if path is None else path
        if str(p) != ":memory:":
            Path(p).parent.mkdir(parents=True, exist_ok=True)
        self.path = str(p)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS records (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "kind TEXT NOT NULL, body BLOB NOT NULL, PRIMARY KEY (session_id, seq))"
        )
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS sessions (session_id TEXT PRIMARY KEY, created REAL NOT NULL)"
        )

    def append(self, session_id: str, records: Sequence[SessionRecord]) -> None:
        """Write a batch in one transaction (``FailedAction`` records skipped)."""
        keep = [r for r in records if r.persistable]
        if not keep:
            return
        with self._lock:
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                # read inside the write transaction: another process may share the file
                row = c.execute("SELECT MAX(seq) FROM records WHERE session_id=?", (session_id,)).fetchone()
                seq = 0 if row[0] is None else row[0] + 1
                if seq == 0:
                    c.execute(
                        "INSERT OR IGNORE INTO sessions(session_id, created) VALUES (?, ?)",
                        (session_id, time.time()),
                    )
                rows = []
                for r in keep:
                    rows.append((session_id, seq, r.__struct_config__.tag, to_json(r)))
                    seq += 1
                c.executemany("INSERT INTO records(session_id, seq, kind, body) VALUES (?,?,?,?)", rows)
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise

    def load(self, session_id: str) -> list[SessionRecord]:
        """The session's records in order (``[]`` when unknown)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT body FROM records WHERE session_id=? ORDER BY seq", (session_id,)
            ).fetchall()
        return [from_json(bytes(b), SessionRecord) for (b,) in rows]

    def sessions(self) -> list[str]:
        """Session ids, oldest first."""
        with self._lock:
            rows = self._conn.execute("SELECT session_id FROM sessions ORDER BY created, rowid").fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()
