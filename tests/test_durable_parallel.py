"""Parallel tool calls of a durable turn survive a SIGKILL at any point: real worker processes
on one PostgreSQL (pgserver) run turns whose model answer asks for three side-effecting tools
at once (``tests/_durable_parallel.py``); the worker holding the turn is SIGKILLed at a random
point (right after the fastest tool finished, or a random delay into the turn: during the
first model call, the tools or the answer), handed back with ``recover`` and finished by
another worker.

Each run checks: the turn completes; the stored history is the uninterrupted one with the
results in call order; each call's effect row exists exactly once, keyed by the stored call's
id. The suite runs 3 + 2 runs; ``FA_DURABLE_FULL=1`` (``make durable-proof``) runs 20 + 20 and
prints the counts (runs, kills, completed, effect rows and attempts per call)."""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos")
pytest.importorskip("pgserver")

from foundation_ai.agentic.stores import conversation_of
from foundation_ai.agentic.stores.sqlite import SqliteSessionStore
from foundation_ai.durable import DurableClient, DurableConfig
from foundation_ai.types import AssistantMessage, ToolCall, ToolResultMessage, UserMessage

from ._durable_parallel import TOOLS, tables
from ._durable_pool import WorkerPool
from ._postgres import fresh_database

FULL = os.environ.get("FA_DURABLE_FULL") == "1"


def _wait_event(path: str, run: str, event: str, timeout: float = 120) -> int:
    """The pid of the latest ``event`` probe of ``run`` (waiting for it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c = tables(path)
        row = c.execute(
            "SELECT pid FROM probe WHERE run = ? AND event = ? ORDER BY rowid DESC LIMIT 1", (run, event)
        ).fetchone()
        c.close()
        if row:
            return int(row[0])
        time.sleep(0.01)
    raise TimeoutError(f"{run}: no {event}")


def _check_run(
    store: SqliteSessionStore, path: str, sid: str, run: str, prompt: str, at_most_once: bool = False
) -> Counter[str]:
    """Assert the run's stored history and effects; return the attempts per tool. With
    ``at_most_once`` tools a call cut by the kill may have the "not run again" result instead
    of its own, and then its effect row exists at most once."""
    msgs = conversation_of(store.load(sid))
    calls = [m.content for m in msgs if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall)]
    results = [m for m in msgs if isinstance(m, ToolResultMessage)]
    texts = [m.text() for m in msgs if isinstance(m, AssistantMessage) and m.text() is not None]
    assert isinstance(msgs[0], UserMessage) and msgs[0].text() == prompt
    assert texts == ["Running three tools.", f"done: {prompt}"], (sid, texts)  # one answer each
    assert [c.name for c in calls] == list(TOOLS), sid
    assert [r.tool_call_id for r in results] == [c.id for c in calls], sid  # results in call order
    unknown = set()
    for r in results:
        if at_most_once and "not run again" in str(r.text()):
            unknown.add(r.tool_call_id)
            continue
        assert r.text() == f"{r.name} wrote {run}", (sid, r.content)  # the real results
    assert isinstance(msgs[-1], AssistantMessage) and msgs[-1].text() == f"done: {prompt}"
    assert len(msgs) == 9, (sid, [type(m).__name__ for m in msgs])
    c = tables(path)
    rows = c.execute("SELECT call_id, tool FROM effects WHERE run = ?", (run,)).fetchall()
    attempts = Counter(t for (t,) in c.execute("SELECT tool FROM attempts WHERE run = ?", (run,)))
    c.close()
    assert len(rows) == len(set(rows)), (sid, rows)  # no effect twice
    done = sorted((cl.id, cl.name) for cl in calls if cl.id not in unknown)
    assert sorted(r for r in rows if r[0] not in unknown) == done, (sid, rows)  # each real result once
    return attempts


def _kill_runs(
    tmp_path: Path, runs: int, deps: bool, seed: int, at_most_once: bool = False
) -> dict[str, Any]:
    uri = fresh_database(f"par_{'deps' if deps else 'flat'}{'_amo' if at_most_once else ''}")
    session_db = f"sqlite:///{tmp_path / 'sessions.sqlite3'}"
    effects = str(tmp_path / "effects.sqlite3")
    tables(effects).close()
    env = {"FA_EFFECTS_DB": effects, "FA_GEN_DELAY": "0.02", "FA_AT_MOST_ONCE": "1" if at_most_once else "0"}
    cfg = DurableConfig(uri, session_db=session_db)
    rng = random.Random(seed)
    pool = WorkerPool(tmp_path, uri, session_db, env, concurrency=1, agent="tests._durable_parallel:agent")
    counts: dict[str, Any] = {"runs": runs, "kills": 0, "completed": 0, "points": Counter()}
    per_call: dict[str, Counter[int]] = {t: Counter() for t in TOOLS}
    try:
        pool.start(2)
        with DurableClient(cfg) as client:
            for k in range(runs):
                ms = {t: rng.randint(20, 400) for t in TOOLS}
                run = f"r{k}"
                prompt = (
                    f"{run}|a={ms['slow_a']}|b={ms['fast_b']}|c={ms['mid_c']}|{'deps' if deps else 'flat'}"
                )
                sid = f"par-{k}"
                h = client.enqueue_turn(sid, prompt)
                point = rng.choice(["after_fastest", "random"])
                if point == "after_fastest":
                    first = [t for t in TOOLS if not (deps and t == "fast_b")]  # the first stage
                    fastest = min(first, key=lambda t: ms[t])
                    pid = _wait_event(effects, run, f"{fastest}:end")
                else:
                    pid = _wait_event(effects, run, "gen1:start")
                    span = 0.2 + (sum(ms.values()) if deps else max(ms.values())) / 1000 + 0.2
                    time.sleep(rng.uniform(0, span))
                wid = pool.pid_of(pid)
                if wid is not None and h.status() not in ("SUCCESS", "ERROR"):
                    pool.kill(wid)
                    counts["kills"] += 1
                    counts["points"][point] += 1
                    client.recover([wid])
                    pool.start(1, wait=False)  # keep two workers
                res = h.result(timeout=300)
                assert res.ok and res.outcome == "Completed", (sid, res)
                counts["completed"] += 1
                store = SqliteSessionStore(session_db[len("sqlite:///") :])
                try:
                    attempts = _check_run(store, effects, sid, run, prompt, at_most_once)
                finally:
                    store.close()
                for t in TOOLS:
                    per_call[t][attempts[t]] += 1
    finally:
        pool.stop()
    c = tables(effects)
    counts["effect_rows"] = dict(Counter(t for (t,) in c.execute("SELECT tool FROM effects")))
    c.close()
    counts["attempts_per_call"] = {t: dict(sorted(v.items())) for t, v in per_call.items()}
    counts["points"] = dict(counts["points"])
    kind = ("depends_on" if deps else "flat") + (", at most once" if at_most_once else "")
    print(f"\nparallel-tools kill runs ({kind}): {json.dumps(counts)}")
    return counts


def test_parallel_tool_calls_killed_at_random_points_complete_on_another_worker_with_each_effect_once(
    tmp_path: Path,
) -> None:
    runs = 20 if FULL else 3
    counts = _kill_runs(tmp_path, runs, deps=False, seed=2501)
    assert counts["completed"] == runs
    assert counts["kills"] >= 1
    assert counts["effect_rows"] == {t: runs for t in TOOLS}  # one row per call, none lost


def test_parallel_calls_with_depends_on_killed_at_random_points_complete_with_each_effect_once(
    tmp_path: Path,
) -> None:
    runs = 20 if FULL else 2
    counts = _kill_runs(tmp_path, runs, deps=True, seed=2502)
    assert counts["completed"] == runs
    assert counts["kills"] >= 1
    assert counts["effect_rows"] == {t: runs for t in TOOLS}


def test_parallel_at_most_once_calls_killed_at_random_points_complete_on_another_worker_none_run_twice(
    tmp_path: Path,
) -> None:
    # the case: claim steps before the tools (plain side_effects), killed right after the
    # fastest finished; the recovering worker used to fail with DBOS's unexpected-step error
    runs = 20 if FULL else 3
    counts = _kill_runs(tmp_path, runs, deps=False, seed=2503, at_most_once=True)
    assert counts["completed"] == runs
    assert counts["kills"] >= 1
