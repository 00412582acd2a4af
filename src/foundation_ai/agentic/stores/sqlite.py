"""``SqliteSessionStore``: records as JSON rows in an SQLite file (the default store).

Schema (``PRAGMA user_version`` 3):

- ``records(session_id TEXT, seq INTEGER, kind TEXT, body BLOB, PRIMARY KEY(session_id, seq))``:
  the body is the record in the foundation_ai JSON format (``to_json``);
- ``sessions(session_id TEXT PRIMARY KEY, created REAL, updated REAL, message_count INTEGER,
  title TEXT, model TEXT, system_prompt TEXT, tools TEXT, base_url TEXT)``: one metadata row per session
  (:class:`~foundation_ai.agentic.stores.SessionMeta`; ``tools`` a JSON array of names), written
  in the same transaction as each ``append`` and indexed by ``updated``, so listing sessions never
  reads a record. A file written before this table had these columns is migrated when opened
  (counts and titles are computed from the stored records once).

The database runs in WAL mode with ``synchronous=NORMAL``: a committed batch survives the process
being killed (SIGKILL); each ``append`` is one transaction. The busy timeout is set when the
connection is made, before any statement, and opening retries while another process holds a lock
(several processes may open a fresh file at once). Every ``sqlite3`` failure is raised as
:class:`~foundation_ai.agentic.errors.StoreError` (``retryable`` for a lock or a busy
database); a failed ``append`` stored nothing. The ``a*`` methods (``aappend``, ``aload``, …) run
the same operations on the store's own worker thread, so a locked database never blocks an event
loop.

A row that no longer decodes (written by an older or buggy version, or nested past the JSON
format's limit) never makes the store unreadable: :meth:`SqliteSessionStore.load` skips it with a
logged warning and counts it in :attr:`SqliteSessionStore.corrupt_records`;
``load(..., strict=True)`` raises :class:`~foundation_ai.agentic.errors.CorruptRecordError` for
that session only.

The default file is ``sessions.sqlite3`` in ``$FOUNDATION_AI_HOME`` when that variable is set,
else in the user data directory (:func:`default_store_path`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from ..._private import private_file
from ...errors import FoundationAIError
from ...types import SessionRecord, from_json, to_json
from ...types._text import scrub_surrogates
from ..errors import SessionClosedError, StoreError
from .base import SessionHeader, SessionMeta, decode_records, encode_records, meta_delta, paused_gc, title_of

__all__ = ["HOME_ENV", "SqliteSessionStore", "default_store_path"]

log = logging.getLogger(__name__)

T = TypeVar("T")

HOME_ENV = "FOUNDATION_AI_HOME"
"""Environment variable naming the directory for foundation-ai's data (the default session
store); when unset, the user data directory of ``platformdirs`` is used."""

SCHEMA_VERSION = 3

_META_COLUMNS = {
    "updated": "REAL",
    "message_count": "INTEGER NOT NULL DEFAULT 0",
    "title": "TEXT",
    "model": "TEXT",
    "system_prompt": "TEXT",
    "tools": "TEXT",
    "base_url": "TEXT",
}
_SELECT_META = (
    "SELECT session_id, created, updated, message_count, title, model, system_prompt, tools, base_url"
    " FROM sessions"
)
_UPSERT_META = (
    "INSERT INTO sessions(session_id, created, updated, message_count, title) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT(session_id) DO UPDATE SET updated = excluded.updated, "
    "message_count = message_count + excluded.message_count, title = COALESCE(title, excluded.title)"
)
_tools_decoder = msgspec.json.Decoder(tuple[str, ...])
# a session's bodies joined by SQLite into one value (one row to fetch, one JSON array to decode),
# with the seq numbers in the order they were joined, to check it
_LOAD_JOINED = (
    "SELECT count(*), min(seq), max(seq), group_concat(seq), CAST(group_concat(body, ',') AS BLOB)"
    " FROM (SELECT seq, body FROM records WHERE session_id=? ORDER BY seq)"
)


def default_store_path() -> Path:
    """``$FOUNDATION_AI_HOME/sessions.sqlite3`` when ``FOUNDATION_AI_HOME`` is set, else
    ``<user data dir>/foundation-ai/sessions.sqlite3`` (``platformdirs.user_data_dir``)."""
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home) / "sessions.sqlite3"
    import platformdirs

    return Path(platformdirs.user_data_dir("foundation-ai", appauthor=False)) / "sessions.sqlite3"


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SqliteSessionStore:
    """A ``SessionStore`` in an SQLite file (created with its parent directories).

    Args:
        path: the database file; default :func:`default_store_path`. ``":memory:"`` works too.
        busy_timeout: seconds a statement waits for another connection's lock before failing
            with a retryable :class:`StoreError`; opening retries for as long.
        read_only: open an existing file for reading only (``mode=ro``, see
            https://www.sqlite.org/uri.html): nothing is created or written, so a file on a
            read-only disk or in a directory the user cannot write can be listed and loaded. A
            WAL file whose directory cannot be written (SQLite cannot make its ``-shm`` index
            there) and that has no pending ``-wal`` content is opened as ``immutable``. Writes
            raise :class:`StoreError`; a file of an older schema is refused (open it once with
            write access to upgrade it).

    Thread-safe (one connection guarded by a lock). After :meth:`close` every method raises
    :class:`~foundation_ai.agentic.errors.SessionClosedError`.

    Raises:
        StoreError: the file cannot be opened or is not a database (``retryable`` when it stayed
            locked by another process for ``busy_timeout`` seconds).

    Attributes:
        corrupt_records: session id -> the ``seq`` numbers of rows the last :meth:`load` of that
            session skipped because they no longer decode (absent when none were skipped).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout: float = 5.0,
        read_only: bool = False,
    ) -> None:
        p = default_store_path() if path is None else path
        self.path = str(p)
        self.busy_timeout = busy_timeout
        self.read_only = read_only
        self._lock = threading.Lock()
        self._worker_lock = threading.Lock()
        self._closed = False
        self._worker: concurrent.futures.ThreadPoolExecutor | None = None
        self.corrupt_records: dict[str, list[int]] = {}
        if self.path != ":memory:" and not read_only:
            try:
                private_file(p)  # 0600 in a 0700 folder when made here (SQLite's -wal/-shm follow)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the directory of {self.path!r}: {exc}", path=self.path
                ) from None
            if _read_only_place(self.path):
                # SQLite would open such a file read-only without a word (and, while another
                # process holds it open, even read it) and fail at the first write, mid-turn
                raise StoreError(
                    f"cannot open the session store {self.path!r}: the file or its directory is "
                    "read-only (SqliteSessionStore(path, read_only=True) reads it)",
                    path=self.path,
                )
        self._conn = self._open()

    # -- opening ---------------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        deadline = time.monotonic() + max(self.busy_timeout, 0.5)
        pause = 0.005
        while True:
            conn: sqlite3.Connection | None = None
            try:
                conn = self._connect()
                self._prepare(conn)
                return conn
            except sqlite3.Error as exc:
                if conn is not None:
                    conn.close()
                # switching to WAL and the first schema write can fail at once with "locked" when
                # several processes open a fresh file together (no busy wait there): retry
                if _is_busy(exc) and time.monotonic() < deadline:
                    time.sleep(pause * (1 + random.random()))
                    pause = min(pause * 2, 0.1)
                    continue
                raise StoreError(
                    f"cannot open the session store {self.path!r}: {exc}",
                    path=self.path,
                    retryable=_is_busy(exc),
                ) from None

    def _connect(self) -> sqlite3.Connection:
        if not self.read_only or self.path == ":memory:":
            return self._sqlite_connect(self.path)
        uri = Path(self.path).absolute().as_uri() + "?mode=ro"
        conn = self._sqlite_connect(uri, uri=True)
        try:
            conn.execute("PRAGMA schema_version").fetchone()  # a WAL file is opened here
            return conn
        except sqlite3.OperationalError:
            conn.close()
            wal = Path(self.path + "-wal")
            if not Path(self.path).is_file() or (wal.exists() and wal.stat().st_size > 0):
                raise
        # no -shm can be made beside the file and no -wal content is pending: the file alone
        # is the whole database, and nothing here writes it
        return self._sqlite_connect(uri + "&immutable=1", uri=True)

    def _sqlite_connect(self, target: str, *, uri: bool = False) -> sqlite3.Connection:
        # ``timeout`` installs the busy handler when connecting, before any statement
        return sqlite3.connect(
            target, timeout=self.busy_timeout, check_same_thread=False, isolation_level=None, uri=uri
        )

    def _prepare(self, c: sqlite3.Connection) -> None:
        c.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
        if self.read_only:
            version = int(c.execute("PRAGMA user_version").fetchone()[0])
            if version == 0 and self.path != ":memory:":
                raise sqlite3.DatabaseError("the file holds no session store (empty, or another database)")
            if version < SCHEMA_VERSION and self.path != ":memory:":
                raise sqlite3.DatabaseError(
                    f"schema version {version} is older than {SCHEMA_VERSION}; "
                    "open the file once with write access to upgrade it"
                )
            if self.path == ":memory:":
                self._migrate(c)
            return
        if self.path != ":memory:" and str(c.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            c.execute("PRAGMA journal_mode=WAL")
        c.execute("PRAGMA synchronous=NORMAL")
        if int(c.execute("PRAGMA user_version").fetchone()[0]) >= SCHEMA_VERSION:
            return
        c.execute("BEGIN IMMEDIATE")
        try:
            if int(c.execute("PRAGMA user_version").fetchone()[0]) < SCHEMA_VERSION:
                self._migrate(c)
                c.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def _migrate(self, c: sqlite3.Connection) -> None:
        """Create the tables, or bring a file of an older version up to :data:`SCHEMA_VERSION`."""
        c.execute(
            "CREATE TABLE IF NOT EXISTS records (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "kind TEXT NOT NULL, body BLOB NOT NULL, PRIMARY KEY (session_id, seq))"
        )
        c.execute("CREATE TABLE IF NOT EXISTS sessions (session_id TEXT PRIMARY KEY, created REAL NOT NULL)")
        have = {row[1] for row in c.execute("PRAGMA table_info(sessions)")}
        missing = [name for name in _META_COLUMNS if name not in have]
        for name in missing:
            c.execute(f"ALTER TABLE sessions ADD COLUMN {name} {_META_COLUMNS[name]}")
        c.execute("CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions(updated)")  # list_sessions order
        if "updated" not in missing:
            return  # version 2 had every column but base_url: nothing to compute
        # an older file: sessions known only by their records, then counts and titles
        now = time.time()
        c.execute(
            "INSERT OR IGNORE INTO sessions(session_id, created) SELECT DISTINCT session_id, ? FROM records",
            (now,),
        )
        c.execute(
            "UPDATE sessions SET updated = created, message_count = (SELECT COUNT(*) FROM records r "
            "WHERE r.session_id = sessions.session_id AND r.kind = 'conversation')"
        )
        ids = [row[0] for row in c.execute("SELECT session_id FROM sessions")]
        for sid in ids:
            bodies = c.execute(
                "SELECT body FROM records WHERE session_id=? AND kind='conversation' ORDER BY seq LIMIT 20",
                (sid,),
            ).fetchall()
            recs: list[SessionRecord] = []
            for (body,) in bodies:
                try:
                    recs.append(from_json(bytes(body), SessionRecord))
                except FoundationAIError:
                    continue
            title = title_of(recs)
            if title is not None:
                c.execute("UPDATE sessions SET title=? WHERE session_id=?", (title, sid))

    # -- helpers ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"the session store {self.path!r} is closed")

    def _failure(self, action: str, exc: sqlite3.Error) -> StoreError:
        busy = _is_busy(exc)
        hint = f" (still locked after the {self.busy_timeout} s busy timeout)" if busy else ""
        return StoreError(
            f"could not {action} in the session store {self.path!r}: {exc}{hint}",
            path=self.path,
            retryable=busy,
        )

    def _read(self, action: str, sql: str, params: Sequence[Any] = (), *, bulk: bool = False) -> list[Any]:
        """Every row of ``sql``; ``bulk``: many rows expected, converted with the garbage
        collector paused (:func:`~foundation_ai.agentic.stores.base.paused_gc`)."""
        with self._lock:
            self._check_open()
            try:
                cur = self._conn.execute(sql, params)  # waits for a lock, if any, here
                if not bulk:
                    return cur.fetchall()
                with paused_gc():
                    return cur.fetchall()
            except sqlite3.Error as exc:
                raise self._failure(action, exc) from None

    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the store's worker thread and await it.

        Never takes the connection lock on the event loop: the worker may hold it for the whole
        busy timeout while another process locks the file, and waiting for it here would stall
        every coroutine of the loop (200 sessions under a 3 s lock stalled it 3.8 s)."""
        self._check_open()
        worker = self._worker or self._start_worker()
        try:
            future = asyncio.get_running_loop().run_in_executor(worker, lambda: fn(*args))
        except RuntimeError:  # closed meanwhile: the pool refuses new work
            raise SessionClosedError(f"the session store {self.path!r} is closed") from None
        return await future

    def _start_worker(self) -> concurrent.futures.ThreadPoolExecutor:
        """The worker thread pool, made once (its own lock: held for no I/O)."""
        with self._worker_lock:
            if self._worker is None:
                self._worker = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="foundation-ai-store"
                )
            return self._worker

    # -- writing ---------------------------------------------------------------------------------

    def append(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None:
        """Write a batch and the session's metadata row in one transaction (``FailedAction``
        records skipped); ``header`` replaces the stored model, system prompt and tool names.

        Raises:
            StoreError: the write failed (nothing was stored; ``retryable`` for a lock).
            SessionClosedError: the store was closed.
        """
        keep = [r for r in records if r.persistable]
        if not keep and header is None:
            return
        bodies = list(
            zip([r.__struct_config__.tag for r in keep], encode_records(keep, self.path), strict=True)
        )
        added, title = meta_delta(keep)
        with self._lock:
            self._check_open()
            c = self._conn
            try:
                c.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._failure("start a write", exc) from None
            try:
                # read inside the write transaction: another process may share the file
                row = c.execute("SELECT MAX(seq) FROM records WHERE session_id=?", (session_id,)).fetchone()
                seq = 0 if row[0] is None else row[0] + 1
                c.executemany(
                    "INSERT INTO records(session_id, seq, kind, body) VALUES (?,?,?,?)",
                    [(session_id, seq + i, kind, body) for i, (kind, body) in enumerate(bodies)],
                )
                now = time.time()
                c.execute(_UPSERT_META, (session_id, now, now, added, title))
                if header is not None:
                    c.execute(
                        "UPDATE sessions SET model=?, system_prompt=?, tools=?, base_url=? WHERE session_id=?",
                        (
                            None if header.model is None else scrub_surrogates(header.model),
                            None if header.system_prompt is None else scrub_surrogates(header.system_prompt),
                            to_json(list(header.tools)),
                            header.base_url,
                            session_id,
                        ),
                    )
                c.execute("COMMIT")
            except BaseException as exc:
                try:
                    c.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # the transaction is already gone (SQLite rolled it back itself)
                if isinstance(exc, sqlite3.Error):
                    raise self._failure("write", exc) from None
                raise

    async def aappend(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None:
        """:meth:`append` on the store's worker thread (the event loop keeps running while the
        database is locked). Raises what :meth:`append` raises."""
        await self._off_loop(self.append, session_id, records, header)

    # -- reading ---------------------------------------------------------------------------------

    def load(self, session_id: str, *, strict: bool = False) -> list[SessionRecord]:
        """The session's records in order (``[]`` when unknown).

        A row that does not decode is skipped with a logged warning and its ``seq`` noted in
        :attr:`corrupt_records` (so one bad row never makes a session unreadable).

        Raises:
            CorruptRecordError: ``strict`` and at least one row does not decode.
            StoreError: the read failed.
            SessionClosedError: the store was closed.
        """
        return decode_records(
            session_id,
            self._read_joined(session_id),
            lambda: self._read(
                "read a session",
                "SELECT seq, body FROM records WHERE session_id=? ORDER BY seq",
                (session_id,),
                bulk=True,
            ),
            self.corrupt_records,
            strict=strict,
            log=log,
        )

    def _read_joined(self, session_id: str) -> tuple[int, bytes] | None:
        """(row count, every body of the session joined into one JSON array) read by one SQL
        statement, or ``None`` when that cannot be trusted: the rows did not arrive in ``seq``
        order (``group_concat`` order is not guaranteed before SQLite 3.44, so it is checked
        against the concatenated ``seq`` numbers) or the joined text is over SQLite's length
        limit. The caller then reads the rows one by one."""
        with self._lock:
            self._check_open()
            try:
                row = self._conn.execute(_LOAD_JOINED, (session_id,)).fetchone()
            except sqlite3.DataError:  # over SQLITE_MAX_LENGTH: "string or blob too big"
                return None
            except sqlite3.Error as exc:
                if "too big" in str(exc):
                    return None
                raise self._failure("read a session", exc) from None
        count, first, last, seqs, body = row
        if not count:
            return 0, b"[]"
        if not (isinstance(first, int) and isinstance(last, int) and isinstance(body, bytes)):
            return None  # a hand-edited table (seq not an integer)
        if last - first + 1 != count or seqs != ",".join(map(str, range(first, last + 1))):
            return None  # gaps (rows deleted by hand) or another order: read row by row
        return count, b"".join((b"[", body, b"]"))

    async def aload(self, session_id: str) -> list[SessionRecord]:
        """:meth:`load` on the store's worker thread."""
        return await self._off_loop(self.load, session_id)

    def sessions(self) -> list[str]:
        """Session ids, oldest first.

        Raises:
            StoreError: the read failed.
            SessionClosedError: the store was closed.
        """
        rows = self._read("list sessions", "SELECT session_id FROM sessions ORDER BY created, rowid")
        return [r[0] for r in rows]

    def list_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionMeta]:
        """Metadata rows, most recently updated first (``limit`` rows from ``offset``; all when
        ``limit`` is ``None``). Reads the metadata table only: no record is decoded.

        Raises:
            StoreError: the read failed.
            SessionClosedError: the store was closed.
        """
        rows = self._read(
            "list sessions",
            _SELECT_META + " ORDER BY updated DESC, rowid DESC LIMIT ? OFFSET ?",
            (-1 if limit is None else max(limit, 0), max(offset, 0)),
            bulk=True,
        )
        with paused_gc():
            return _metas(rows)

    async def alist_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionMeta]:
        """:meth:`list_sessions` on the store's worker thread."""
        return await self._off_loop(self.list_sessions, limit, offset)

    def session_meta(self, session_id: str) -> SessionMeta | None:
        """The session's metadata row, or ``None`` when unknown.

        Raises:
            StoreError: the read failed.
            SessionClosedError: the store was closed.
        """
        rows = self._read("read a session", _SELECT_META + " WHERE session_id=?", (session_id,))
        return _metas(rows)[0] if rows else None

    async def asession_meta(self, session_id: str) -> SessionMeta | None:
        """:meth:`session_meta` on the store's worker thread."""
        return await self._off_loop(self.session_meta, session_id)

    def delete_session(self, session_id: str) -> bool:
        """Delete the session's records and metadata row in one transaction, with SQLite's
        ``secure_delete`` on (the freed pages are overwritten with zeros), then checkpoint the
        WAL into the file and truncate it: afterwards neither the file nor its WAL holds the
        session's text (unless another connection reads the file meanwhile: its checkpoint
        then comes later). True when the session had records or metadata.

        Raises:
            StoreError: the delete failed (nothing was deleted; ``retryable`` for a lock).
            SessionClosedError: the store was closed.
        """
        with self._lock:
            self._check_open()
            c = self._conn
            try:
                c.execute("PRAGMA secure_delete=ON")
                c.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._failure("start a delete", exc) from None
            try:
                gone = c.execute("DELETE FROM records WHERE session_id=?", (session_id,)).rowcount
                gone += c.execute("DELETE FROM sessions WHERE session_id=?", (session_id,)).rowcount
                c.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    c.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._failure("delete a session", exc) from None
                raise
            finally:
                with contextlib.suppress(sqlite3.Error):
                    c.execute("PRAGMA secure_delete=OFF")
            if self.path != ":memory:":  # the WAL still holds the pages as they were: fold it in
                with contextlib.suppress(sqlite3.Error):
                    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return gone > 0

    async def adelete_session(self, session_id: str) -> bool:
        """:meth:`delete_session` on the store's worker thread."""
        return await self._off_loop(self.delete_session, session_id)

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise ``SessionClosedError``."""
        from .lease import close_sqlite_leases, flush_store_leases

        if not self._closed:
            flush_store_leases(self)  # a lease given back but not yet written goes first
        with self._lock:
            if not self._closed:
                self._closed = True

                close_sqlite_leases(self)  # the lease table's own connection to this file
                self._conn.close()
                if self._worker is not None:
                    self._worker.shutdown(wait=False)


def _metas(rows: list[Any]) -> list[SessionMeta]:
    """Metadata rows as ``SessionMeta`` (the tool lists decoded once per distinct value)."""
    tools: dict[Any, tuple[str, ...]] = {None: (), "": ()}
    out = []
    for sid, created, updated, count, title, model, system, names, base_url in rows:
        found = tools.get(names)
        if found is None:
            try:
                found = _tools_decoder.decode(names)
            except (msgspec.DecodeError, TypeError):
                found = ()
            tools[names] = found
        out.append(
            SessionMeta(
                sid,
                created,
                created if updated is None else updated,
                count,
                title,
                model,
                system,
                found,
                base_url,
            )
        )
    return out


def _read_only_place(path: str) -> bool:
    """An existing store file, or its directory, that this process may not write (a read-only
    mount answers ``EROFS`` to :func:`os.access` even for root)."""
    target = os.path.abspath(path)
    if not os.path.exists(target):
        return False
    return not os.access(target, os.W_OK) or not os.access(os.path.dirname(target), os.W_OK)
