"""Data files only their user can read: session, durable and vector databases.

:func:`private_file` makes a database file's missing folders (the last one ``0700``) and the file
itself (``0600``, empty: SQLite takes an empty file as a new database) before SQLite opens it,
so the file never exists with wider permissions. SQLite creates the ``-wal``, ``-shm`` and
journal files of a database with the permissions of the database file
(https://www.sqlite.org/tempfiles.html; the unix VFS copies the main file's mode). Existing
files and folders are left as they are (README.md, "The command line"; docs/concepts.md, "Sessions").
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "private_dir", "private_file"]

DIR_MODE = 0o700
"""Permissions of a data folder foundation-ai creates: the user alone may list or enter it."""
FILE_MODE = 0o600
"""Permissions of a data file foundation-ai creates: the user alone may read or write it."""


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create the folder ``path`` (and its missing parents) when it does not exist; the
    folders made here get :data:`DIR_MODE` (the process umask may only narrow it).

    Raises:
        OSError: the folder cannot be created.
    """
    p = Path(path)
    missing = []
    q = p
    while not q.exists() and q != q.parent:
        missing.append(q)
        q = q.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass  # made meanwhile by another process
    return p


def private_file(path: str | os.PathLike[str]) -> Path:
    """Make sure the file ``path`` exists, creating it empty with :data:`FILE_MODE` (and its
    folder with :func:`private_dir`) when it does not; an existing file is not touched.

    Raises:
        OSError: the folder or the file cannot be created.
    """
    p = Path(path)
    private_dir(p.parent)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return p
    os.close(fd)
    return p
