"""A durable turn taken over while its worker is still alive (``recover`` of a live worker):
the run that lost the turn stores nothing more, the new owner's records stand, and the
session stays well-formed for the next turn. Real worker processes on the embedded SQLite
databases and a loopback fake model server; and one real DBOS process whose workflow loses its
turn between two steps (``tests/_durable_ownership.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos")

from foundation_ai.agentic.stores import conversation_of
from foundation_ai.durable import DurableClient, DurableConfig
from foundation_ai.types import Messages, SessionRecord, ToolCall, ToolResultMessage

from ._durable_app import FakeModelServer, effects_table, wait_probe
from ._durable_pool import ROOT, WorkerPool, normalized


def _wait_log(path: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{text!r} not in {path}: {path.read_text(errors='replace')[-3000:]}")


def _chat_request_is_well_formed(messages: list[dict[str, Any]]) -> None:
    """OpenAI Chat Completions: every ``tool`` message answers a call of the assistant message
    just before its run of tool messages, and each call is answered once
    (https://platform.openai.com/docs/api-reference/chat/create)."""
    open_ids: set[str] = set()
    answered: Counter[str] = Counter()
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_ids, (i, m, messages)
            answered[m["tool_call_id"]] += 1
        elif m["role"] == "assistant" and m.get("tool_calls"):
            open_ids = {c["id"] for c in m["tool_calls"]}
        else:
            open_ids = set()
    assert all(n == 1 for n in answered.values()), answered


def _history_is_well_formed(conv: list[Messages]) -> None:
    """The session's conversation as the next model call gets it: every tool result answers a
    call of the run of calls and results it is in, once."""
    block: set[str] = set()
    answered: Counter[str] = Counter()
    for m in conv:
        c = getattr(m, "content", None)
        if isinstance(m, ToolResultMessage):
            assert m.tool_call_id in block, (m, conv)
            answered[m.tool_call_id] += 1
        elif isinstance(c, ToolCall):
            block.add(c.id)
        else:
            block = set()
    assert all(n == 1 for n in answered.values()), answered


_SIDE_EFFECTS = ({"FA_FACT_SLOW": "3"}, "fact:pay live", "record_fact", "not run again")
_PLAIN = ({"FA_SLOW": "3", "FA_PROBE": "1"}, "pay live", "slow_lookup", "value of pay live")


@pytest.mark.parametrize(
    ("slow", "probe", "tool", "stored"), [_SIDE_EFFECTS, _PLAIN], ids=["side_effects_tool", "plain_tool"]
)
def test_a_worker_that_lost_its_turn_to_recover_stores_nothing_more(
    tmp_path: Path, slow: dict[str, str], probe: str, tool: str, stored: str
) -> None:
    model = FakeModelServer(token_delay=0.001).__enter__()
    effects = str(tmp_path / "effects.sqlite3")
    effects_table(effects).close()
    env = {"FA_MODEL_URL": model.base_url, "FA_EFFECTS_DB": effects, **slow}
    db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
    pool = WorkerPool(tmp_path, db, None, env, concurrency=2)
    try:
        pool.start(2)
        with DurableClient(DurableConfig(db)) as client:
            h = client.enqueue_turn("s-live", "pay live")
            pid = wait_probe(effects, probe)  # the worker is inside the slow tool
            wid = pool.pid_of(pid)
            assert wid is not None
            assert client.recover([wid]) == [h.turn_id]  # the worker is alive and busy
            res = h.result(timeout=120)
            assert res.ok and res.text == "done: pay live"
            # the first run finishes its tool, then finds the turn is no longer its own
            _wait_log(pool.logs / f"{wid}.log", "no longer owned by this execution")
            records = client.store.load("s-live")
            results = [
                r.message
                for r in records
                if isinstance(r, SessionRecord.Conversation) and isinstance(r.message, ToolResultMessage)
            ]
            per_call = Counter(m.tool_call_id for m in results)
            assert per_call and set(per_call.values()) == {1}, normalized(records)
            assert isinstance(records[-1], SessionRecord.Summary), normalized(records)
            [mine] = [t for t in normalized(records) if t[0] == "ToolResult" and t[1] == tool]
            assert stored in str(mine[2])  # the new owner's result stands
            assert [t[0] for t in normalized(records)] == [
                "User",
                "Assistant",
                "ToolResult",
                "Assistant",
                "ToolResult",
                "Assistant",
                "Summary",
            ]
            # the next turn of the session starts from a well-formed history
            n = len(model.bodies)
            nxt = client.enqueue_turn("s-live", "after")
            assert nxt.result(timeout=120).ok
            later = model.bodies[n:]
            assert later
            for body in later:
                _chat_request_is_well_formed(body["messages"])
            _history_is_well_formed(conversation_of(client.store.load("s-live")))
        # the run that lost the turn said so in its worker's log
        assert "this run stops and stores nothing more" in (pool.logs / f"{wid}.log").read_text()
    finally:
        codes = pool.stop()
        model.__exit__()
    assert set(codes.values()) == {0}


def test_a_run_that_lost_its_turn_between_steps_writes_nothing_and_starts_no_step(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    r = subprocess.run(
        [sys.executable, "-m", "tests._durable_ownership", db],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    assert seen["recovered"] == [seen["workflow_id"]] and seen["lost"] is True
    assert seen["stored"] == ["before"]  # "after" was dropped: the turn had another owner
    assert seen["step"] == "refused" and seen["step_body_ran"] is False
    assert seen["result"] == "second run"  # the workflow's outcome is the new owner's
    assert r.stderr.count("this run stops and stores nothing more") == 1
