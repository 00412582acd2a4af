"""Session store at scale: listing sessions and resuming a long session (SQLite, real files).

Measured in one run, interleaved, each the median and minimum of ``--repeat`` rounds (ms):

- **list 100 / list 10,000**: ``SqliteSessionStore.list_sessions()`` returning every metadata
  row (id, created, updated, model, message count, title, system prompt, tools) of a store holding
  that many sessions (3 messages each). Floor: the same ``SELECT`` with ``sqlite3`` alone.
  Also, for 100 sessions only, the old way of listing (load and decode every session's records).
- **resume 10,000**: ``AgentSession.builder(model).with_store(store).resume(id)`` of a session
  of 10,000 messages (user / tool call / tool result / answer turns), and ``store.load(id)``
  alone. Floor: ``SELECT body`` of the same rows plus one ``msgspec`` decode of them all (the
  decoder ``from_json`` uses, without its nesting check). Also the previous store code (rows
  fetched one by one and joined in Python, then decoded at once).

The resume cases are measured again with ``--heap`` (default 1,000,000) more live objects in the
process, as in a long-running server: the garbage collector's full passes walk them all.

Goal (issue 15, goal 5): listing 10,000 sessions and resuming a 10,000-message session each under
50 ms on SQLite. Usage: ``python bench/store.py [--repeat 7] [--heap N] [--dir DIR]``.
"""

from __future__ import annotations

import argparse
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

from foundation_ai import AgentSession
from foundation_ai.agentic import ScriptedModel
from foundation_ai.agentic.stores import SessionHeader, SqliteSessionStore, conversation_of
from foundation_ai.types import Messages, ModelId, SessionRecord, TextContent, ToolCall, from_json
from foundation_ai.types.serialization import _decoder

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


def build_sessions(path: Path, count: int) -> None:
    store = SqliteSessionStore(path)
    for n in range(count):
        store.append(f"session-{n:05d}", turn(n)[:3], HEADER)
    store.close()


def build_long(path: Path, messages: int) -> str:
    store = SqliteSessionStore(path)
    sid = "long-session"
    for i in range(messages // 4):
        store.append(sid, turn(i), HEADER if i == 0 else None)
    store.close()
    return sid


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--heap", type=int, default=1_000_000, help="live objects for the big-heap rounds")
    ap.add_argument("--dir", default=None, help="where to put the database files (default: a temp dir)")
    opts = ap.parse_args()
    # the sessions record tool names this bench offers no catalog for: resume warns each time
    logging.getLogger("foundation_ai").setLevel(logging.ERROR)
    where = Path(opts.dir or tempfile.mkdtemp(prefix="fai-bench-store-"))
    t0 = time.perf_counter()
    small, big, long = where / "s100.db", where / "s10000.db", where / "long.db"
    for p in (small, big, long):
        p.unlink(missing_ok=True)
    build_sessions(small, 100)
    build_sessions(big, 10_000)
    sid = build_long(long, 10_000)
    print(f"built the stores in {time.perf_counter() - t0:.1f} s under {where}")

    stores = {p: SqliteSessionStore(p) for p in (small, big, long)}
    raw = {p: sqlite3.connect(p) for p in (small, big, long)}
    model = ScriptedModel()
    select_meta = (
        "SELECT session_id, created, updated, message_count, title, model, system_prompt, tools "
        "FROM sessions ORDER BY updated DESC, rowid DESC"
    )
    records = _decoder(list[SessionRecord])  # the msgspec decoder from_json uses, alone

    def raw_resume() -> None:
        rows = (
            raw[long].execute("SELECT body FROM records WHERE session_id=? ORDER BY seq", (sid,)).fetchall()
        )
        assert len(records.decode(b"[" + b",".join([r[0] for r in rows]) + b"]")) == 10_000

    def previous_load() -> None:  # the previous store code: rows joined in Python
        rows = (
            raw[long]
            .execute("SELECT seq, body FROM records WHERE session_id=? ORDER BY seq", (sid,))
            .fetchall()
        )
        out = from_json(b"[" + b",".join([body for _, body in rows]) + b"]", list[SessionRecord])
        assert len(out) == 10_000

    def old_listing() -> None:  # before the metadata table: decode every session to describe it
        s = stores[small]
        for i in s.sessions():
            conversation_of(s.load(i))

    resumed: list[Any] = []

    def resume() -> None:
        agent = AgentSession.builder(model).with_store(stores[long]).resume(sid)
        resumed.append(len(agent.messages))

    cases: dict[str, Callable[[], Any]] = {
        "list 100 sessions": lambda: stores[small].list_sessions(),
        "  floor: sqlite3 SELECT": lambda: raw[small].execute(select_meta).fetchall(),
        "  old way: decode every session": old_listing,
        "list 10,000 sessions": lambda: stores[big].list_sessions(),
        "  floor: sqlite3 SELECT ": lambda: raw[big].execute(select_meta).fetchall(),
        "resume a 10,000-message session": resume,
        "  store.load alone": lambda: stores[long].load(sid),
        "  floor: SELECT body + msgspec decode": raw_resume,
        "  previous store code (rows joined in Python)": previous_load,
    }
    assert len(stores[big].list_sessions()) == 10_000
    assert len(stores[long].load(sid)) == 10_000
    for fn in cases.values():  # warm up
        fn()
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(opts.repeat):  # interleaved rounds
        for name, fn in cases.items():
            times[name].append(timed(fn))
    # the same, in a process already holding many live objects (a long-running server or chat):
    # each garbage collection of the oldest generation walks them all
    heap = [{"n": [i]} for i in range(opts.heap)]
    big_heap: dict[str, Callable[[], Any]] = {
        f"resume, {opts.heap:,} other live objects": resume,
        "  store.load alone  ": lambda: stores[long].load(sid),
        "  previous store code (rows joined in Python) ": previous_load,
    }
    for fn in big_heap.values():
        fn()
    times.update({k: [] for k in big_heap})
    for _ in range(opts.repeat):
        for name, fn in big_heap.items():
            times[name].append(timed(fn))
    del heap
    assert set(resumed) == {10_000}

    print(f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} (figures scale with machine load)")
    print(f"{'operation':48} {'median ms':>10} {'min ms':>8}")
    for name, ts in times.items():
        print(f"{name:48} {statistics.median(ts):10.2f} {min(ts):8.2f}")
    for name in (
        "list 10,000 sessions",
        "resume a 10,000-message session",
        f"resume, {opts.heap:,} other live objects",
    ):
        med = statistics.median(times[name])
        verdict = "met" if med < GOAL_MS else "NOT met"
        print(f"goal: {name} under {GOAL_MS:.0f} ms (median {med:.1f} ms): {verdict}")
    for s in stores.values():
        s.close()
    for c in raw.values():
        c.close()
    if opts.dir is None:
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
