"""What steering costs a durable turn, and that a recovered turn replays the steering its first
run took: real worker processes on an embedded SQLite system database, a loopback model
server, SIGKILL."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("dbos")

from foundation_ai.durable import DurableClient, DurableConfig

from ._durable_app import FakeModelServer, effects_table, wait_probe
from ._durable_pool import WorkerPool, expected_history, normalized


def _ops(client: DurableClient, turn_id: str) -> list[str]:
    """The names of the DBOS operations a turn recorded, in order, without the call suffixes."""
    return [str(s["function_name"]).split(":")[0] for s in client.dbos.list_workflow_steps(turn_id)]


def test_a_turn_nobody_steers_records_no_message_receive_and_no_step_of_its_own(tmp_path: Path) -> None:
    with FakeModelServer(token_delay=0.001) as model:
        env = {"FA_MODEL_URL": model.base_url, "FA_EFFECTS_DB": str(tmp_path / "effects.sqlite3")}
        effects_table(env["FA_EFFECTS_DB"]).close()
        db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
        pool = WorkerPool(tmp_path, db, None, env)
        try:
            pool.start(1)
            with DurableClient(DurableConfig(db)) as client:
                h = client.enqueue_turn("s-quiet", "quiet")
                assert h.result(timeout=120).text == "done: quiet"
                # the model calls and the tool calls only: the setup rides with the first model
                # call, and steering is looked for with a read (no DBOS.recv) when none was sent
                assert _ops(client, h.turn_id) == [
                    "generation",
                    "claim",
                    "tool",
                    "generation",
                    "tool",
                    "generation",
                ]
                assert normalized(client.store.load("s-quiet")) == expected_history(["quiet"])
        finally:
            pool.stop()


def test_a_steered_turn_recovered_after_a_crash_replays_the_steering_its_first_run_took(
    tmp_path: Path,
) -> None:
    with FakeModelServer(token_delay=0.001) as model:
        env = {
            "FA_MODEL_URL": model.base_url,
            "FA_EFFECTS_DB": str(tmp_path / "effects.sqlite3"),
            "FA_PROBE": "1",
            "FA_SLOW": "1.0",
        }
        effects = effects_table(env["FA_EFFECTS_DB"])
        db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
        pool = WorkerPool(tmp_path, db, None, env)
        try:
            [first] = pool.start(1)
            with DurableClient(DurableConfig(db)) as client:
                h = client.enqueue_turn("s-steered", "first topic")
                wait_probe(env["FA_EFFECTS_DB"], "first topic")  # inside the first slow_lookup
                h.steer("other topic")  # taken before the next model call (a recorded recv)
                wait_probe(env["FA_EFFECTS_DB"], "other topic")  # the steered round's slow_lookup
                pool.kill(first)
                assert client.recover([first]) == [h.turn_id]
                pool.start(1)
                res = h.result(timeout=120)
                assert res.ok and res.text == "done: other topic"
                ops = _ops(client, h.turn_id)
                # one recv took the message (its timer is the DBOS.sleep after it); the recovered
                # run replayed it at the same position and looked for no message again
                assert ops.count("DBOS.recv") == 1
                at = ops.index("DBOS.recv")
                assert ops[at - 2 : at + 3] == ["generation", "tool", "DBOS.recv", "DBOS.sleep", "generation"]
                hist = normalized(client.store.load("s-steered"))
                assert hist.count(("User", "other topic")) == 1
                assert hist.count(("ToolResult", "record_fact", "stored other topic")) == 1
                assert hist[-2:] == [("Assistant", "done: other topic"), ("Summary", 11)]
        finally:
            pool.stop()
        rows = effects.execute("SELECT note FROM effects ORDER BY rowid").fetchall()
        assert rows == [("first topic",), ("other topic",)]  # each side effect once
        effects.close()
