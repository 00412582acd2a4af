"""Without the postgres extra, the lease backend of a session store is looked up without
retrying the failed ``postgres`` import every turn (Python does not cache a failed import: it
cost ~8 ms a call, four calls a turn)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from foundation_ai.agentic import InMemorySessionStore
from foundation_ai.agentic.stores import lease

NAME = "foundation_ai.agentic.stores.postgres"


class _NoPostgres:
    """A meta-path finder refusing the postgres store module (as when psycopg is missing)."""

    def __init__(self) -> None:
        self.tries = 0

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == NAME:
            self.tries += 1
            raise ImportError("No module named 'psycopg'", name="psycopg")


def test_a_missing_postgres_extra_is_looked_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    finder = _NoPostgres()
    monkeypatch.delitem(sys.modules, NAME, raising=False)
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    monkeypatch.setattr(lease, "_PG_CLASS", [])
    store = InMemorySessionStore()
    for _ in range(5):
        backend, inner = lease._backend(store)
        assert backend is lease._LOCAL and inner is store
    assert finder.tries == 1


def test_the_holder_is_made_once_and_again_in_a_forked_child() -> None:
    """``lease_holder()`` is kept once made; a forked child names its own pid, not its parent's."""
    import os

    mine = lease.lease_holder()
    assert mine.endswith(f":{os.getpid()}") and lease.lease_holder() is mine
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its holder and leave at once
        os.close(read)
        os.write(write, lease.lease_holder().encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        child = f.read().decode()
    os.waitpid(pid, 0)
    assert child.endswith(f":{pid}") and child != mine
