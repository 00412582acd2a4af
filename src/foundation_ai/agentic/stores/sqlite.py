"""``SqliteSessionStore``: records as JSON rows in an SQLite file (the default store).

Schema: ``records(session_id TEXT, seq INTEGER, kind TEXT, body BLOB, PRIMARY KEY(session_id,
seq))`` and ``sessions(session_id TEXT PRIMARY KEY, created REAL)``. The body is the record in
the foundation_ai JSON format (``to_json``). The database runs in WAL mode with
``synchronous=NORMAL``: a committed batch survives the process being killed (SIGKILL); each
``append`` is one transaction.

A row that no longer decodes (written by an older or buggy version) never makes the store
unreadable: :meth:`SqliteSessionStore.load` skips it with a logged warning and counts it in
:attr:`SqliteSessionStore.corrupt_records`; ``load(..., strict=True)`` raises
:class:`~foundation_ai.agentic.errors.CorruptRecordError` for that session only.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ...errors import FoundationAIError
from ...types import SessionRecord, from_json, to_json
from ..errors import CorruptRecordError, SessionClosedError

__all__ = ["SqliteSessionStore", "default_store_path"]

log = logging.getLogger(__name__)


def default_store_path() -> Path:
    """``<user data dir>/foundation-ai/sessions.sqlite3`` (``platformdirs.user_data_dir``)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("foundation-ai", appauthor=False)) / "sessions.sqlite3"


class SqliteSessionStore:
    """A ``SessionStore`` in an SQLite file (created with its parent directories).

    Args:
        path: the database file; default :func:`default_store_path`. ``":memory:"`` works too.

    Thread-safe (one connection guarded by a lock). After :meth:`close` every method raises
    :class:`~foundation_ai.agentic.errors.SessionClosedError`.

    Attributes:
        corrupt_records: session id -> the ``seq`` numbers of rows the last :meth:`load` of that
            session skipped because they no longer decode (absent when none were skipped).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        p = default_store_path() if path is None else path
        if str(p) != ":memory:":
            Path(p).parent.mkdir(parents=True, exist_ok=True)
        self.path = str(p)
        self._lock = threading.Lock()
        self._closed = False
        self.corrupt_records: dict[str, list[int]] = {}
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
            self._check_open()
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

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"the session store {self.path!r} is closed")

    def load(self, session_id: str, *, strict: bool = False) -> list[SessionRecord]:
        """The session's records in order (``[]`` when unknown).

        A row that does not decode is skipped with a logged warning and its ``seq`` noted in
        :attr:`corrupt_records` (so one bad row never makes a session unreadable).

        Raises:
            CorruptRecordError: ``strict`` and at least one row does not decode.
            SessionClosedError: the store was closed.
        """
        with self._lock:
            self._check_open()
            rows = self._conn.execute(
                "SELECT seq, body FROM records WHERE session_id=? ORDER BY seq", (session_id,)
            ).fetchall()
        out: list[SessionRecord] = []
        bad: list[int] = []
        detail = ""
        for seq, body in rows:
            try:
                out.append(from_json(bytes(body), SessionRecord))
            except (FoundationAIError, ValueError, TypeError) as exc:
                bad.append(int(seq))
                detail = detail or str(exc)
        if bad:
            self.corrupt_records[session_id] = bad
            if strict:
                raise CorruptRecordError(session_id, bad, detail)
            log.warning(
                "session %s: skipped %d undecodable stored record(s) (seq %s): %s",
                session_id,
                len(bad),
                bad,
                detail,
            )
        else:
            self.corrupt_records.pop(session_id, None)
        return out

    def sessions(self) -> list[str]:
        """Session ids, oldest first.

        Raises:
            SessionClosedError: the store was closed.
        """
        with self._lock:
            self._check_open()
            rows = self._conn.execute("SELECT session_id FROM sessions ORDER BY created, rowid").fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise ``SessionClosedError``."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
