"""``--db``: one spelling rule for every command.

The session commands (``run``, ``chat``, ``sessions``, ``show``) and the durable ones
(``worker``, ``submit``, ``status``, ``follow``, ...) take the same two spellings:

- a file path (``./sessions.sqlite3``, ``~/x.db``) or a ``sqlite:///PATH`` URL: a SQLite file;
- a ``postgresql://`` (or ``postgres://``) URL: a PostgreSQL database (``docs/scaling.md``).

:func:`session_target` reads it for the session store, :func:`durable_url` for
``DurableConfig`` (which wants a URL). The URL forms follow SQLAlchemy's database URLs
(https://docs.sqlalchemy.org/en/20/core/engines.html#database-urls), as DBOS does.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..errors import ConfigurationError

__all__ = ["DbTarget", "durable_url", "require_existing", "session_target"]

_SQLITE = "sqlite:///"
_POSTGRES = ("postgresql://", "postgres://", "postgresql+psycopg://")


@dataclass(frozen=True, slots=True)
class DbTarget:
    """Where ``--db`` points: ``kind`` is ``"sqlite"`` (``location`` a file path, ``~``
    expanded) or ``"postgresql"`` (``location`` the URL as given)."""

    kind: str
    location: str


def session_target(text: str) -> DbTarget:
    """``--db`` as given (a path, ``sqlite:///PATH`` or ``postgresql://...``).

    Raises:
        ConfigurationError: an empty value, ``sqlite:///`` naming no file, or a URL of another
            scheme (``mysql://...``).
    """
    value = text.strip()
    if not value:
        raise ConfigurationError("--db is empty: give a file path, sqlite:///PATH or postgresql://...")
    if value.startswith(_POSTGRES):
        return DbTarget("postgresql", value)
    if value.startswith(_SQLITE):
        path = value[len(_SQLITE) :]
        if not path:
            raise ConfigurationError(f"--db {value!r} names no file")
        return DbTarget("sqlite", os.path.expanduser(path))
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", value) and not re.match(r"[A-Za-z]:[\\/]", value):
        raise ConfigurationError(f"--db {value!r}: expected a file path, sqlite:///PATH or postgresql://...")
    return DbTarget("sqlite", os.path.expanduser(value))


def durable_url(text: str) -> str:
    """``--db`` as the URL ``DurableConfig`` takes: a plain path becomes ``sqlite:///ABSPATH``.

    Raises:
        ConfigurationError: see :func:`session_target`.
    """
    target = session_target(text)
    if target.kind == "postgresql":
        return target.location
    return _SQLITE + os.path.abspath(target.location)


def require_existing(target: DbTarget) -> None:
    """For the read-only commands: a SQLite ``--db`` that does not exist is an error, not an
    empty store (a mistyped path must not read as "no stored sessions").

    Raises:
        ConfigurationError: the file does not exist (exit status 2).
    """
    if target.kind == "sqlite" and target.location != ":memory:" and not os.path.exists(target.location):
        raise ConfigurationError(f"--db {target.location}: no such file")
