"""A process running one turn on a stored session, for the session-lease tests
(``python -m tests._lease_proc STORE SESSION GATE LEASE_SECONDS``).

``STORE`` is an SQLite file path or a ``postgresql://`` URL. The process resumes (or builds)
``SESSION`` on a :class:`~foundation_ai.agentic.scripted.ScriptedModel` whose first answer
calls ``wait_gate``; the tool prints ``inside <turn id>`` (the id its lease is held under)
and waits until the file ``GATE`` exists, then returns ``"gate opened"``; the model then
answers ``"held turn done"``. Prints ``done`` at the end.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from foundation_ai.agentic import AgentSession
from foundation_ai.agentic.scripted import ScriptedModel, call, say
from foundation_ai.agentic.tools import tool

SESSION: Any = None


def open_store(where: str) -> Any:
    """The store at ``where`` (an SQLite path or a PostgreSQL URL)."""
    if where.startswith("postgresql://") or where.startswith("host="):
        from foundation_ai.agentic.stores.postgres import PostgresSessionStore

        return PostgresSessionStore(where)
    from foundation_ai.agentic.stores import SqliteSessionStore

    return SqliteSessionStore(where)


@tool
async def wait_gate() -> str:
    """Wait for the test's gate file."""
    print("inside", SESSION._lease.turn_id, flush=True)
    gate = sys.argv[3]
    while not os.path.exists(gate):
        await asyncio.sleep(0.02)
    return "gate opened"


def main() -> None:
    global SESSION
    where, sid, _gate, seconds = sys.argv[1:5]
    store = open_store(where)
    model = ScriptedModel([call("wait_gate", {}), say("held turn done")])
    builder = AgentSession.builder(model).with_tools(wait_gate).with_store(store)
    SESSION = builder.resume(sid) if store.session_meta(sid) is not None else builder.build(session_id=sid)
    SESSION.lease_seconds = float(seconds)
    SESSION.run_turn("hold the session")
    print("done", flush=True)
    store.close()


if __name__ == "__main__":
    main()
