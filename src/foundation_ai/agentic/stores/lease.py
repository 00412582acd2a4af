"""Session leases: one running turn per stored session, in every process.

A turn takes its session's lease before its first phase and gives it back when it ends
(``AgentSession``; ``docs/sessions.md``, "One running turn per session"). The lease is a row in
the store's own database (table ``session_leases``: SQLite file or PostgreSQL, beside the
records) holding the running turn's id, its holder (``host:pid``), a fencing ``token`` that
grows by one at every take, and an expiry time. While the turn runs, a keeper thread renews it
every third of its duration; a holder that crashed stops renewing and its lease expires, after
which the next turn takes it over (a new token). Another turn asking while the lease is live is
refused with :class:`SessionBusyError`, naming the running turn. A durable turn recovered on
another worker asks with the same turn id as its crashed run (the DBOS workflow id) and takes
the lease at once: the workflow's ownership already decides which run goes on.

Stores without a lease table (the in-memory store, a custom store) get a lease kept in this
process (one running turn per session among the sessions of this process).

Clocks: SQLite leases use this machine's clock (the file is local); PostgreSQL leases use the
server's clock, so workers on machines with skewed clocks agree.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import os
import socket
import sqlite3
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from ...errors import FoundationAIError
from ...ids import new_scru128
from ..errors import StoreError

__all__ = [
    "LEASE_SECONDS",
    "Lease",
    "SessionBusyError",
    "lease_holder",
    "lease_of",
    "release_lease",
    "renew_lease",
    "atake_session_lease",
    "give_back_lease",
    "holder_is_gone",
    "take_lease",
    "take_turn_lease",
]

log = logging.getLogger(__name__)

LEASE_SECONDS = 30.0
"""How long a lease lives without renewal (seconds): a crashed holder's session is free again
this long after its last renewal."""


class SessionBusyError(FoundationAIError):
    """A turn is already running on the session, in this or another process.

    Attributes:
        session_id: the session.
        turn_id: the running turn's id.
        holder: who runs it (``host:pid``).
        expires_in: seconds until its lease expires unless renewed.
    """

    def __init__(self, session_id: str, turn_id: str, holder: str, expires_in: float) -> None:
        super().__init__(
            f"session {session_id!r} has a running turn {turn_id} (held by {holder}; its lease "
            f"runs {max(expires_in, 0.0):.1f} s more unless renewed): wait for it to end or abort it"
        )
        self.session_id, self.turn_id, self.holder, self.expires_in = session_id, turn_id, holder, expires_in


@dataclass(slots=True)
class Lease:
    """A held lease: ``token`` fences it (a takeover makes a larger one); ``lost`` is set once
    a renewal found the lease taken by another turn."""

    session_id: str
    turn_id: str
    holder: str
    token: int
    seconds: float
    store: Any = field(repr=False, default=None)
    lost: bool = False


def lease_holder() -> str:
    """This process as a lease holder: ``"<host>:<pid>"`` (made once per process: a forked
    child makes its own)."""
    if not _HOLDER:
        _HOLDER.append(f"{socket.gethostname()}:{os.getpid()}")
    return _HOLDER[0]


_HOLDER: list[str] = []  # [lease_holder()] once made; emptied in a forked child
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_HOLDER.clear)


def holder_is_gone(holder: str) -> bool:
    """True when ``holder`` (``host:pid``) is a process of this machine that no longer runs
    (``kill(pid, 0)`` finds none): its lease can be taken over at once, without waiting for
    it to expire. A holder on another machine is never judged gone (its lease expires)."""
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # e.g. PermissionError: it runs, under another user
        return False
    return False


# -- backends -----------------------------------------------------------------------------------

_SQLITE_TABLE = (
    "CREATE TABLE IF NOT EXISTS session_leases (session_id TEXT PRIMARY KEY, turn_id TEXT NOT NULL, "
    "holder TEXT NOT NULL, token INTEGER NOT NULL, expires REAL NOT NULL)"
)
_PG_TABLE = (
    "CREATE TABLE IF NOT EXISTS foundation_ai_session_leases (session_id TEXT PRIMARY KEY, "
    "turn_id TEXT NOT NULL, holder TEXT NOT NULL, token BIGINT NOT NULL, expires DOUBLE PRECISION NOT NULL)"
)
_PG_NOW = "extract(epoch from clock_timestamp())"

Row = tuple[str, str, int, float]  # turn_id, holder, token, seconds left


class _Local:
    """Leases kept in this process (stores without a lease table)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, str], tuple[str, str, int, float]] = {}
        self.lock = threading.Lock()

    def take(self, store: Any, sid: str, turn: str, holder: str, seconds: float) -> tuple[int, Row | None]:
        key = (id(store), sid)
        with self.lock:
            now = time.monotonic()
            row = self.rows.get(key)
            if row is not None and row[3] > now and row[0] != turn:
                return 0, (row[0], row[1], row[2], row[3] - now)
            token = 1 if row is None else row[2] + 1
            self.rows[key] = (turn, holder, token, now + seconds)
            return token, None

    def renew(self, store: Any, sid: str, token: int, seconds: float) -> bool:
        key = (id(store), sid)
        with self.lock:
            row = self.rows.get(key)
            if row is None or row[2] != token:
                return False
            self.rows[key] = (row[0], row[1], token, time.monotonic() + seconds)
            return True

    def release(self, store: Any, sid: str, token: int) -> None:
        key = (id(store), sid)
        with self.lock:
            row = self.rows.get(key)
            if row is not None and row[2] == token:
                del self.rows[key]

    def current(self, store: Any, sid: str) -> Row | None:
        with self.lock:
            row = self.rows.get((id(store), sid))
            now = time.monotonic()
            return None if row is None or row[3] <= now else (row[0], row[1], row[2], row[3] - now)


_LOCAL = _Local()


class _Sqlite:
    """Leases in the store's SQLite file, on a connection of their own (one per store, kept
    while the store lives; the store's own connection and lock are left alone)."""

    def __init__(self) -> None:
        self.conns: weakref.WeakKeyDictionary[Any, tuple[sqlite3.Connection, threading.Lock]] = (
            weakref.WeakKeyDictionary()
        )
        self.lock = threading.Lock()

    def _conn(self, store: Any) -> tuple[sqlite3.Connection, threading.Lock]:
        with self.lock:
            made = self.conns.get(store)
            if made is None:
                c = sqlite3.connect(
                    store.path, timeout=store.busy_timeout, isolation_level=None, check_same_thread=False
                )
                c.execute("PRAGMA synchronous=NORMAL")  # the store's file is in WAL mode
                c.execute(_SQLITE_TABLE)
                made = self.conns[store] = (c, threading.Lock())
            return made

    def close(self, store: Any) -> None:
        """Close the lease connection of ``store`` (when the store closes: SQLite then removes
        the file's ``-wal``/``-shm`` companions once the last connection is gone)."""
        with self.lock:
            made = self.conns.pop(store, None)
        if made is not None:
            with made[1]:
                made[0].close()

    def take(self, store: Any, sid: str, turn: str, holder: str, seconds: float) -> tuple[int, Row | None]:
        c, lock = self._conn(store)
        with lock:
            c.execute("BEGIN IMMEDIATE")
            try:
                now = time.time()
                row = c.execute(
                    "SELECT turn_id, holder, token, expires FROM session_leases WHERE session_id=?", (sid,)
                ).fetchone()
                if row is not None and row[3] > now and row[0] != turn and not holder_is_gone(row[1]):
                    c.execute("ROLLBACK")
                    return 0, (row[0], row[1], int(row[2]), row[3] - now)
                token = 1 if row is None else int(row[2]) + 1
                c.execute(
                    "INSERT INTO session_leases VALUES (?,?,?,?,?) ON CONFLICT(session_id) DO UPDATE SET "
                    "turn_id=excluded.turn_id, holder=excluded.holder, token=excluded.token, "
                    "expires=excluded.expires",
                    (sid, turn, holder, token, now + seconds),
                )
                c.execute("COMMIT")
                return token, None
            except BaseException:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise

    def renew(self, store: Any, sid: str, token: int, seconds: float) -> bool:
        c, lock = self._conn(store)
        with lock:
            cur = c.execute(
                "UPDATE session_leases SET expires=? WHERE session_id=? AND token=?",
                (time.time() + seconds, sid, token),
            )
            return cur.rowcount == 1

    def release(self, store: Any, sid: str, token: int) -> None:
        c, lock = self._conn(store)
        with lock:
            c.execute("DELETE FROM session_leases WHERE session_id=? AND token=?", (sid, token))

    def current(self, store: Any, sid: str) -> Row | None:
        c, lock = self._conn(store)
        with lock:
            row = c.execute(
                "SELECT turn_id, holder, token, expires FROM session_leases WHERE session_id=?", (sid,)
            ).fetchone()
        now = time.time()
        return None if row is None or row[3] <= now else (row[0], row[1], int(row[2]), row[3] - now)


class _Postgres:
    """Leases in the store's PostgreSQL database (its connection pool; the server's clock)."""

    def __init__(self) -> None:
        self.made: weakref.WeakSet[Any] = weakref.WeakSet()

    def _pool(self, store: Any) -> Any:
        pool = store._pool
        if store not in self.made:
            with pool.connection() as conn:
                conn.execute(_PG_TABLE)
            self.made.add(store)
        return pool

    def take(self, store: Any, sid: str, turn: str, holder: str, seconds: float) -> tuple[int, Row | None]:
        with self._pool(store).connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO foundation_ai_session_leases VALUES (%s, '', '', 0, 0) "
                "ON CONFLICT (session_id) DO NOTHING",
                (sid,),
            )
            row = conn.execute(
                f"SELECT turn_id, holder, token, expires - {_PG_NOW} FROM foundation_ai_session_leases "
                "WHERE session_id=%s FOR UPDATE",
                (sid,),
            ).fetchone()
            assert row is not None
            if row[3] > 0 and row[0] != turn and not holder_is_gone(row[1]):
                return 0, (row[0], row[1], int(row[2]), float(row[3]))
            token = int(row[2]) + 1
            conn.execute(
                f"UPDATE foundation_ai_session_leases SET turn_id=%s, holder=%s, token=%s, "
                f"expires={_PG_NOW} + %s WHERE session_id=%s",
                (turn, holder, token, seconds, sid),
            )
            return token, None

    def renew(self, store: Any, sid: str, token: int, seconds: float) -> bool:
        with self._pool(store).connection() as conn:
            cur = conn.execute(
                f"UPDATE foundation_ai_session_leases SET expires={_PG_NOW} + %s "
                "WHERE session_id=%s AND token=%s",
                (seconds, sid, token),
            )
            return bool(cur.rowcount == 1)

    def release(self, store: Any, sid: str, token: int) -> None:
        with self._pool(store).connection() as conn:
            conn.execute(
                "UPDATE foundation_ai_session_leases SET expires=0 WHERE session_id=%s AND token=%s",
                (sid, token),
            )

    def current(self, store: Any, sid: str) -> Row | None:
        with self._pool(store).connection() as conn:
            row = conn.execute(
                f"SELECT turn_id, holder, token, expires - {_PG_NOW} FROM foundation_ai_session_leases "
                "WHERE session_id=%s",
                (sid,),
            ).fetchone()
        return None if row is None or row[3] <= 0 else (row[0], row[1], int(row[2]), float(row[3]))


_SQLITE, _POSTGRES = _Sqlite(), _Postgres()


def flush_store_leases(store: Any) -> None:
    """Write the releases this process gave back through ``store`` and has not written yet
    (the keeper writes them off the turn's path): a store calls this before it closes, so a
    closed store leaves no lease to expire behind."""
    _KEEPER.flush_store(store)


def close_sqlite_leases(store: Any) -> None:
    """Close the lease connection kept for a ``SqliteSessionStore`` (its ``close`` calls this)."""
    _SQLITE.close(store)


def _backend(store: Any) -> tuple[Any, Any]:
    """(backend, the store it works on): a wrapper's inner store is used (``inner``)."""
    inner = getattr(store, "inner", None)
    if inner is not None:
        store = inner
    sqlite = _sqlite_store_class()
    if isinstance(store, sqlite) and store.path != ":memory:" and not store.read_only:
        return _SQLITE, store
    postgres = _PG_CLASS[0] if _PG_CLASS else _postgres_store_class()
    if postgres is not None and isinstance(store, postgres):
        return _POSTGRES, store
    return _LOCAL, store


@functools.cache
def _sqlite_store_class() -> Any:
    """``SqliteSessionStore`` (``stores/sqlite.py`` imports this module), imported once and
    kept: an import statement run per lookup cost some 14,000 instructions, four a turn."""
    from .sqlite import SqliteSessionStore

    return SqliteSessionStore


_PG_CLASS: list[Any] = []  # [PostgresSessionStore or None] once looked up


def _postgres_store_class() -> Any:
    """``PostgresSessionStore``, or ``None`` without the postgres extra; looked up once (a
    failed import is not cached by Python: retried per turn it cost ~8 ms each time)."""
    if not _PG_CLASS:
        try:
            from .postgres import PostgresSessionStore
        except ImportError:  # the postgres extra is not installed
            _PG_CLASS.append(None)
        else:
            _PG_CLASS.append(PostgresSessionStore)
    return _PG_CLASS[0]


# -- the keeper ---------------------------------------------------------------------------------


def _write_releases(leases: list[Lease]) -> None:
    for lease in leases:
        try:
            release_lease(lease)
        except Exception as exc:  # it expires by itself
            log.warning("could not release the lease of session %s: %s", lease.session_id, exc)


class _Keeper:
    """One daemon thread per process renewing the held leases every third of their duration."""

    def __init__(self) -> None:
        self.held: dict[int, Lease] = {}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None
        self.pause = 60.0
        self.pending: dict[tuple[int, str], Lease] = {}  # released by the thread soon
        self.releasing = threading.Lock()  # held while pending releases are written

    def release_later(self, lease: Lease) -> None:
        with self.lock:
            self.held.pop(id(lease), None)
            self.pending[(id(lease.store), lease.session_id)] = lease
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self.run, name="foundation-ai-leases", daemon=True)
                self.thread.start()
        self.wake.set()

    def flush(self, session_id: str | None = None) -> None:
        """Write the pending releases (of ``session_id`` only, when given: through whichever
        store object gave them back, since another store object of this process may open the
        same database)."""
        with self.releasing:
            with self.lock:
                if session_id is None:
                    todo, self.pending = list(self.pending.values()), {}
                else:
                    keys = [k for k in self.pending if k[1] == session_id]
                    todo = [self.pending.pop(k) for k in keys]
            _write_releases(todo)

    def flush_store(self, store: Any) -> None:
        """Write the pending releases given back through ``store`` (or a wrapper of it)."""
        with self.releasing:
            with self.lock:
                keys = [
                    k
                    for k, held in self.pending.items()
                    if held.store is store or _backend(held.store)[1] is store
                ]
                todo = [self.pending.pop(k) for k in keys]
            _write_releases(todo)

    def add(self, lease: Lease) -> None:
        with self.lock:
            self.held[id(lease)] = lease
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self.run, name="foundation-ai-leases", daemon=True)
                self.thread.start()
            sooner = lease.seconds / 3 < self.pause
        if sooner:  # the thread sleeps longer than this lease may wait
            self.wake.set()

    def drop(self, lease: Lease) -> None:
        with self.lock:
            self.held.pop(id(lease), None)

    def run(self) -> None:
        while True:
            with self.lock:
                self.pause = max(min((lease.seconds / 3 for lease in self.held.values()), default=60.0), 0.05)
                pause = self.pause
            self.wake.wait(pause)
            self.wake.clear()
            self.flush()
            with self.lock:
                leases = list(self.held.values())
            for lease in leases:
                with self.lock:
                    if id(lease) not in self.held:
                        continue
                try:
                    ok = renew_lease(lease)
                except Exception as exc:  # the database is down: try again next round
                    log.warning("could not renew the lease of session %s: %s", lease.session_id, exc)
                    continue
                if not ok:
                    self.drop(lease)


_FOREVER = float("inf")
"""The duration of a lease kept in this process for a session (it never expires)."""
_KEEPER = _Keeper()
atexit.register(_KEEPER.flush)  # a process that ends normally leaves no lease behind


# -- the API ------------------------------------------------------------------------------------


def take_lease(
    store: Any,
    session_id: str,
    turn_id: str | None = None,
    *,
    seconds: float = LEASE_SECONDS,
    holder: str | None = None,
    keep: bool = True,
) -> Lease:
    """Take the lease of ``session_id`` in ``store`` for the turn ``turn_id`` (default: a new
    id). Free, expired, or held by the same turn id: taken (a new fencing token). ``keep``: a
    keeper thread renews it until :func:`release_lease`.

    Raises:
        SessionBusyError: another turn holds a live lease.
        StoreError: the database failed (``retryable``).
    """
    backend, target = _backend(store)
    return _take(backend, target, session_id, turn_id, seconds, holder, keep)


def _take(
    backend: Any,
    target: Any,
    session_id: str,
    turn_id: str | None,
    seconds: float,
    holder: str | None,
    keep: bool,
) -> Lease:
    """:func:`take_lease` once the store's backend is known (``_backend``)."""
    turn = turn_id or new_scru128()
    who = holder or (_HOLDER[0] if _HOLDER else lease_holder())
    if backend is not _LOCAL:
        _KEEPER.flush(session_id)  # this process's last turn of it is over
    try:
        token, busy = backend.take(target, session_id, turn, who, seconds)
    except Exception as exc:
        raise StoreError(
            f"could not take the lease of session {session_id!r}: {exc}", retryable=True
        ) from exc
    if busy is not None:
        raise SessionBusyError(session_id, busy[0], busy[1], busy[3])
    lease = Lease(session_id, turn, who, token, seconds, target)
    if keep:
        _KEEPER.add(lease)
    return lease


def renew_lease(lease: Lease) -> bool:
    """Extend ``lease`` by its duration; False (and ``lease.lost`` set) when another turn took
    it over meanwhile."""
    backend, target = _backend(lease.store)
    ok: bool = backend.renew(target, lease.session_id, lease.token, lease.seconds)
    if not ok and not lease.lost:
        lease.lost = True
        log.warning("the lease of session %s was taken over by another turn", lease.session_id)
    return ok


def release_lease(lease: Lease) -> None:
    """Give ``lease`` back (nothing happens when another turn took it over)."""
    _KEEPER.drop(lease)
    backend, target = _backend(lease.store)
    backend.release(target, lease.session_id, lease.token)


def lease_of(store: Any, session_id: str) -> SessionBusyError | None:
    """The live lease of ``session_id`` as the error a second turn would get, or ``None``
    when the session is free. A lease this process gave back but has not written yet (the
    keeper writes releases off the turn's path) is written first, so what this process sees
    agrees with what its own next turn would get."""
    backend, target = _backend(store)
    if backend is not _LOCAL:
        _KEEPER.flush(session_id)
    row = backend.current(target, session_id)
    return None if row is None else SessionBusyError(session_id, row[0], row[1], row[3])


async def atake_session_lease(
    store: Any, session_id: str, turn_id: str | None, seconds: float
) -> Lease | None:
    """What a session's turn takes before its first phase (``AgentSession._take_lease``): the
    store's lease, taken on a worker thread (a locked database never blocks the event loop)
    and renewed by the keeper; for a store without a lease table, one kept in this process
    (never expiring while the process lives). A database that fails (locked past its busy
    timeout, unreachable) gives ``None``, logged: the turn runs without a lease and its own
    writes then fail or succeed as usual (a failed store never loses the turn's records).

    Raises:
        SessionBusyError: another turn holds the session.
    """
    backend, target = _backend(store)
    if backend is _LOCAL:  # take_lease's path, the backend known
        return _take(_LOCAL, target, session_id, turn_id, _FOREVER, None, False)
    try:
        return await asyncio.to_thread(take_lease, store, session_id, turn_id, seconds=seconds)
    except StoreError as exc:
        log.warning("session %s runs its turn without a lease: %s", session_id, exc)
        return None


async def take_turn_lease(host: Any) -> None:
    """Take the lease of the turn ``host`` (a session) is starting, when it keeps one
    (``_take_lease``; hosts without it run unleased)."""
    take = getattr(host, "_take_lease", None)
    if take is not None:
        await take()


def give_back_lease(lease: Lease) -> None:
    """Release a session's lease at the end of its turn, without blocking: a lease kept in
    this process at once, a database lease by the keeper thread (at once, and at the latest
    when this process exits; a next turn of this process on the session releases it first).
    A database failure is logged: the lease then expires by itself."""
    backend, target = _backend(lease.store)
    if backend is _LOCAL:  # release_lease's path, the backend known
        if id(lease) in _KEEPER.held:  # a lease the keeper renews (never a session's own)
            _KEEPER.drop(lease)
        _LOCAL.release(target, lease.session_id, lease.token)
    else:
        _KEEPER.release_later(lease)
