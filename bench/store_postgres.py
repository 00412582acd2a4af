"""Session store at scale on PostgreSQL, with SQLite measured in the same run.

A real PostgreSQL 16 is started with ``pgserver`` in a temp folder (or ``--url`` to use yours).
Measured interleaved, each the median and minimum of ``--repeat`` rounds (ms), for both
``PostgresSessionStore`` and ``SqliteSessionStore``:

- **list 100 / list 10,000**: ``list_sessions()`` returning every metadata row (as
  ``SessionMeta``) of a store holding that many sessions (3 messages each). Floor: the bare
  driver fetch of the same columns (psycopg, binary rows, tool names as text; sqlite3), without
  building ``SessionMeta``. Also psycopg's default fetch (JSONB parsed per row), and the previous
  store code (Postgres: one ``json_agg`` document decoded by msgspec).
- **resume 10,000**: ``AgentSession.builder(model).with_store(store).resume(id)`` of a session of
  10,000 messages; and ``store.load(id)`` alone. Floor: the bare driver fetch of the bodies plus
  one msgspec decode of them all (no nesting check, no garbage-collector pause). Also the
  previous store code (Postgres: ``string_agg`` on the server; SQLite: rows fetched one by one
  and joined in Python).
- **append a turn**: one ``append`` of a 4-message turn (one transaction), to a session of 3
  messages and to a session of 10,000 messages (O(records): the two should be equal).

Goal (issue 15, goal 5): listing 10,000 sessions and resuming a 10,000-message session each under
50 ms on SQLite and on Postgres. Usage: ``python bench/store_postgres.py [--repeat 7] [--url URL]``.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import psycopg
from psycopg import conninfo

from foundation_ai import AgentSession
from foundation_ai.agentic import ScriptedModel
from foundation_ai.agentic.stores import SessionHeader, SessionMeta, SqliteSessionStore
from foundation_ai.agentic.stores.postgres import PostgresSessionStore
from foundation_ai.types import Messages, ModelId, SessionRecord, TextContent, ToolCall, from_json
from foundation_ai.types.serialization import _decoder

GOAL_MS = 50.0
PG_BODIES = "SELECT body FROM foundation_ai_records WHERE session_id = %s ORDER BY seq"
LITE_BODIES = "SELECT body FROM records WHERE session_id = ? ORDER BY seq"
LITE_SEQ_BODIES = "SELECT seq, body FROM records WHERE session_id = ? ORDER BY seq"
PG_LIST_JSON_AGG = (
    "SELECT COALESCE(json_agg(json_build_array(session_id, created, updated, message_count, title, model,"
    " system_prompt, tools) ORDER BY updated DESC, write_no DESC), '[]')::text FROM (SELECT * FROM"
    " foundation_ai_sessions ORDER BY updated DESC, write_no DESC LIMIT %s OFFSET %s) AS page"
)
PG_LOAD_STRING_AGG = (
    "SELECT count(*), string_agg(body, '\\x2c'::bytea ORDER BY seq) FROM foundation_ai_records"
    " WHERE session_id = %s"
)
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
    if long_messages:  # the session the "append (10,000 before)" case grows
        for i in range(long_messages // 4):
            store.append("append-long", turn(i))
    else:
        store.append("append-short", turn(0)[:3])


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
    # the sessions record tool names this bench offers no catalog for: resume warns each time
    logging.getLogger("foundation_ai").setLevel(logging.ERROR)
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
        lite_raw = sqlite3.connect(where / "s10000.db")
        columns = "session_id, created, updated, message_count, title, model, system_prompt, tools"
        order = " FROM foundation_ai_sessions ORDER BY updated DESC, write_no DESC"
        pg_meta = "SELECT " + columns.replace("tools", "tools::text") + order
        pg_meta_jsonb = "SELECT " + columns + order
        lite_meta = "SELECT " + columns + " FROM sessions ORDER BY updated DESC, rowid DESC"
        decode_all = _decoder(list[SessionRecord])  # the msgspec decoder from_json uses, alone
        old_rows = msgspec.json.Decoder(
            list[tuple[str, float, float, int, str | None, str | None, str | None, list[str] | None]]
        )
        model = ScriptedModel()
        counter = itertools.count()

        def resume(store: Any) -> Callable[[], None]:
            def run() -> None:
                agent = AgentSession.builder(model).with_store(store).resume("long-session")
                assert len(agent.messages) == 10_000

            return run

        def append(store: Any, sid: str) -> Callable[[], None]:
            return lambda: store.append(sid, turn(next(counter)))

        def pg_load_floor() -> None:
            rows = raw.cursor(binary=True).execute(PG_BODIES, ("long-session",)).fetchall()
            assert len(decode_all.decode(b"[" + b",".join([r[0] for r in rows]) + b"]")) == 10_000

        def lite_load_floor() -> None:
            rows = lite_raw.execute(LITE_BODIES, ("long-session",)).fetchall()
            assert len(decode_all.decode(b"[" + b",".join([r[0] for r in rows]) + b"]")) == 10_000

        def pg_list_previous() -> None:  # the previous store code: one json_agg document
            ((doc,),) = raw.execute(PG_LIST_JSON_AGG, (None, 0)).fetchall()
            metas = [
                SessionMeta(i, c, u, n, t, m, p, tuple(tools or ()))
                for i, c, u, n, t, m, p, tools in old_rows.decode(doc)
            ]
            assert len(metas) == 10_002

        def pg_load_previous() -> None:  # the previous store code: string_agg on the server
            ((count, joined),) = (
                raw.cursor(binary=True).execute(PG_LOAD_STRING_AGG, ("long-session",)).fetchall()
            )
            assert len(from_json(b"[" + bytes(joined) + b"]", list[SessionRecord])) == count

        def lite_load_previous() -> None:  # the previous store code: rows joined in Python
            rows = lite_raw.execute(LITE_SEQ_BODIES, ("long-session",)).fetchall()
            out = from_json(b"[" + b",".join([body for _, body in rows]) + b"]", list[SessionRecord])
            assert len(out) == 10_000

        cases: dict[str, Callable[[], Any]] = {
            "postgres: list 100 sessions": pg[100].list_sessions,
            "  floor: psycopg binary SELECT 100 rows": lambda: (
                small_raw.cursor(binary=True).execute(pg_meta).fetchall()
            ),
            "postgres: list 10,000 sessions": pg[10_000].list_sessions,
            "  floor: psycopg binary SELECT 10,000 rows": lambda: (
                raw.cursor(binary=True).execute(pg_meta).fetchall()
            ),
            "  psycopg default SELECT (JSONB per row)": lambda: raw.execute(pg_meta_jsonb).fetchall(),
            "  previous store code (json_agg)": pg_list_previous,
            "postgres: resume a 10,000-message session": resume(pg[10_000]),
            "  store.load alone": lambda: pg[10_000].load("long-session"),
            "  floor: binary bodies + one msgspec decode": pg_load_floor,
            "  previous store code (string_agg)": pg_load_previous,
            "postgres: append a 4-message turn (3 before)": append(pg[100], "append-short"),
            "postgres: append a 4-message turn (10,000 before)": append(pg[10_000], "append-long"),
            "sqlite: list 100 sessions": lite[100].list_sessions,
            "sqlite: list 10,000 sessions": lite[10_000].list_sessions,
            "  floor: sqlite3 SELECT 10,000 rows": lambda: lite_raw.execute(lite_meta).fetchall(),
            "sqlite: resume a 10,000-message session": resume(lite[10_000]),
            "  store.load alone ": lambda: lite[10_000].load("long-session"),
            "  floor: bodies + one msgspec decode": lite_load_floor,
            "  previous store code (rows joined in Python)": lite_load_previous,
            "sqlite: append a 4-message turn (3 before)": append(lite[100], "append-short"),
            "sqlite: append a 4-message turn (10,000 before)": append(lite[10_000], "append-long"),
        }
        assert len(pg[10_000].list_sessions()) == 10_002
        for fn in cases.values():  # warm up
            fn()
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(opts.repeat):  # interleaved rounds
            for name, fn in cases.items():
                times[name].append(timed(fn))
        print(
            f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} (figures scale with machine load)"
        )
        print(f"{'operation':52} {'median ms':>10} {'min ms':>8}")
        for name, ts in times.items():
            print(f"{name:52} {statistics.median(ts):10.2f} {min(ts):8.2f}")
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
        for engine in ("postgres", "sqlite"):
            short = statistics.median(times[f"{engine}: append a 4-message turn (3 before)"])
            long = statistics.median(times[f"{engine}: append a 4-message turn (10,000 before)"])
            verdict = "met" if long < 2 * short else "NOT met"
            print(
                f"goal: {engine}: append costs O(records), not O(history): {long:.2f} ms after 10,000 messages"
                f" vs {short:.2f} ms after 3 ({long / short:.2f}x, at most 2x): {verdict}"
            )
        raw.close()
        small_raw.close()
        lite_raw.close()
        for s in itertools.chain(pg.values(), lite.values()):
            s.close()
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
