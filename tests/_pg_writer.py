"""A child process for tests/test_store_postgres.py: ``python tests/_pg_writer.py URL N BATCHES
READY_DIR PEERS`` opens a ``PostgresSessionStore``, waits until PEERS writers are ready (a file
barrier), then appends BATCHES batches to the session ``shared`` and to its own ``own-N``, and
prints ``ok`` or the first error as ``module.Type: text``."""

from __future__ import annotations

import os
import sys
import time


def main(url: str, n: int, batches: int, ready: str, peers: int) -> None:
    from foundation_ai.agentic.stores.postgres import PostgresSessionStore
    from foundation_ai.types import Messages, SessionRecord

    def user(text: str) -> SessionRecord:
        return SessionRecord.Conversation(message=Messages.user(text))

    error = ""
    try:
        store = PostgresSessionStore(url, max_size=2)
        open(os.path.join(ready, f"ready-{n}"), "w").close()
        while len(os.listdir(ready)) < peers:
            time.sleep(0.001)
        for i in range(batches):
            store.append("shared", [user(f"{n}-{i}")])
            store.append(f"own-{n}", [user(f"{n}-{i}-a"), user(f"{n}-{i}-b")])
        store.close()
    except BaseException as exc:
        error = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    print(error or "ok", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
