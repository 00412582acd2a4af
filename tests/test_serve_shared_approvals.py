"""Approvals when serving from several processes (``serve --db``): two real server
subprocesses on one real PostgreSQL (pgserver) and a loopback model server. A turn that pauses
for approval is a durable wait: its calls are listed, approved and denied through either
process (or the CLI), it goes on in the process that holds it, an abort ends it aborted, and a
decision taken before the holder is killed is kept by the run that recovers the turn."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pgserver")
pytest.importorskip("dbos")
httpx2 = pytest.importorskip("httpx2")

from ._serve_approvals import ApprovalModelServer  # noqa: E402
from .test_serve_shared import Cluster, Events, _h  # noqa: E402

AGENTS = """
[agents.ops]
model = "openai:fake"
tools = ["tests._serve_approvals:risky"]
requires_approval = ["risky"]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from ._postgres import fresh_database

    url = fresh_database("serve_approvals")
    with ApprovalModelServer() as model:
        c = Cluster(tmp_path_factory.mktemp("approvals"), url, model)
        c.agents = AGENTS
        c.alice = c.key("alice")  # type: ignore[attr-defined]
        try:
            c.start("a")
            c.start("b")
            yield c
        finally:
            errs = c.stop()
            cut = "CancelledError: Task cancelled, timeout graceful shutdown exceeded"
            assert all(e.count("Traceback") == e.count(cut) for e in errs), errs


def _holder(cluster: Cluster, turn_id: str) -> int:
    """The index (in ``cluster.urls``/``procs``) of the process whose DBOS executor runs the turn."""
    import psycopg

    deadline = time.monotonic() + 60
    while True:
        with psycopg.connect(cluster.url) as conn:
            row = conn.execute(
                "SELECT executor_id, status FROM dbos.workflow_status WHERE workflow_uuid = %s", (turn_id,)
            ).fetchone()
        if row is not None and row[1] == "PENDING":
            return ["a", "b"].index(row[0])
        assert time.monotonic() < deadline, row
        time.sleep(0.05)


def _paused_turn(cluster: Cluster, task: str) -> tuple[str, str, int, dict[str, Any]]:
    """Start ``task`` through process a; wait for its pause. ``(session, turn, holder index,
    the awaiting_approval event)``."""
    key = cluster.alice  # type: ignore[attr-defined]
    a = cluster.urls[0]
    sid = httpx2.post(f"{a}/v1/sessions", json={"model": "ops"}, headers=_h(key)).json()["id"]
    r = httpx2.post(f"{a}/v1/sessions/{sid}/turns", json={"input": task}, headers=_h(key))
    assert r.status_code == 202, r.text
    turn_id = r.json()["turn_id"]
    ev = Events(f"{a}/v1/sessions/{sid}/events", key)
    asked = ev.wait_for("awaiting_approval")
    events = ev.finish()  # the stream ends at the pause, as in one process
    kinds = [k for k, _ in events]
    assert kinds[-3:] == ["done", "awaiting_approval", "end"], events
    assert events[-3][1]["summary"]["outcome"] == "awaiting_approval"
    return sid, turn_id, _holder(cluster, turn_id), asked


def _ran(cluster: Cluster, n: int) -> list[Path]:
    return sorted(cluster.gates.glob(f"risky_{n}.*"))


def _finish(cluster: Cluster, url: str, sid: str, start: int) -> list[tuple[str, Any]]:
    ev = Events(f"{url}/v1/sessions/{sid}/events?from={start}", cluster.alice)  # type: ignore[attr-defined]
    ev.thread.join(60)
    if ev.thread.is_alive():
        import psycopg

        with psycopg.connect(cluster.url) as conn:
            st = conn.execute(
                "SELECT workflow_uuid, status, executor_id FROM dbos.workflow_status ORDER BY created_at DESC LIMIT 2"
            ).fetchall()
        raise AssertionError(
            f"{time.time()} {st} {ev.events} {start} {[str(b['messages'][-2:]) for b in cluster.model.bodies[-2:]]} {cluster.stderr('a')[-2000:]} {cluster.stderr('b')[-2000:]}"
        )
    events = ev.finish()
    assert events and events[-1][0] == "end", events
    return events


def test_a_paused_turn_is_approved_through_the_process_that_does_not_hold_it_and_completes(
    cluster: Cluster,
) -> None:
    key = cluster.alice  # type: ignore[attr-defined]
    task = "task: approve 1"
    sid, turn_id, holder, asked = _paused_turn(cluster, task)
    other = cluster.urls[1 - holder]
    [call] = asked["calls"]
    assert call["name"] == "risky" and call["arguments"] == {"n": 1}
    assert _ran(cluster, 1) == []  # nothing runs before the decision
    listed = httpx2.get(f"{other}/v1/sessions/{sid}/approvals", headers=_h(key)).json()["data"]
    assert [c["id"] for c in listed] == [call["id"]]
    meta = httpx2.get(f"{other}/v1/sessions/{sid}", headers=_h(key)).json()
    assert meta["running"] is False and meta["awaiting_approval"] is True, meta
    [listed_meta] = [
        m for m in httpx2.get(f"{other}/v1/sessions", headers=_h(key)).json()["data"] if m["id"] == sid
    ]
    assert listed_meta["running"] is False and listed_meta["awaiting_approval"] is True, listed_meta
    r = httpx2.post(
        f"{other}/v1/sessions/{sid}/approvals/{call['id']}", json={"decision": "approve"}, headers=_h(key)
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["continued"] is True and out["pending"] == [] and out["turn_id"] == turn_id, out
    events = _finish(cluster, other, sid, out["events_from"])
    assert events[-2][0] == "done" and events[-2][1]["summary"]["outcome"] == "completed", events
    meta = httpx2.get(f"{other}/v1/sessions/{sid}", headers=_h(key)).json()
    assert meta["running"] is False and meta["awaiting_approval"] is False, meta
    assert "".join(d["text"] for k, d in events if k == "text") == f"done {task} => ran 1"
    ran = _ran(cluster, 1)
    assert len(ran) == 1  # it ran once, in the process holding the turn
    assert ran[0].suffix == f".{cluster.procs[holder].pid}"
    again = httpx2.post(
        f"{other}/v1/sessions/{sid}/approvals/{call['id']}", json={"decision": "approve"}, headers=_h(key)
    )
    assert again.status_code == 409 and again.json()["error"]["code"] == "tool_call_not_pending", again.text


def test_a_denial_with_a_reason_reaches_the_model_as_a_declined_tool_result(cluster: Cluster) -> None:
    key = cluster.alice  # type: ignore[attr-defined]
    task = "task: deny 2"
    sid, _, holder, asked = _paused_turn(cluster, task)
    other = cluster.urls[1 - holder]
    [call] = asked["calls"]
    reason = "not on a Friday"
    r = httpx2.post(
        f"{other}/v1/sessions/{sid}/approvals/{call['id']}",
        json={"decision": "deny", "reason": reason},
        headers=_h(key),
    )
    assert r.status_code == 200 and r.json()["continued"] is True, r.text
    events = _finish(cluster, other, sid, r.json()["events_from"])
    assert events[-2][1]["summary"]["outcome"] == "completed", events
    last = cluster.model.requests_for(task)[-1]
    tool_msgs = [m for m in last["messages"] if m["role"] == "tool"]
    assert len(tool_msgs) == 1 and tool_msgs[0]["tool_call_id"] == call["id"]
    assert reason in str(tool_msgs[0]["content"]), tool_msgs
    assert _ran(cluster, 2) == []  # the denied call never ran


def test_abort_of_a_turn_waiting_for_approval_ends_it_aborted(cluster: Cluster) -> None:
    key = cluster.alice  # type: ignore[attr-defined]
    task = "task: abort 3"
    sid, turn_id, holder, _ = _paused_turn(cluster, task)
    other = cluster.urls[1 - holder]
    r = httpx2.post(f"{other}/v1/sessions/{sid}/abort", headers=_h(key))
    assert r.status_code == 200 and r.json()["aborted"] is True, r.text
    events = _finish(cluster, other, sid, r.json().get("events_from", 0))
    assert events[-2][0] == "done" and events[-2][1]["summary"]["outcome"] == "aborted", events
    assert _ran(cluster, 3) == []
    assert len(cluster.model.requests_for(task)) == 1  # the model is not called again
    assert httpx2.get(f"{other}/v1/sessions/{sid}/approvals", headers=_h(key)).json()["data"] == []
    import psycopg

    with psycopg.connect(cluster.url) as conn:  # the workflow ended (it waits for nothing more)
        [(status,)] = conn.execute(
            "SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %s", (turn_id,)
        ).fetchall()
    assert status == "SUCCESS"


def test_the_cli_approves_a_served_turn_and_a_new_turn_is_refused_while_it_waits(cluster: Cluster) -> None:
    key = cluster.alice  # type: ignore[attr-defined]
    task = "task: cli 4"
    sid, turn_id, holder, asked = _paused_turn(cluster, task)
    [call] = asked["calls"]
    r = httpx2.post(
        f"{cluster.urls[1 - holder]}/v1/sessions/{sid}/turns", json={"input": "task: x"}, headers=_h(key)
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "approval_pending", r.text
    r = cluster.cli("approvals", turn_id, "--db", cluster.url)
    assert r.returncode == 0 and r.stdout.startswith(f"{call['id']}\trisky("), (r.stdout, r.stderr)
    r = cluster.cli("approve", turn_id, call["id"], "--db", cluster.url)
    assert r.returncode == 0, r.stderr
    events = _finish(cluster, cluster.urls[holder], sid, asked["next"])
    assert events[-2][1]["summary"]["outcome"] == "completed", events
    assert "".join(d["text"] for k, d in events if k == "text") == f"done {task} => ran 4"
    assert len(_ran(cluster, 4)) == 1
    # the durable commands read a served turn as they read a worker's
    r = cluster.cli("status", turn_id, "--db", cluster.url, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"turn_id": turn_id, "session_id": sid, "status": "SUCCESS"}
    r = cluster.cli("follow", turn_id, "--db", cluster.url)
    assert r.returncode == 0, r.stderr
    assert f"done {task} => ran 4" in r.stdout


def test_a_decision_on_one_of_two_pending_calls_is_kept_when_the_holder_is_killed(cluster: Cluster) -> None:
    # runs last: it kills one of the two processes (and starts it again)
    key = cluster.alice  # type: ignore[attr-defined]
    task = "task: kill 5 6"
    sid, _, holder, asked = _paused_turn(cluster, task)
    other = cluster.urls[1 - holder]
    first, second = asked["calls"]
    assert (first["arguments"], second["arguments"]) == ({"n": 5}, {"n": 6})
    r = httpx2.post(
        f"{other}/v1/sessions/{sid}/approvals/{first['id']}",
        json={"decision": "deny", "reason": "five is too many"},
        headers=_h(key),
    )
    assert r.status_code == 200 and r.json()["continued"] is False and r.json()["pending"] == [second["id"]]
    deadline = time.monotonic() + 60  # the holder took the decision (a checkpointed step)
    while [
        c["id"] for c in httpx2.get(f"{other}/v1/sessions/{sid}/approvals", headers=_h(key)).json()["data"]
    ] != [second["id"]]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    name = ["a", "b"][holder]
    proc = cluster.procs[holder]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    cluster.procs.pop(holder)
    cluster.urls.pop(holder)
    cluster.start(name)  # the same executor id: DBOS recovers its turns at launch
    cluster.procs.insert(holder, cluster.procs.pop())
    cluster.urls.insert(holder, cluster.urls.pop())
    other = cluster.urls[1 - holder]
    r = httpx2.post(
        f"{other}/v1/sessions/{sid}/approvals/{first['id']}", json={"decision": "approve"}, headers=_h(key)
    )
    assert r.status_code == 409, r.text  # decided before the kill: still decided
    r = httpx2.post(
        f"{other}/v1/sessions/{sid}/approvals/{second['id']}", json={"decision": "approve"}, headers=_h(key)
    )
    assert r.status_code == 200 and r.json()["continued"] is True, r.text
    assert r.json()["events_from"] in (0, asked["next"]), r.json()
    events = _finish(cluster, other, sid, asked["next"])
    assert events[-2][1]["summary"]["outcome"] == "completed", events
    whole = [k for k, _ in Events(f"{other}/v1/sessions/{sid}/events", key).finish()]
    assert whole.count("done") == 2, whole  # the pause once, then the end
    last = cluster.model.requests_for(task)[-1]
    results = {m["tool_call_id"]: str(m["content"]) for m in last["messages"] if m["role"] == "tool"}
    assert "five is too many" in results[first["id"]] and results[second["id"]] == "ran 6", results
    assert _ran(cluster, 5) == [] and len(_ran(cluster, 6)) == 1
    assert len(cluster.model.requests_for(task)) == 2  # the first model call was not made again
