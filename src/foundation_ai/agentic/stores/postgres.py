"""``PostgresSessionStore``: session records and metadata in PostgreSQL (many processes, many
machines).

The same contract as :class:`~foundation_ai.agentic.stores.SqliteSessionStore` (the
``SessionStore`` protocol of :mod:`foundation_ai.agentic.stores.base`), on psycopg 3 with a
connection pool (``psycopg_pool``). Install with the ``postgres`` extra:
``pip install 'foundation-ai[postgres]'``.

Schema (created on first use, under a transaction-scoped advisory lock so several processes may
open an empty database at once):

- ``foundation_ai_sessions(session_id TEXT PRIMARY KEY, created, updated DOUBLE PRECISION,
  message_count INTEGER, title, model, system_prompt TEXT, tools JSONB, next_seq BIGINT,
  write_no BIGINT, created_no BIGINT, base_url TEXT)``: one metadata row per session, indexed by
  ``updated`` (a table from before ``base_url`` gains the column when opened);
- ``foundation_ai_records(session_id TEXT, seq BIGINT, kind TEXT, body BYTEA,
  PRIMARY KEY(session_id, seq))``: the body is the record in the foundation_ai JSON format.

Each ``append`` is one transaction: the session row is upserted first (``INSERT … ON CONFLICT DO
UPDATE … RETURNING``), which locks it, reserves the batch's ``seq`` numbers from ``next_seq`` and
updates the metadata; then the records are inserted in one statement. Writers of the same session
are serialized by that row lock (no ``MAX(seq)`` scan, no lost or duplicated record); writers of
different sessions do not wait for each other. PostgreSQL text cannot hold NUL characters: the
metadata columns (title, model, system prompt, tool names) store U+FFFD in their place; the records
themselves keep every character. Every driver failure is raised as
:class:`~foundation_ai.agentic.errors.StoreError` (``retryable`` for a connection failure, a pool
timeout, a deadlock or a serialization failure); a failed ``append`` stored nothing.

The ``a*`` methods run the same operations on worker threads (the pool is shared), so a slow
database never blocks an event loop. PostgreSQL docs: https://www.postgresql.org/docs/16/sql-insert.html#SQL-ON-CONFLICT
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec
import psycopg
import psycopg_pool
from psycopg import conninfo
from psycopg.types.json import Jsonb

from ...types import SessionRecord
from ...types._text import scrub_surrogates
from ..errors import SessionClosedError, StoreError
from .base import SessionHeader, SessionMeta, decode_records, encode_records, meta_delta, paused_gc

__all__ = ["PostgresSessionStore", "libpq_url", "redact_url"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_SCHEMA_LOCK = 0x66_61_69_5F  # advisory lock id while creating the tables ("fai_")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS foundation_ai_sessions ("
    " session_id TEXT PRIMARY KEY, created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL,"
    " message_count INTEGER NOT NULL DEFAULT 0, title TEXT, model TEXT, system_prompt TEXT,"
    " tools JSONB, next_seq BIGINT NOT NULL DEFAULT 0, write_no BIGINT NOT NULL DEFAULT 0,"
    " created_no BIGINT NOT NULL DEFAULT 0)",
    "CREATE SEQUENCE IF NOT EXISTS foundation_ai_writes",
    "CREATE INDEX IF NOT EXISTS foundation_ai_sessions_by_update"
    " ON foundation_ai_sessions (updated DESC, write_no DESC)",
    "CREATE TABLE IF NOT EXISTS foundation_ai_records ("
    " session_id TEXT NOT NULL, seq BIGINT NOT NULL, kind TEXT NOT NULL, body BYTEA NOT NULL,"
    " PRIMARY KEY (session_id, seq))",
)
# columns added after the first release, added when missing (checked first: ALTER TABLE would
# lock the table on every open)
_ADDED_COLUMNS = {"base_url": "TEXT"}
_HAVE_COLUMNS = (
    "SELECT column_name FROM information_schema.columns"
    " WHERE table_schema = current_schema() AND table_name = 'foundation_ai_sessions'"
)
_UPSERT = (
    "INSERT INTO foundation_ai_sessions AS s (session_id, created, updated, message_count, title,"
    " next_seq, write_no, created_no)"
    " VALUES (%(sid)s, %(now)s, %(now)s, %(added)s, %(title)s, %(n)s,"
    " nextval('foundation_ai_writes'), currval('foundation_ai_writes'))"
    " ON CONFLICT (session_id) DO UPDATE SET updated = GREATEST(s.updated, EXCLUDED.updated),"
    " message_count = s.message_count + EXCLUDED.message_count,"
    " title = COALESCE(s.title, EXCLUDED.title), next_seq = s.next_seq + EXCLUDED.next_seq,"
    " write_no = EXCLUDED.write_no"
    " RETURNING next_seq - %(n)s"
)
_HEADER = (
    "UPDATE foundation_ai_sessions SET model = %s, system_prompt = %s, tools = %s, base_url = %s"
    " WHERE session_id = %s"
)
_INSERT = (
    "INSERT INTO foundation_ai_records (session_id, seq, kind, body)"
    " SELECT %s, s, k, b FROM unnest(%s::bigint[], %s::text[], %s::bytea[]) AS t(s, k, b)"
)
# binary rows (psycopg's C loaders; no per-row JSONB parsing: the tool names come as text and
# each distinct value is decoded once)
_LIST_META = (
    "SELECT session_id, created, updated, message_count, title, model, system_prompt, tools::text,"
    " base_url FROM foundation_ai_sessions ORDER BY updated DESC, write_no DESC LIMIT %s OFFSET %s"
)
_ONE_META = (
    "SELECT session_id, created, updated, message_count, title, model, system_prompt, tools::text,"
    " base_url FROM foundation_ai_sessions WHERE session_id = %s"
)
# a session's bodies as binary rows, joined on the client into one JSON array decoded at once
# (faster than string_agg on the server, which sorts and copies the whole text once more)
_LOAD = "SELECT seq, body FROM foundation_ai_records WHERE session_id = %s ORDER BY seq"
_tools_decoder = msgspec.json.Decoder(tuple[str, ...])
_RETRYABLE_STATES = {"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300"}


def libpq_url(url: str) -> str:
    """``url`` as libpq takes it: a SQLAlchemy-style scheme (``postgresql+psycopg://``, as DBOS
    and SQLAlchemy write it) becomes ``postgresql://``; anything else is returned unchanged."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.startswith("postgresql+"):
        return "postgresql://" + rest
    return url


def redact_url(url: str) -> str:
    """The connection string without its password (for messages and ``StoreError.path``)."""
    try:
        parts = conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "<unparsable connection string>"
    parts.pop("password", None)
    host = parts.get("host", "")
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{parts.get('user', '')}@{host}{port}/{parts.get('dbname', '')}"


class PostgresSessionStore:
    """A ``SessionStore`` in PostgreSQL, shared by any number of processes.

    Args:
        url: a libpq connection string or URL (``postgresql://user:pw@host:5432/db``; see
            https://www.postgresql.org/docs/16/libpq-connect.html#LIBPQ-CONNSTRING); a
            ``postgresql+psycopg://`` URL (SQLAlchemy / DBOS style) is accepted too.
        min_size, max_size: the connection pool's bounds (``psycopg_pool.ConnectionPool``).
        timeout: seconds to wait for a pooled connection (and for the first connection) before
            raising a retryable :class:`StoreError`.

    Raises:
        StoreError: the server cannot be reached or the tables cannot be created.

    Attributes:
        url: the connection string without its password.
        corrupt_records: session id -> ``seq`` numbers of the records of that session skipped
            by the last :meth:`load` because they no longer decode.
    """

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 4, timeout: float = 10.0) -> None:
        url = libpq_url(url)
        self.url = redact_url(url)
        self.timeout = timeout
        self.corrupt_records: dict[str, list[int]] = {}
        self._closed = False
        self._lock = threading.Lock()
        try:
            self._pool = psycopg_pool.ConnectionPool(
                url,
                min_size=min_size,
                max_size=max(max_size, min_size),
                timeout=timeout,
                kwargs={"autocommit": True},
                open=False,
                name="foundation-ai-sessions",
            )
            self._pool.open(wait=True, timeout=timeout)
        except psycopg.Error as exc:
            raise self._failure("connect to", exc) from None
        try:
            self._create_schema()
        except BaseException:
            self._pool.close()
            raise

    # -- helpers ---------------------------------------------------------------------------------

    def _failure(self, action: str, exc: BaseException) -> StoreError:
        state = getattr(exc, "sqlstate", None)
        retryable = (
            isinstance(exc, psycopg.OperationalError | psycopg_pool.PoolTimeout) or state in _RETRYABLE_STATES
        )
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StoreError(
            f"could not {action} the session store {self.url}: {text}", path=self.url, retryable=retryable
        )

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"the session store {self.url} is closed")

    def _create_schema(self) -> None:
        try:
            with self._pool.connection() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for stmt in _SCHEMA:
                    conn.execute(stmt)
                have = {row[0] for row in conn.execute(_HAVE_COLUMNS).fetchall()}
                for name, kind in _ADDED_COLUMNS.items():
                    if name not in have:
                        conn.execute(f"ALTER TABLE foundation_ai_sessions ADD COLUMN {name} {kind}")
        except psycopg.Error as exc:
            raise self._failure("create the tables of", exc) from None

    def _read(self, action: str, sql: str, params: Sequence[Any] = (), *, bulk: bool = False) -> list[Any]:
        """Every row of ``sql``, in PostgreSQL's binary format; ``bulk``: many rows expected,
        converted with the garbage collector paused (after the server answered)."""
        self._check_open()
        try:
            with self._pool.connection() as conn, conn.cursor(binary=True) as cur:
                cur.execute(sql, params)  # the whole result arrives here
                if not bulk:
                    return cur.fetchall()
                with paused_gc():
                    return cur.fetchall()
        except psycopg.Error as exc:
            raise self._failure(action, exc) from None
        except psycopg_pool.PoolClosed:
            raise SessionClosedError(f"the session store {self.url} is closed") from None

    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        self._check_open()
        return await asyncio.to_thread(fn, *args)

    # -- writing ---------------------------------------------------------------------------------

    def append(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None:
        """Write a batch and the session's metadata row in one transaction (``FailedAction``
        records skipped); ``header`` replaces the stored model, system prompt and tool names.

        Raises:
            StoreError: the write failed (nothing was stored; ``retryable`` for a lost
                connection, a pool timeout, a deadlock or a serialization failure).
            SessionClosedError: the store was closed.
        """
        keep = [r for r in records if r.persistable]
        if not keep and header is None:
            return
        kinds = [r.__struct_config__.tag for r in keep]
        bodies = encode_records(keep, self.url)
        added, title = meta_delta(keep)
        self._check_open()
        params = {
            "sid": session_id,
            "now": time.time(),
            "added": added,
            "title": _text(title),
            "n": len(keep),
        }
        try:
            with self._pool.connection() as conn, conn.transaction():
                row = conn.execute(_UPSERT, params).fetchone()
                first = 0 if row is None else int(row[0])
                if keep:
                    conn.execute(_INSERT, (session_id, list(range(first, first + len(keep))), kinds, bodies))
                if header is not None:
                    conn.execute(
                        _HEADER,
                        (
                            _text(header.model),
                            _text(header.system_prompt),
                            Jsonb([_text(t) for t in header.tools]),
                            _text(header.base_url),
                            session_id,
                        ),
                    )
        except psycopg.Error as exc:
            raise self._failure("write to", exc) from None
        except psycopg_pool.PoolClosed:
            raise SessionClosedError(f"the session store {self.url} is closed") from None

    async def aappend(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None:
        """:meth:`append` on a worker thread. Raises what :meth:`append` raises."""
        await self._off_loop(self.append, session_id, records, header)

    # -- reading ---------------------------------------------------------------------------------

    def load(self, session_id: str, *, strict: bool = False) -> list[SessionRecord]:
        """The session's records in order (``[]`` when unknown).

        A row that does not decode is skipped with a logged warning and its ``seq`` noted in
        :attr:`corrupt_records`.

        Raises:
            CorruptRecordError: ``strict`` and at least one row does not decode.
            StoreError: the read failed.
            SessionClosedError: the store was closed.
        """
        rows = self._read("read a session from", _LOAD, (session_id,), bulk=True)
        joined = b"[" + b",".join([body for _, body in rows]) + b"]"
        return decode_records(
            session_id, (len(rows), joined), lambda: rows, self.corrupt_records, strict=strict, log=log
        )

    async def aload(self, session_id: str) -> list[SessionRecord]:
        """:meth:`load` on a worker thread."""
        return await self._off_loop(self.load, session_id)

    def sessions(self) -> list[str]:
        """Session ids, oldest first.

        Raises:
            StoreError: the read failed.
            SessionClosedError: the store was closed.
        """
        rows = self._read(
            "list sessions of", "SELECT session_id FROM foundation_ai_sessions ORDER BY created, created_no"
        )
        return [r[0] for r in rows]

    def list_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionMeta]:
        """Metadata rows, most recently updated first (``limit`` rows from ``offset``; all when
        ``limit`` is ``None``). Reads the metadata table only: no record is decoded.

        Raises:
            StoreError: the read failed.
            SessionClosedError: the store was closed.
        """
        rows = self._read(
            "list sessions of",
            _LIST_META,
            (None if limit is None else max(limit, 0), max(offset, 0)),
            bulk=True,
        )
        with paused_gc():
            return _metas(rows)

    async def alist_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionMeta]:
        """:meth:`list_sessions` on a worker thread."""
        return await self._off_loop(self.list_sessions, limit, offset)

    def session_meta(self, session_id: str) -> SessionMeta | None:
        """The session's metadata row, or ``None`` when unknown.

        Raises:
            StoreError: the read failed.
            SessionClosedError: the store was closed.
        """
        rows = self._read("read a session from", _ONE_META, (session_id,))
        return _metas(rows)[0] if rows else None

    async def asession_meta(self, session_id: str) -> SessionMeta | None:
        """:meth:`session_meta` on a worker thread."""
        return await self._off_loop(self.session_meta, session_id)

    def delete_session(self, session_id: str) -> bool:
        """Delete the session's records and metadata row in one transaction; True when it had
        any. PostgreSQL reuses the rows' space after the table's next ``VACUUM`` (autovacuum).

        Raises:
            StoreError: the delete failed (nothing was deleted).
            SessionClosedError: the store was closed.
        """
        self._check_open()
        try:
            with self._pool.connection() as conn, conn.transaction():
                sql = "DELETE FROM foundation_ai_records WHERE session_id = %s"
                n = conn.execute(sql, (session_id,)).rowcount
                sql = "DELETE FROM foundation_ai_sessions WHERE session_id = %s"
                n += conn.execute(sql, (session_id,)).rowcount
        except psycopg.Error as exc:
            raise self._failure("delete a session from", exc) from None
        except psycopg_pool.PoolClosed:
            raise SessionClosedError(f"the session store {self.url} is closed") from None
        return n > 0

    async def adelete_session(self, session_id: str) -> bool:
        """:meth:`delete_session` on a worker thread."""
        return await self._off_loop(self.delete_session, session_id)

    def close(self) -> None:
        """Close the pool (idempotent); later calls raise ``SessionClosedError``."""
        from .lease import flush_store_leases

        if not self._closed:
            flush_store_leases(self)  # a lease given back but not yet written goes first
        with self._lock:
            if not self._closed:
                self._closed = True
                self._pool.close()


def _text(value: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL (nor a lone surrogate, as no UTF-8 can): metadata keeps
    U+FFFD in their place (records, stored as JSON, keep every character but lone surrogates)."""
    if value is None:
        return value
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    return scrub_surrogates(value)


def _metas(rows: list[Any]) -> list[SessionMeta]:
    """Metadata rows as ``SessionMeta`` (each distinct ``tools`` text decoded once; anything but
    a JSON array of strings reads as no tools)."""
    tools: dict[Any, tuple[str, ...]] = {None: ()}
    out = []
    for sid, created, updated, count, title, model, system, names, base_url in rows:
        found = tools.get(names)
        if found is None:
            try:
                found = _tools_decoder.decode(names)
            except (msgspec.DecodeError, TypeError):
                found = ()
            tools[names] = found
        out.append(SessionMeta(sid, created, updated, count, title, model, system, found, base_url))
    return out
