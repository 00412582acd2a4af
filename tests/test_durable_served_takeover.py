"""A served durable turn taken over while its ``foundation-ai serve`` process still runs it
(``recover`` of a live process): the run that lost the turn publishes no event and stores no
record more, so the turn's event log ends once, with the new owner's ``done``. Two real serve
subprocesses on one real PostgreSQL (pgserver), a loopback model server and a gated tool."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pgserver")
pytest.importorskip("dbos")
httpx2 = pytest.importorskip("httpx2")

from foundation_ai.durable import DurableClient, DurableConfig  # noqa: E402

from ._serve_shared import GatedModelServer, gate_name  # noqa: E402
from .test_serve_shared import Cluster, Events, _h  # noqa: E402


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:

    from ._postgres import fresh_database

    url = fresh_database("served_takeover")
    with GatedModelServer() as model:
        c = Cluster(tmp_path, url, model)
        c.alice = c.key("alice")  # type: ignore[attr-defined]
        try:
            c.start("a")
            c.start("b")
            yield c
        finally:
            c.stop()


def _wait(cond, what: str, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_served_run_that_lost_its_turn_publishes_and_stores_nothing_more(cluster: Cluster) -> None:
    key = cluster.alice  # type: ignore[attr-defined]
    a = cluster.urls[0]
    sid = httpx2.post(f"{a}/v1/sessions", json={"model": "worker"}, headers=_h(key)).json()["id"]
    task = "task: taken over"
    r = httpx2.post(f"{a}/v1/sessions/{sid}/turns", json={"input": task}, headers=_h(key))
    assert r.status_code == 202, r.text
    pid_file = (cluster.gates / gate_name(task)).with_suffix(".pid")
    _wait(pid_file.exists, "the tool never started")
    runner = next(i for i, p in enumerate(cluster.procs) if p.pid == int(pid_file.read_text()))
    executor = ("a", "b")[runner]
    pid_file.unlink()
    with DurableClient(DurableConfig(cluster.url)) as client:
        [turn_id] = client.recover([executor])  # the process is alive, its run inside the tool
    _wait(pid_file.exists, "the new run never reached the tool")  # replayed up to the tool
    cluster.open_gate(task)  # both runs' tools return now
    events = Events(f"{a}/v1/sessions/{sid}/events", key).finish()
    _wait(lambda: "no longer owned by this execution" in cluster.stderr(executor), "no hand-off seen")
    kinds = [k for k, _ in events]
    assert "failed" not in kinds, events
    assert events[-2][0] == "done" and events[-2][1]["summary"]["outcome"] == "completed", events
    assert kinds.count("done") == 1 and kinds.count("tool_result") == 1, kinds
    rec = httpx2.get(f"{a}/v1/sessions/{sid}", headers=_h(key)).json()["records"]
    results = [
        x for x in rec if x.get("type") == "conversation" and x["message"].get("type") == "tool_result"
    ]
    assert len(results) == 1 and results[0]["message"]["content"]["content"] == f"gate {task} opened", rec
    assert rec[-1].get("type") == "summary", rec
    assert f"turn {turn_id} was handed to another run" in cluster.stderr(executor)
