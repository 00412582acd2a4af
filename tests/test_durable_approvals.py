"""A durable turn's pause for approval is a durable wait, controlled from other processes: real
worker processes (embedded SQLite system database) run an agent whose answer asks for three
tools at once, two of them needing approval (``tests/_durable_parallel.py:approval_agent``).

- a decision on one of the two pending calls survives a SIGKILL of the worker: the recovered
  turn waits for the other one only, then runs on the new worker;
- approve and deny come from the CLI (another process) and from ``DurableClient``;
- ``abort`` of a waiting turn ends it ``Aborted`` with no tool run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos")

from foundation_ai.agentic.errors import ApprovalPendingError
from foundation_ai.agentic.stores import conversation_of
from foundation_ai.durable import DurableClient, DurableConfig
from foundation_ai.types import ToolResultMessage

from ._durable_parallel import tables
from ._durable_pool import ROOT, WorkerPool


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "foundation_ai", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )


@pytest.fixture
def cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    effects = str(tmp_path / "effects.sqlite3")
    tables(effects).close()
    db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
    pool = WorkerPool(
        tmp_path, db, None, {"FA_EFFECTS_DB": effects}, agent="tests._durable_parallel:approval_agent"
    )
    yield pool, DurableConfig(db), db, effects
    pool.stop()


def _pending(client: DurableClient, turn_id: str, n: int, timeout: float = 120) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        calls = client.pending_approvals(turn_id)
        if len(calls) == n:
            return calls
        time.sleep(0.05)
    raise TimeoutError(f"{turn_id}: never {n} pending calls")


def _effects(path: str, run: str) -> list[str]:
    c = tables(path)
    rows = sorted(t for (t,) in c.execute("SELECT tool FROM effects WHERE run = ?", (run,)))
    c.close()
    return rows


def test_a_decision_on_one_of_two_pending_calls_survives_a_worker_kill_and_the_turn_continues_elsewhere(
    cluster,
) -> None:  # type: ignore[no-untyped-def]
    pool, cfg, db, effects = cluster
    [first] = pool.start(1)
    prompt = "ap1|a=30|b=30|c=30|flat"
    with DurableClient(cfg) as client:
        h = client.enqueue_turn("s-ap1", prompt)
        calls = _pending(client, h.turn_id, 2)
        assert [c.name for c in calls] == ["slow_a", "mid_c"]
        out = _cli("approve", h.turn_id, calls[0].id, "--db", db)  # from another process
        assert out.returncode == 0, out.stderr
        _pending(client, h.turn_id, 1)  # the decision was received (a checkpointed step)
        assert h.status() == "PENDING" and _effects(effects, "ap1") == []  # nothing ran yet
        pool.kill(first)
        assert client.recover([first]) == [h.turn_id]
        pool.start(1)  # the recovered run replays its steps, the received decision included
        assert [c.id for c in client.pending_approvals(h.turn_id)] == [calls[1].id]
        with pytest.raises(ApprovalPendingError):
            client.approve(h.turn_id, calls[0].id)  # decided already
        client.deny(h.turn_id, calls[1].id, "not today")  # the last decision, on the new worker
        res = h.result(timeout=120)  # completes only if the first decision was kept

        assert res.ok and res.outcome == "Completed" and res.text == f"done: {prompt}"
        results = [m for m in conversation_of(client.store.load("s-ap1")) if isinstance(m, ToolResultMessage)]
    assert [r.name for r in results] == ["slow_a", "fast_b", "mid_c"]
    assert results[0].text() == "slow_a wrote ap1" and results[1].text() == "fast_b wrote ap1"
    assert "not today" in str(results[2].text())
    assert _effects(effects, "ap1") == ["fast_b", "slow_a"]  # the denied call never ran


def test_abort_of_a_turn_waiting_for_approvals_ends_it_aborted(cluster) -> None:  # type: ignore[no-untyped-def]
    pool, cfg, db, effects = cluster
    pool.start(1)
    with DurableClient(cfg) as client:
        h = client.enqueue_turn("s-ap2", "ap2|a=30|b=30|c=30|flat")
        _pending(client, h.turn_id, 2)
        out = _cli("abort", h.turn_id, "--db", db)
        assert out.returncode == 0, out.stderr
        res = h.result(timeout=120)
        assert res.outcome == "Aborted" and not res.ok
        assert client.pending_approvals(h.turn_id) == []
        msgs = conversation_of(client.store.load("s-ap2"))
    results = [m for m in msgs if isinstance(m, ToolResultMessage)]
    assert [r.name for r in results] == ["slow_a", "fast_b", "mid_c"]
    assert all("aborted" in str(r.error_detail) for r in results)
    assert _effects(effects, "ap2") == []  # no tool ran
    assert [m.text() for m in msgs if m.text() and m.text().startswith("done")] == []  # no answer
