"""Durable turns with real worker processes on one PostgreSQL (pgserver) and a loopback fake
model server: every turn completes, each session's turns run in order, side effects happen
once, and SIGKILLed workers' turns are resumed elsewhere with the same history.

Scaled down for the suite (2 cores): 24 turns / 8 sessions and 3 kills. The issue's full
counts (200 turns / 50 sessions, 20 kills) run with ``FA_DURABLE_FULL=1`` (``make
durable-proof``)."""

from __future__ import annotations

import os
import random
import time
from collections import defaultdict
from pathlib import Path

import pytest

pytest.importorskip("dbos")
pytest.importorskip("pgserver")

from foundation_ai.agentic.stores.sqlite import SqliteSessionStore
from foundation_ai.durable import DurableClient, DurableConfig

from ._durable_app import FakeModelServer, effects_table
from ._durable_pool import WorkerPool, expected_history, normalized, start_postgres

FULL = os.environ.get("FA_DURABLE_FULL") == "1"


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    srv = start_postgres(tmp_path_factory.mktemp("pg"))
    yield srv
    srv.cleanup()


def _setup(tmp_path: Path, postgres, db_name: str, slow: float, delay: float):  # type: ignore[no-untyped-def]
    postgres.psql(f"CREATE DATABASE {db_name};")
    uri = postgres.get_uri().replace("/postgres?", f"/{db_name}?")
    session_db = f"sqlite:///{tmp_path / 'sessions.sqlite3'}"
    model = FakeModelServer(token_delay=delay).__enter__()
    env = {
        "FA_MODEL_URL": model.base_url,
        "FA_EFFECTS_DB": str(tmp_path / "effects.sqlite3"),
        "FA_SLOW": str(slow),
    }
    os.environ.update({"FA_EFFECTS_DB": env["FA_EFFECTS_DB"]})
    effects_table(env["FA_EFFECTS_DB"]).close()
    cfg = DurableConfig(uri, session_db=session_db)
    return model, env, cfg, uri, session_db


def _check_sessions(cfg: DurableConfig, plan: dict[str, list[str]]) -> None:
    store = SqliteSessionStore(cfg.session_db[len("sqlite:///") :])  # type: ignore[index]
    try:
        for sid, prompts in plan.items():
            assert normalized(store.load(sid)) == expected_history(prompts), sid
    finally:
        store.close()


def _check_effects(path: str, notes: list[str]) -> None:
    c = effects_table(path)
    rows = c.execute("SELECT call_id, note FROM effects").fetchall()
    c.close()
    assert sorted(n for _, n in rows) == sorted(notes)  # one row per turn: none lost, none repeated
    assert len({cid for cid, _ in rows}) == len(rows)
    assert all(cid for cid, _ in rows)


def test_three_workers_complete_every_turn_in_session_order_with_each_side_effect_once(
    tmp_path: Path, postgres
) -> None:  # type: ignore[no-untyped-def]
    sessions, per = (50, 4) if FULL else (8, 3)
    model, env, cfg, uri, session_db = _setup(tmp_path, postgres, "proof_order", 0.0, 0.002)
    pool = WorkerPool(tmp_path, uri, session_db, env, concurrency=4)
    plan: dict[str, list[str]] = defaultdict(list)
    try:
        pool.start(3)
        with DurableClient(cfg) as client:
            handles = []
            for k in range(per):  # interleaved: s0 t0, s1 t0, ..., s0 t1, ...
                for s in range(sessions):
                    sid, prompt = f"sess{s}", f"s{s}-t{k}"
                    plan[sid].append(prompt)
                    handles.append(client.enqueue_turn(sid, prompt))
            results = [h.result(timeout=600) for h in handles]
            executors = {r["executor"] for r in client.turns(limit=1000)}
        assert all(r.ok and r.outcome == "Completed" for r in results)
        assert [r.text for r in results] == [
            f"done: {p}" for k in range(per) for p in (plan[f"sess{s}"][k] for s in range(sessions))
        ]
        assert len(executors - {None}) >= 2  # the turns were spread over the workers
    finally:
        codes = pool.stop()
        model.__exit__()
    assert set(codes.values()) == {0}  # SIGTERM: a clean, graceful exit
    _check_sessions(cfg, plan)  # each session: its turns in enqueue order, exactly as uninterrupted
    _check_effects(env["FA_EFFECTS_DB"], [p for ps in plan.values() for p in ps])


def _busy_in_slow_tool(path: str, seen: int) -> tuple[int, int, float] | None:
    """The newest ``slow_lookup`` start after row ``seen``: (its row, the worker's pid, when it
    started, ``time.time()``)."""
    c = effects_table(path)
    c.execute("CREATE TABLE IF NOT EXISTS slow_started (pid INTEGER, key TEXT, at REAL)")
    rows = c.execute(
        "SELECT rowid, pid, at FROM slow_started WHERE rowid > ? ORDER BY rowid", (seen,)
    ).fetchall()
    c.close()
    return (rows[-1][0], rows[-1][1], rows[-1][2]) if rows else None


def test_sigkilled_workers_turns_resume_elsewhere_with_no_side_effect_repeated(
    tmp_path: Path, postgres
) -> None:  # type: ignore[no-untyped-def]
    kills, sessions, per = (20, 10, 3) if FULL else (3, 3, 2)
    slow = 1.0
    model, env, cfg, uri, session_db = _setup(tmp_path, postgres, "proof_kill", slow, 0.001)
    env["FA_PROBE"] = "1"
    rng = random.Random(1414)
    pool = WorkerPool(tmp_path, uri, session_db, env, concurrency=1)
    plan: dict[str, list[str]] = defaultdict(list)
    killed_turns = 0
    try:
        pool.start(3)
        with DurableClient(cfg) as client:
            handles = []
            for k in range(per):
                for s in range(sessions):
                    sid, prompt = f"k{s}", f"k{s}-t{k}"
                    plan[sid].append(prompt)
                    handles.append(client.enqueue_turn(sid, prompt))
            seen = 0
            for _ in range(kills):
                deadline = time.monotonic() + 120
                hit = None
                while hit is None and time.monotonic() < deadline:
                    hit = _busy_in_slow_tool(env["FA_EFFECTS_DB"], seen)
                    time.sleep(0.02)
                assert hit is not None, "no turn reached the slow tool"
                seen, pid, started = hit
                wid = pool.pid_of(pid)
                if wid is None:  # that worker is already gone
                    continue
                # a random point inside the slow tool (which has no side effect), counted from
                # its start: seen late on a loaded machine, the worker may be past it already,
                # in the next turn's side-effecting call, which recovery rightly does not re-run
                pause = started + rng.uniform(0.05, slow * 0.8) - time.time()
                if pause <= 0:
                    continue
                time.sleep(pause)
                pool.kill(wid)
                handed = client.recover([wid])  # what an orchestrator does for a dead worker
                killed_turns += len(handed)
                pool.start(1, wait=False)  # keep three workers
            results = [h.result(timeout=600) for h in handles]
        assert killed_turns >= 1
        assert all(r.ok for r in results)
    finally:
        pool.stop()
        model.__exit__()
    _check_sessions(cfg, plan)  # same history as uninterrupted runs (modulo ids and timestamps)
    _check_effects(env["FA_EFFECTS_DB"], [p for ps in plan.values() for p in ps])
