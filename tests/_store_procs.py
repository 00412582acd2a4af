"""Child processes for the SQLite store tests (run as ``python tests/_store_procs.py ...``).

- ``open DIR COUNT TAG PEERS``: for i in 0..COUNT-1, wait until all PEERS children are ready
  (a file barrier), then open the fresh file ``DIR/f<i>.db`` (every child at once), append one
  record under session ``TAG`` and close; print ``ok`` or the first error's type and text.
- ``lock DB``: hold an exclusive write lock on ``DB`` (``BEGIN EXCLUSIVE``), print ``locked``,
  and release it (commit) when stdin gets a line or closes.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time


def barrier(where: str, i: int, tag: str, peers: int) -> None:
    open(os.path.join(where, f"ready-{i}-{tag}"), "w").close()
    while sum(1 for n in os.listdir(where) if n.startswith(f"ready-{i}-")) < peers:
        time.sleep(0.0005)


def open_many(where: str, count: int, tag: str, peers: int) -> None:
    from foundation_ai.agentic.stores import SqliteSessionStore
    from foundation_ai.types import Messages, SessionRecord

    first_error = ""
    for i in range(count):
        barrier(where, i, tag, peers)  # after an error too: the peers must not wait forever
        try:
            store = SqliteSessionStore(os.path.join(where, f"f{i}.db"))
            store.append(tag, [SessionRecord.Conversation(message=Messages.user(f"{tag} {i}"))])
            store.close()
        except Exception as exc:
            first_error = first_error or f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    print(first_error or "ok", flush=True)


def hold_lock(db: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    sys.stdin.readline()
    conn.execute("COMMIT")
    conn.close()


if __name__ == "__main__":
    if sys.argv[1] == "open":
        open_many(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    elif sys.argv[1] == "lock":
        hold_lock(sys.argv[2])
