"""A real PostgreSQL (pgserver) for the tests: one server per test process, started on first use
in a ``tempfile.mkdtemp`` folder and stopped when the process exits; each caller gets its own
schema (``fresh_url``) so tests never see each other's tables."""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
import threading
from typing import Any

_lock = threading.Lock()
_server: Any = None
_names = itertools.count()


def server_uri() -> str:
    """The URI of this process's server (started on the first call)."""
    global _server
    with _lock:
        if _server is None:
            import pgserver

            folder = tempfile.mkdtemp(prefix="fai-pg-")
            _server = pgserver.get_server(folder, cleanup_mode="stop")

            def stop() -> None:
                _server.cleanup()
                shutil.rmtree(folder, ignore_errors=True)

            atexit.register(stop)
        uri: str = _server.get_uri()
        return uri


def fresh_url(prefix: str = "t") -> str:
    """A connection string whose ``search_path`` is a new, empty schema."""
    import psycopg
    from psycopg import conninfo

    uri = server_uri()
    name = f"{prefix}_{os.getpid()}_{next(_names)}"
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    return conninfo.make_conninfo(uri, options=f"-c search_path={name}")


def fresh_database(prefix: str) -> str:
    """A connection string for a new, empty database ``<prefix>_<pid>`` (dropped first if a
    run before left it): for code that creates its own schemas and tables (DBOS, serve)."""
    import psycopg

    uri = server_uri()
    name = f"{prefix}_{os.getpid()}"
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return uri.replace("/postgres?", f"/{name}?")
