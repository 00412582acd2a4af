"""A recovered durable turn offers the model what its first run offered (system prompt, tool
list, parameters), not what the recovering worker's agent factory builds now: real worker
processes on an embedded SQLite system database and a loopback model server that keeps every
request body."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("dbos")

from foundation_ai.durable import DurableClient, DurableConfig

from ._durable_app import FakeModelServer, effects_table, wait_probe
from ._durable_pool import WorkerPool


def _offer(body: dict) -> tuple[str, list[str], float]:  # type: ignore[type-arg]
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    tools = sorted(t["function"]["name"] for t in body.get("tools", []))
    return system, tools, body.get("temperature")  # type: ignore[return-value]


def test_a_recovered_turn_offers_the_recorded_tools_prompt_and_params_not_the_new_ones(
    tmp_path: Path,
) -> None:
    version = tmp_path / "version"
    version.write_text("v1")
    gate = tmp_path / "gate"
    with FakeModelServer(token_delay=0.001) as model:
        env = {
            "FA_MODEL_URL": model.base_url,
            "FA_EFFECTS_DB": str(tmp_path / "effects.sqlite3"),
            "FA_PROBE": "1",
            "FA_GATE": str(gate),
            "FA_AGENT_VERSION": str(version),
        }
        effects_table(env["FA_EFFECTS_DB"]).close()
        db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
        pool = WorkerPool(tmp_path, db, None, env, agent="tests._durable_app:versioned_agent")
        try:
            [first] = pool.start(1)
            with DurableClient(DurableConfig(db)) as client:
                h = client.enqueue_turn("s-rec", "remember")
                wait_probe(env["FA_EFFECTS_DB"], "remember")  # inside slow_lookup, 2 model calls made
                version.write_text("v2")  # the agent changes while the turn runs
                pool.kill(first)
                assert client.recover([first]) == [h.turn_id]
                pool.start(1)
                gate.touch()
                res = h.result(timeout=120)
                assert res.ok and res.text == "done: remember"
                fresh = client.enqueue_turn("s-rec-2", "later")  # a new turn takes the new agent
                wait_probe(env["FA_EFFECTS_DB"], "later")
                assert fresh.result(timeout=120).ok
        finally:
            pool.stop()
        v1 = ("agent v1", ["extra_v1", "record_fact", "slow_lookup"], 0.1)
        turn_bodies = [b for b in model.bodies if any(m.get("content") == "remember" for m in b["messages"])]
        assert len(turn_bodies) == 3  # record_fact, slow_lookup, the answer (made by the new worker)
        assert [_offer(b) for b in turn_bodies] == [v1, v1, v1]
        later = [b for b in model.bodies if any(m.get("content") == "later" for m in b["messages"])]
        assert _offer(later[0]) == ("agent v2", ["extra_v2", "record_fact", "slow_lookup"], 0.9)


def test_a_recovered_turn_offers_the_mcp_tool_list_its_first_run_recorded_after_the_server_changed(
    tmp_path: Path,
) -> None:
    import sys

    pytest.importorskip("mcp")
    from .test_mcp_tools import _free_port, _start_http, _stop

    server = str(Path(__file__).with_name("_mcp_versioned_server.py"))
    port = _free_port()
    mcp = _start_http(port, [sys.executable, server, str(port), "v1"])
    gate = tmp_path / "gate"
    with FakeModelServer(token_delay=0.001) as model:
        env = {
            "FA_MODEL_URL": model.base_url,
            "FA_MCP_URL": f"http://127.0.0.1:{port}/mcp",
            "FA_EFFECTS_DB": str(tmp_path / "effects.sqlite3"),
            "FA_PROBE": "1",
            "FA_GATE": str(gate),
        }
        effects_table(env["FA_EFFECTS_DB"]).close()
        db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
        pool = WorkerPool(tmp_path, db, None, env, agent="tests._durable_app:mcp_agent")
        try:
            [first] = pool.start(1)
            with DurableClient(DurableConfig(db)) as client:
                h = client.enqueue_turn("s-mcp", "count")
                wait_probe(
                    env["FA_EFFECTS_DB"], "count"
                )  # inside slow_lookup: setup and 2 model calls recorded
                pool.kill(first)  # SIGKILL mid-turn
                _stop(mcp)  # the MCP server comes back with another tool list
                mcp = _start_http(port, [sys.executable, server, str(port), "v2"])
                assert client.recover([first]) == [h.turn_id]
                pool.start(1)
                gate.touch()
                res = h.result(timeout=120)
                assert res.ok and res.text == "done: count", res
                fresh = client.enqueue_turn("s-mcp-2", "later")  # a new turn offers the new list
                wait_probe(env["FA_EFFECTS_DB"], "later")
                assert fresh.result(timeout=120).ok
        finally:
            pool.stop()
            _stop(mcp)

    def offered(body: dict) -> dict[str, str]:  # type: ignore[type-arg]
        return {t["function"]["name"]: t["function"].get("description", "") for t in body.get("tools", [])}

    v1 = {
        "record_fact": "Store a note (a side effect: one row in the effects table).",
        "slow_lookup": "Look a key up (slowly; no side effect).",
        "stock_v1": "How many of ``item`` are in stock.",
        "price": "The price of an item (inventory v1).",
    }
    turn = [b for b in model.bodies if any(m.get("content") == "count" for m in b["messages"])]
    assert len(turn) == 3  # record_fact, slow_lookup, then the answer, asked by the recovering worker
    assert [offered(b) for b in turn] == [v1, v1, v1]
    later = [b for b in model.bodies if any(m.get("content") == "later" for m in b["messages"])]
    v2 = {k: v for k, v in v1.items() if k != "stock_v1"} | {
        "stock_v2": v1["stock_v1"],
        "price": "The price of an item (inventory v2).",
    }
    assert offered(later[0]) == v2  # the server's list did change, and a new turn sees it
