"""Session store at scale on PostgreSQL, with SQLite measured in the same run.

A real PostgreSQL 16 is started with ``pgserver`` in a temp folder (or ``--url`` to use yours).
Measured interleaved, each the median and minimum of ``--repeat`` rounds (ms), for both
``PostgresSessionStore`` and ``SqliteSessionStore``:

- **list 100 / list 10,000**: ``list_sessions()`` returning every metadata row of a store
  holding that many sessions (3 messages each). Floor: the same ``SELECT`` with psycopg alone.
- **resume 10,000**: ``AgentSession.builder(model).with_store(store).resume(id)`` of a session of
  10,000 messages; and ``store.load(id)`` alone.
- **append a turn**: one ``append`` of a 4-message turn (one transaction).

Goal (issue 15, goal 5): listing 10,000 sessions and resuming a 10,000-message session each under
50 ms on SQLite and on Postgres. Usage: ``python bench/store_postgres.py [--repeat 7] [--url URL]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

from foundation_ai import AgentSession
from foundation_ai.agentic import ScriptedModel
from foundation_ai.agentic.stores import SessionHeader, SqliteSessionStore
from foundation_ai.agentic.stores.postgres import PostgresSessionStore
from foundation_ai.types import Messages, ModelId, SessionRecord, TextContent, ToolCall

GOAL_MS = 50.0
HEADER = SessionHeader(model="openai:gpt-4o-mini", system_prompt="Be brief.", tools=("search", "add"))


def turn(i: int) -> list[SessionRecord]:
    """One turn: a question, a tool call, its result, an answer (4 messages)."""
    model = ModelId.Name("gpt-4o-mini")
    call = ToolCall(id=f"call_{i}", name="search", arguments={"q": f"question {i}", "limit": 5})
    msgs: list[Messages] = [
        Messages.user(f"Question number {i}: what is the weather in a city with a long name?"),
        Messages.Assistant(model=model, content=call),
        Messages.ToolResult(tool_call_id=call.id, name="search", content=TextContent("sunny, 21 C " * 8)),
        Messages.Assistant(model=model, content=TextContent(f"It is sunny (answer {i}). " * 4)),
    ]
    return [SessionRecord.Conversation(message=m) for m in msgs]


def fill(store: Any, sessions: int, long_messages: int) -> None:
    for n in range(sessions):
        store.append(f"session-{n:05d}", turn(n)[:3], HEADER)
    for i in range(long_messages // 4):
        store.append("long-session", turn(i), HEADER if i == 0 else None)


def schema_url(base: str, name: str) -> str:
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{name}"')
    return conninfo.make_conninfo(base, options=f"-c search_path={name}")


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--url", default=None, help="a PostgreSQL URL (default: a pgserver in a temp dir)")
    opts = ap.parse_args()
    where = Path(tempfile.mkdtemp(prefix="fai-bench-pg-"))
    server = None
    if opts.url:
        base = opts.url
    else:
        import pgserver

        server = pgserver.get_server(str(where / "pg"), cleanup_mode="stop")
        base = server.get_uri()
    try:
        t0 = time.perf_counter()
        pg = {
            100: PostgresSessionStore(schema_url(base, "bench_s100")),
            10_000: PostgresSessionStore(schema_url(base, "bench_s10000")),
        }
        lite = {n: SqliteSessionStore(where / f"s{n}.db") for n in (100, 10_000)}
        for n, s in itertools.chain(pg.items(), lite.items()):
            fill(s, n, 10_000 if n == 10_000 else 0)
        print(f"built the stores in {time.perf_counter() - t0:.1f} s")
        raw = psycopg.connect(conninfo.make_conninfo(base, options="-c search_path=bench_s10000"))
        small_raw = psycopg.connect(conninfo.make_conninfo(base, options="-c search_path=bench_s100"))
        select_meta = (
            "SELECT session_id, created, updated, message_count, title, model, system_prompt, tools"
            " FROM foundation_ai_sessions ORDER BY updated DESC, write_no DESC"
        )
        model = ScriptedModel()
        counter = itertools.count()

        def resume(store: Any) -> Callable[[], None]:
            def run() -> None:
                agent = AgentSession.builder(model).with_store(store).resume("long-session")
                assert len(agent.messages) == 10_000

            return run

        def append(store: Any, tag: str) -> Callable[[], None]:
            return lambda: store.append(f"append-{tag}", turn(next(counter)))

        cases: dict[str, Callable[[], Any]] = {}
        for name, stores in (("postgres", pg), ("sqlite", lite)):
            cases[f"{name}: list 100 sessions"] = stores[100].list_sessions
            cases[f"{name}: list 10,000 sessions"] = stores[10_000].list_sessions
            cases[f"{name}: resume a 10,000-message session"] = resume(stores[10_000])
            cases[f"{name}:   store.load alone"] = lambda s=stores[10_000]: s.load("long-session")
            cases[f"{name}: append a 4-message turn"] = append(stores[100], name)
        cases["postgres floor: psycopg SELECT 10,000 rows"] = lambda: raw.execute(select_meta).fetchall()
        cases["postgres floor: psycopg SELECT 100 rows"] = lambda: small_raw.execute(select_meta).fetchall()
        assert len(pg[10_000].list_sessions()) == 10_001
        for fn in cases.values():  # warm up
            fn()
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(opts.repeat):  # interleaved rounds
            for name, fn in cases.items():
                times[name].append(timed(fn))
        print(
            f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} (figures scale with machine load)"
        )
        print(f"{'operation':48} {'median ms':>10} {'min ms':>8}")
        for name in sorted(times, key=lambda k: (not k.startswith("postgres"), k)):
            ts = times[name]
            print(f"{name:48} {statistics.median(ts):10.2f} {min(ts):8.2f}")
        for name in (
            "postgres: list 10,000 sessions",
            "postgres: resume a 10,000-message session",
            "sqlite: list 10,000 sessions",
            "sqlite: resume a 10,000-message session",
        ):
            med = statistics.median(times[name])
            print(
                f"goal: {name} under {GOAL_MS:.0f} ms (median {med:.1f} ms): {'met' if med < GOAL_MS else 'NOT met'}"
            )
        raw.close()
        small_raw.close()
        for s in itertools.chain(pg.values(), lite.values()):
            s.close()
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
