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
