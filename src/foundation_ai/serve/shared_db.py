"""What several ``foundation-ai serve`` processes share in PostgreSQL besides the session
records: API keys (hashed), session owners, Responses ids, the running turns and their event
logs (``docs/serve.md``, "Several processes").

Tables (created on first use under an advisory lock, in the connection's ``search_path``):

- ``foundation_ai_serve_keys(id, label, created, sha256 UNIQUE)``: the SHA-256 of each key,
  never the key;
- ``foundation_ai_serve_sessions(session_id, owner, agent, title, created, updated)`` and
  ``foundation_ai_serve_responses(response_id, session_id)``: what
  :class:`~foundation_ai.serve.index.SessionIndex` keeps for one process;
- ``foundation_ai_serve_turns(turn_id, session_id, owner, created, done, next_seq)``: at most one
  turn not ``done`` per session (a partial unique index), so two processes cannot start two
  turns of one session;
- ``foundation_ai_serve_events(turn_id, seq, body)``: each turn's ``TurnEvent``s as JSON;
- ``foundation_ai_serve_pending(session_id, seq, body)``: steering sent while no turn ran,
  taken by the session's next turn.

PostgreSQL partial indexes: https://www.postgresql.org/docs/16/indexes-partial.html
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from typing import Any

import psycopg
import psycopg_pool

from ..agentic.stores.postgres import libpq_url, redact_url
from ..errors import ConfigurationError
from .index import _title_filter
from .keys import PREFIX

__all__ = ["CHANNEL", "SharedDatabase", "SharedIndex", "SharedKeyStore", "TurnLog", "Wakeups"]

log = logging.getLogger(__name__)

CHANNEL = "foundation_ai_serve"
"""The ``NOTIFY`` channel a turn's id is sent on when it publishes events or ends
(https://www.postgresql.org/docs/16/sql-notify.html)."""

_LOCK = 0x66_61_69_73  # advisory lock id while creating the tables ("fais")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS foundation_ai_serve_keys (id TEXT PRIMARY KEY, label TEXT NOT NULL,"
    " created DOUBLE PRECISION NOT NULL, sha256 TEXT NOT NULL UNIQUE)",
    "CREATE TABLE IF NOT EXISTS foundation_ai_serve_sessions (session_id TEXT PRIMARY KEY,"
    " owner TEXT NOT NULL, agent TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',"
    " created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX IF NOT EXISTS foundation_ai_serve_sessions_owner"
    " ON foundation_ai_serve_sessions (owner, updated DESC)",
    "CREATE TABLE IF NOT EXISTS foundation_ai_serve_responses (response_id TEXT PRIMARY KEY,"
    " session_id TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS foundation_ai_serve_responses_session"
    " ON foundation_ai_serve_responses (session_id, response_id)",
    "CREATE TABLE IF NOT EXISTS foundation_ai_serve_turns (turn_id TEXT PRIMARY KEY,"
    " session_id TEXT NOT NULL, owner TEXT NOT NULL, created DOUBLE PRECISION NOT NULL,"
    " done BOOLEAN NOT NULL DEFAULT false, next_seq INTEGER NOT NULL DEFAULT 0)",
    "CREATE UNIQUE INDEX IF NOT EXISTS foundation_ai_serve_one_running"
    " ON foundation_ai_serve_turns (session_id) WHERE NOT done",
    "CREATE INDEX IF NOT EXISTS foundation_ai_serve_turns_session"
    " ON foundation_ai_serve_turns (session_id, created DESC)",
    "CREATE INDEX IF NOT EXISTS foundation_ai_serve_turns_owner"
    " ON foundation_ai_serve_turns (owner) WHERE NOT done",
    "CREATE TABLE IF NOT EXISTS foundation_ai_serve_events (turn_id TEXT NOT NULL,"
    " seq INTEGER NOT NULL, body BYTEA NOT NULL, PRIMARY KEY (turn_id, seq))",
    "CREATE TABLE IF NOT EXISTS foundation_ai_serve_pending (session_id TEXT NOT NULL,"
    " seq BIGSERIAL, body BYTEA NOT NULL, PRIMARY KEY (session_id, seq))",
)


class SharedDatabase:
    """A connection pool to the shared database (tables created on open).

    Args:
        url: a ``postgresql://`` URL or libpq connection string.
        max_size: pooled connections.

    Raises:
        ConfigurationError: the database cannot be reached or the tables cannot be created.
    """

    def __init__(self, url: str, *, max_size: int = 8, timeout: float = 10.0) -> None:
        url = libpq_url(url)
        self.url = redact_url(url)
        try:  # one plain connection first: an unreachable server is one line with its cause, at once
            psycopg.connect(url, connect_timeout=max(int(timeout), 1)).close()
        except psycopg.Error as exc:
            first = " ".join((str(exc).strip().splitlines() or [type(exc).__name__])[0].split())
            detail = first.rsplit(" failed: ", 1)[-1]  # libpq: '... port 1 failed: Connection refused'
            raise ConfigurationError(f"cannot reach the database {self.url}: {detail}") from None
        self.pool = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            timeout=timeout,
            kwargs={"autocommit": True},
            open=False,
            name="foundation-ai-serve",
        )
        try:
            self.pool.open(wait=True, timeout=timeout)
            with self.pool.connection() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
                for stmt in _SCHEMA:
                    conn.execute(stmt)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            self.pool.close()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigurationError(f"cannot use the database {self.url}: {first}") from None

    def rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (``[]`` when it returns none)."""
        with self.pool.connection() as conn:
            cur = conn.execute(sql, args)
            return cur.fetchall() if cur.description is not None else []

    def close(self) -> None:
        """Close the pool."""
        self.pool.close()


class SharedKeyStore:
    """API keys in the shared database: the same interface as
    :class:`~foundation_ai.serve.keys.KeyStore` (``create``, ``revoke``, ``list``, ``verify``),
    so every process accepts the same keys and a revoked key stops working everywhere at once
    (each request looks its key up: one indexed query).

    Only the SHA-256 of a key is stored (a key is 256 random bits; see ``docs/serve.md``).
    """

    def __init__(self, db: SharedDatabase) -> None:
        self.db = db
        self.path = db.url

    def create(self, label: str = "") -> tuple[str, str]:
        """Make a new key; returns ``(key_id, key)`` (only the digest is stored)."""
        key = PREFIX + secrets.token_urlsafe(32)
        key_id = "key_" + secrets.token_hex(6)
        self.db.rows(
            "INSERT INTO foundation_ai_serve_keys VALUES (%s, %s, %s, %s)",
            (key_id, label, time.time(), _digest(key)),
        )
        return key_id, key

    def revoke(self, key_id: str) -> bool:
        """Remove a key by id; False when there is no such key."""
        return bool(
            self.db.rows("DELETE FROM foundation_ai_serve_keys WHERE id = %s RETURNING id", (key_id,))
        )

    def list(self) -> list[dict[str, Any]]:
        """``[{"id", "label", "created"}]`` (no digests), oldest first."""
        rows = self.db.rows("SELECT id, label, created FROM foundation_ai_serve_keys ORDER BY created")
        return [{"id": r[0], "label": r[1], "created": r[2]} for r in rows]

    def verify(self, key: str) -> str | None:
        """The id of the key ``key``, or ``None`` when it is not a valid key."""
        if not key.startswith(PREFIX):
            return None
        rows = self.db.rows("SELECT id FROM foundation_ai_serve_keys WHERE sha256 = %s", (_digest(key),))
        return str(rows[0][0]) if rows else None

    def __len__(self) -> int:
        return int(self.db.rows("SELECT count(*) FROM foundation_ai_serve_keys")[0][0])


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _meta(r: tuple[Any, ...]) -> dict[str, Any]:
    return {"id": r[0], "owner": r[1], "agent": r[2], "title": r[3], "created": r[4], "updated": r[5]}


class SharedIndex:
    """Session owners, titles and Responses ids in the shared database: the interface of
    :class:`~foundation_ai.serve.index.SessionIndex`."""

    def __init__(self, db: SharedDatabase) -> None:
        self.db = db
        self.listed_running: dict[str, tuple[bool, float]] = {}
        """session id -> (running, ``time.monotonic()``) as the last :meth:`list` saw it, for
        the listing's own use (taken once)."""

    def add(self, session_id: str, owner: str, agent: str, title: str) -> None:
        """Record a new session owned by ``owner`` (a key id)."""
        now = time.time()
        self.db.rows(
            "INSERT INTO foundation_ai_serve_sessions VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (session_id, owner, agent, title[:120], now, now),
        )

    def touch(self, session_id: str) -> None:
        """Mark the session as used now."""
        self.db.rows(
            "UPDATE foundation_ai_serve_sessions SET updated = %s WHERE session_id = %s",
            (time.time(), session_id),
        )

    def set_waiting(self, session_id: str, count: int) -> None:
        """Nothing: served turns never wait for approval."""

    def set_title(self, session_id: str, title: str) -> None:
        """Set the session's title."""
        self.db.rows(
            "UPDATE foundation_ai_serve_sessions SET title = %s WHERE session_id = %s",
            (title[:120], session_id),
        )

    def get(self, session_id: str) -> dict[str, Any] | None:
        """``{"id", "owner", "agent", "title", "created", "updated"}`` or ``None``."""
        rows = self.db.rows("SELECT * FROM foundation_ai_serve_sessions WHERE session_id = %s", (session_id,))
        return _meta(rows[0]) if rows else None

    def list(self, owner: str, limit: int = 100, query: str | None = None) -> list[dict[str, Any]]:
        """The owner's sessions, most recently used first (whether each runs a turn is kept in
        :attr:`listed_running`, so a listing costs one query); with ``query``, only those whose
        title contains it (case-insensitive, ``ILIKE``)."""
        where, args = _title_filter(query, "%s")
        rows = self.db.rows(
            "SELECT s.*, EXISTS (SELECT 1 FROM foundation_ai_serve_turns t"
            " WHERE t.session_id = s.session_id AND NOT t.done)"
            f" FROM foundation_ai_serve_sessions s WHERE owner = %s{where.replace('LIKE', 'ILIKE')}"
            " ORDER BY updated DESC LIMIT %s",
            (owner, *args, limit),
        )
        now = time.monotonic()
        if len(self.listed_running) > 10_000:
            self.listed_running.clear()
        self.listed_running.update((str(r[0]), (bool(r[6]), now)) for r in rows)
        return [_meta(r) for r in rows]

    def delete(self, session_id: str) -> None:
        """Forget the session (and its Responses ids): no key can reach it afterwards."""
        self.db.rows("DELETE FROM foundation_ai_serve_responses WHERE session_id = %s", (session_id,))
        self.db.rows("DELETE FROM foundation_ai_serve_sessions WHERE session_id = %s", (session_id,))

    def add_response(self, response_id: str, session_id: str) -> None:
        """Remember that ``response_id`` ended a turn of ``session_id``."""
        self.db.rows(
            "INSERT INTO foundation_ai_serve_responses VALUES (%s, %s)"
            " ON CONFLICT (response_id) DO UPDATE SET session_id = EXCLUDED.session_id",
            (response_id, session_id),
        )

    def session_of_response(self, response_id: str) -> str | None:
        """The session a Responses id belongs to, or ``None``."""
        rows = self.db.rows(
            "SELECT session_id FROM foundation_ai_serve_responses WHERE response_id = %s", (response_id,)
        )
        return str(rows[0][0]) if rows else None

    def latest_response(self, session_id: str) -> str | None:
        """The session's latest Responses id (ids sort by creation time), or ``None``."""
        rows = self.db.rows(
            "SELECT max(response_id) FROM foundation_ai_serve_responses WHERE session_id = %s", (session_id,)
        )
        return str(rows[0][0]) if rows and rows[0][0] is not None else None

    def close(self) -> None:
        """Nothing to do: the :class:`SharedDatabase` owns the connections."""


class TurnLog:
    """The running turns and their event logs (the :class:`~foundation_ai.durable.served.EventSink`
    of served turns)."""

    def __init__(self, db: SharedDatabase) -> None:
        self.db = db

    def begin(self, turn_id: str, session_id: str, owner: str) -> bool:
        """Record a new running turn; False when the session already runs one."""
        try:
            self.db.rows(
                "INSERT INTO foundation_ai_serve_turns (turn_id, session_id, owner, created)"
                " VALUES (%s, %s, %s, %s)",
                (turn_id, session_id, owner, time.time()),
            )
        except psycopg.errors.UniqueViolation:
            return False
        return True

    def running_count(self, owner: str) -> int:
        """Turns of ``owner`` not ended."""
        return int(
            self.db.rows(
                "SELECT count(*) FROM foundation_ai_serve_turns WHERE owner = %s AND NOT done", (owner,)
            )[0][0]
        )

    def latest(self, session_id: str) -> tuple[str, str, bool] | None:
        """``(turn_id, owner, done)`` of the session's latest turn, or ``None``."""
        rows = self.db.rows(
            "SELECT turn_id, owner, done FROM foundation_ai_serve_turns WHERE session_id = %s"
            " ORDER BY created DESC LIMIT 1",
            (session_id,),
        )
        return (str(rows[0][0]), str(rows[0][1]), bool(rows[0][2])) if rows else None

    def running(self, session_ids: list[str]) -> set[str]:
        """The sessions among ``session_ids`` that run a turn."""
        rows = self.db.rows(
            "SELECT session_id FROM foundation_ai_serve_turns WHERE NOT done AND session_id = ANY(%s)",
            (session_ids,),
        )
        return {str(r[0]) for r in rows}

    def publish(self, turn_id: str, events: list[bytes], *, end: bool = False) -> None:
        """Append ``events`` to the turn's log (one transaction); ``end``: and mark the turn
        ended in the same transaction."""
        n = len(events)
        with self.db.pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "UPDATE foundation_ai_serve_turns SET next_seq = next_seq + %s, done = done OR %s"
                " WHERE turn_id = %s RETURNING next_seq - %s",
                (n, end, turn_id, n),
            ).fetchone()
            first = int(row[0]) if row else 0
            with conn.cursor() as cur:
                if events:
                    cur.executemany(
                        "INSERT INTO foundation_ai_serve_events VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                        [(turn_id, first + i, ev) for i, ev in enumerate(events)],
                    )
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, turn_id))  # sent at commit

    def finish(self, turn_id: str, events: list[bytes] | None = None) -> None:
        """Append the turn's last ``events`` and mark it ended (one transaction)."""
        self.publish(turn_id, events or [], end=True)

    def read(self, turn_id: str, start: int) -> tuple[list[bytes], bool]:
        """The turn's events from ``start`` on, and whether the turn had ended before they were
        read (then no more will come)."""
        with self.db.pool.connection() as conn:
            done = conn.execute(
                "SELECT done FROM foundation_ai_serve_turns WHERE turn_id = %s", (turn_id,)
            ).fetchone()
            rows = conn.execute(
                "SELECT body FROM foundation_ai_serve_events WHERE turn_id = %s AND seq >= %s ORDER BY seq",
                (turn_id, start),
            ).fetchall()
        return [bytes(r[0]) for r in rows], bool(done is None or done[0])

    def of_revoked_keys(self) -> list[tuple[str, str]]:
        """``(turn_id, owner)`` of the turns not ended whose key is no longer in
        ``foundation_ai_serve_keys`` (revoked): one query on the partial index of running turns."""
        rows = self.db.rows(
            "SELECT turn_id, owner FROM foundation_ai_serve_turns t WHERE NOT done"
            " AND NOT EXISTS (SELECT 1 FROM foundation_ai_serve_keys k WHERE k.id = t.owner)"
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    def forget_session(self, session_id: str) -> list[str]:
        """Delete the session's turns, their event logs and its kept steering messages; the
        ids of the turns deleted."""
        with self.db.pool.connection() as conn, conn.transaction():
            conn.execute(
                "DELETE FROM foundation_ai_serve_events WHERE turn_id IN"
                " (SELECT turn_id FROM foundation_ai_serve_turns WHERE session_id = %s)",
                (session_id,),
            )
            gone = conn.execute(
                "DELETE FROM foundation_ai_serve_turns WHERE session_id = %s RETURNING turn_id", (session_id,)
            ).fetchall()
            conn.execute("DELETE FROM foundation_ai_serve_pending WHERE session_id = %s", (session_id,))
        return [str(r[0]) for r in gone]

    def request_abort(self, turn_id: str) -> None:
        """Tell every process (``NOTIFY``) to abort turn ``turn_id`` now if it runs it."""
        self.db.rows("SELECT pg_notify(%s, %s)", (CHANNEL, "abort:" + turn_id))

    def queue_pending(self, session_id: str, body: bytes) -> None:
        """Keep a steering message for the session's next turn."""
        self.db.rows(
            "INSERT INTO foundation_ai_serve_pending (session_id, body) VALUES (%s, %s)", (session_id, body)
        )

    def take_pending(self, session_id: str) -> list[bytes]:
        """The session's kept steering messages, oldest first (removed)."""
        rows = self.db.rows(
            "DELETE FROM foundation_ai_serve_pending WHERE session_id = %s RETURNING seq, body", (session_id,)
        )
        return [bytes(r[1]) for r in sorted(rows, key=lambda r: int(r[0]))]


class Wakeups:
    """One ``LISTEN`` connection per process: wakes the followers of a turn (an
    ``asyncio.Event`` per turn id, set on its event loop) as soon as the turn publishes, so
    followers do not poll, and passes abort requests (:meth:`TurnLog.request_abort`) to
    ``on_abort``. When the connection fails, :attr:`alive` turns False (followers
    then poll)."""

    def __init__(self, url: str, on_abort: Any = None) -> None:
        self.on_abort = on_abort  # called with a turn id (on the listening thread)
        self.conn = psycopg.connect(libpq_url(url), autocommit=True)
        self.conn.execute(f"LISTEN {CHANNEL}")
        self.waiters: dict[str, tuple[Any, Any]] = {}  # turn id -> (loop, asyncio.Event)
        self.alive = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="foundation-ai-serve-listen")
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for n in self.conn.notifies(timeout=0.5):
                    if n.payload.startswith("abort:"):
                        if self.on_abort is not None:
                            self.on_abort(n.payload[6:])
                        continue
                    w = self.waiters.get(n.payload)
                    if w is not None:
                        w[0].call_soon_threadsafe(w[1].set)
        except Exception as exc:  # the connection died: followers fall back to polling
            if not self._stop.is_set():
                log.warning("serve: the LISTEN connection failed (%s); followers poll", exc)
        finally:
            self.alive = False

    def register(self, turn_id: str, loop: Any, event: Any) -> None:
        """Set ``event`` (on ``loop``) whenever turn ``turn_id`` publishes or ends."""
        self.waiters[turn_id] = (loop, event)

    def unregister(self, turn_id: str) -> None:
        """Stop waking for ``turn_id``."""
        self.waiters.pop(turn_id, None)

    def close(self) -> None:
        """Stop listening and close the connection."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.conn.close()
