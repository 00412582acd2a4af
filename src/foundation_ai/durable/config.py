"""Where durable turns keep their state: ``DurableConfig`` and the two databases it names.

One ``--db`` URL names both databases (``docs/scaling.md``):

- ``sqlite:///PATH`` (the embedded default): the session store is the SQLite file ``PATH`` and
  DBOS's system database the file ``PATH.dbos`` next to it. Durable turns on one machine, no
  server; every worker process on that machine shares the two files. The system database is
  put in WAL mode (https://www.sqlite.org/wal.html) the first time it is named: a checkpoint
  commit is then one append to the log, synced to disk (DBOS's connections keep SQLite's
  default ``synchronous=FULL``, so a committed step survives a power loss), instead of the
  rollback journal's several syncs, and readers do not block the writer.
- ``postgresql://USER:PASS@HOST:PORT/DB``: DBOS's system database in that Postgres (schema
  ``dbos``), the session store in the same database when
  :mod:`foundation_ai.agentic.stores.postgres` is installed, else (``session_db``) a SQLite
  file named explicitly. Workers on many machines share it.

DBOS system database URLs: https://docs.dbos.dev/python/reference/configuration
"""

from __future__ import annotations

import logging
import os
import sqlite3
from dataclasses import dataclass
from typing import Any

from .._private import private_file
from ..agentic.stores import SessionStore
from ..errors import ConfigurationError

__all__ = ["DEFAULT_QUEUE", "DurableConfig"]

DEFAULT_QUEUE = "foundation_ai_turns"
"""The DBOS queue durable turns are enqueued on."""

log = logging.getLogger("foundation_ai.durable")

APP_VERSION = "foundation-ai-durable-2"
"""DBOS application version shared by every worker and submitter: DBOS only recovers and
dequeues workflows of its own version, so it is pinned instead of hashed from the source. It
changes when the steps a turn records change (2: the setup is recorded with the first model
call instead of a step of its own): a worker of one version never replays another's turns."""


@dataclass(frozen=True, slots=True)
class DurableConfig:
    """How durable turns are stored and scheduled.

    Attributes:
        db: ``sqlite:///PATH`` or ``postgresql://...`` (see the module docstring).
        session_db: the session store's URL when it differs from ``db`` (``sqlite:///PATH`` or
            ``postgresql://...``); ``None``: derived from ``db``.
        queue: the DBOS queue name.
        worker_concurrency: turns one worker process runs at once (``None``: no limit).
        global_concurrency: turns all workers together run at once (``None``: no limit).
        polling_interval: seconds between two polls of the queue by a worker.
        steering: take steering / abort messages before each model call (one read per model
            call, and a ``DBOS.recv`` for a message that was sent; ``False`` saves the read for
            turns nobody steers).

    Raises:
        ConfigurationError: ``db`` is neither a ``sqlite:///`` nor a ``postgresql://`` URL, or
            a limit is below 1.
    """

    db: str
    session_db: str | None = None
    queue: str = DEFAULT_QUEUE
    worker_concurrency: int | None = 4
    global_concurrency: int | None = None
    polling_interval: float = 0.2
    steering: bool = True

    def __post_init__(self) -> None:
        _kind(self.db)
        if self.session_db is not None:
            _kind(self.session_db)
        for name in ("worker_concurrency", "global_concurrency"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ConfigurationError(f"{name} must be at least 1, got {v}")
        if self.polling_interval <= 0:
            raise ConfigurationError(f"polling_interval must be > 0 seconds, got {self.polling_interval}")

    @property
    def system_database_url(self) -> str:
        """DBOS's system database URL (``sqlite:///PATH.dbos`` or ``postgresql+psycopg://...``)."""
        if _kind(self.db) == "sqlite":
            path = _sqlite_path(self.db)
            private_file(f"{path}.dbos")  # 0600 in a 0700 folder when made here
            _write_ahead_log(f"{path}.dbos")
            return f"sqlite:///{path}.dbos"
        return "postgresql+psycopg://" + self.db.split("://", 1)[1]

    def dbos_config(self, name: str = "foundation-ai", executor_id: str | None = None) -> dict[str, Any]:
        """The ``DBOSConfig`` of a worker or submitter
        (https://docs.dbos.dev/python/reference/configuration)."""
        cfg: dict[str, Any] = {
            "name": name,
            "system_database_url": self.system_database_url,
            "application_version": APP_VERSION,
            "log_level": os.environ.get("FOUNDATION_AI_DBOS_LOG", "WARNING"),
            "notification_listener_polling_interval_sec": 0.05,
        }
        if executor_id:
            cfg["executor_id"] = executor_id
        return cfg

    def open_store(self) -> SessionStore:
        """Open the session store this config names.

        Raises:
            ConfigurationError: a Postgres session store is asked for and psycopg (the
                ``postgres`` extra) is not installed, or the database cannot be reached.
        """
        url = self.session_db or self.db
        if _kind(url) == "sqlite":
            from ..agentic.stores.sqlite import SqliteSessionStore

            return SqliteSessionStore(_sqlite_path(url))
        try:
            from ..agentic.stores import postgres
        except ImportError as exc:
            raise ConfigurationError(
                "a Postgres session store needs psycopg: pip install 'foundation-ai[postgres]' "
                f"(or pass session_db='sqlite:///PATH'): {exc}"
            ) from None
        store: SessionStore = postgres.PostgresSessionStore(url)
        return store


def _kind(url: str) -> str:
    if url.startswith("sqlite:///"):
        if not url[len("sqlite:///") :]:
            raise ConfigurationError(f"database URL {url!r} names no file")
        return "sqlite"
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql"
    raise ConfigurationError(f"database URL {url!r}: expected sqlite:///PATH or postgresql://...")


def _sqlite_path(url: str) -> str:
    return url[len("sqlite:///") :]


_IN_WAL: set[str] = set()  # system databases this process put in WAL mode


def _write_ahead_log(path: str) -> None:
    """Put the SQLite file ``path`` in WAL mode, once per process (the mode is kept in the
    file: every later connection, in any process, uses it). A file that is not a database, or
    one another connection keeps locked, is left as it is: DBOS then reports the former, and
    the latter stays correct in its journal mode, only slower."""
    if path in _IN_WAL:
        return
    try:
        conn = sqlite3.connect(path, timeout=5.0)
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        log.debug("DBOS system database %s stays in its journal mode: %s", path, exc)
        return
    if mode and str(mode[0]).lower() == "wal":
        _IN_WAL.add(path)
