"""Durable turns on the embedded default (SQLite for the session store and DBOS's system
database) with real worker processes and the CLI: submit / status / follow, steering and
abort from another process, at-most-once side-effect tools, configuration errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dbos")

from foundation_ai.durable import DurableClient, DurableConfig
from foundation_ai.errors import ConfigurationError

from ._durable_app import FakeModelServer, effects_table, wait_probe
from ._durable_pool import ROOT, WorkerPool, expected_history, normalized


@pytest.fixture
def embedded(tmp_path: Path):  # type: ignore[no-untyped-def]
    model = FakeModelServer(token_delay=0.001).__enter__()
    env = {
        "FA_MODEL_URL": model.base_url,
        "FA_EFFECTS_DB": str(tmp_path / "effects.sqlite3"),
        "FA_PROBE": "1",
    }
    effects_table(env["FA_EFFECTS_DB"]).close()
    db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
    pools: list[WorkerPool] = []

    def make(**extra: str) -> tuple[WorkerPool, DurableConfig]:
        pool = WorkerPool(tmp_path, db, None, {**env, **extra}, concurrency=2)
        pools.append(pool)
        return pool, DurableConfig(db)

    yield make, env
    for p in pools:
        p.stop()
    model.__exit__()


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {}), "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "foundation_ai", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        cwd=ROOT,
    )


def test_cli_submit_status_and_follow_a_turn_run_by_an_embedded_sqlite_worker(
    embedded, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    make, _env = embedded
    pool, cfg = make()
    pool.start(1)
    sub = _cli("submit", "s1", "hello", "--db", cfg.db)
    assert sub.returncode == 0, sub.stderr
    turn_id = sub.stdout.strip()
    follow = _cli("follow", turn_id, "--json", "--db", cfg.db)
    assert follow.returncode == 0, follow.stderr
    kinds = [json.loads(line) for line in follow.stdout.splitlines()]
    assert len(kinds) == 7  # prompt, call, result, call, result, answer, Summary
    status = _cli("status", turn_id, "--json", "--db", cfg.db)
    assert json.loads(status.stdout) == {"turn_id": turn_id, "session_id": "s1", "status": "SUCCESS"}
    with DurableClient(cfg) as client:
        assert normalized(client.store.load("s1")) == expected_history(["hello"])
        again = client.enqueue_turn("s1", "second")
        assert again.result(timeout=120).text == "done: second"
        assert [r["status"] for r in client.turns("s1")] == ["SUCCESS", "SUCCESS"]
        assert normalized(client.store.load("s1")) == expected_history(["hello", "second"])


def test_abort_sent_from_another_process_ends_the_running_turn(embedded) -> None:  # type: ignore[no-untyped-def]
    make, env = embedded
    gate = Path(env["FA_EFFECTS_DB"]).with_name("gate")
    pool, cfg = make(FA_GATE=str(gate))
    pool.start(1)
    with DurableClient(cfg) as client:
        h = client.enqueue_turn("s-abort", "long job")
        wait_probe(env["FA_EFFECTS_DB"], "long job")
        out = _cli("abort", h.turn_id, "--db", cfg.db)
        assert out.returncode == 0, out.stderr
        gate.touch()  # the slow tool ends after the abort was sent
        res = h.result(timeout=120)
        assert res.outcome == "Aborted" and not res.ok
        texts = [t for t in normalized(client.store.load("s-abort")) if t[0] == "Assistant" and len(t) == 2]
        assert texts == []  # the answer generation never ran


def test_steering_sent_from_another_process_redirects_the_running_turn(embedded) -> None:  # type: ignore[no-untyped-def]
    make, env = embedded
    gate = Path(env["FA_EFFECTS_DB"]).with_name("gate")
    pool, cfg = make(FA_GATE=str(gate))
    pool.start(1)
    with DurableClient(cfg) as client:
        h = client.enqueue_turn("s-steer", "first topic")
        wait_probe(env["FA_EFFECTS_DB"], "first topic")
        h.steer("other topic")
        gate.touch()
        res = h.result(timeout=120)
        assert res.ok and res.text == "done: other topic"
        hist = normalized(client.store.load("s-steer"))
        assert ("User", "other topic") in hist  # the steering message is part of the history
        events = list(h.events())
        assert len(events) == len(hist)


def test_side_effect_tool_interrupted_by_a_crash_is_not_run_again(embedded) -> None:  # type: ignore[no-untyped-def]
    make, env = embedded
    pool, cfg = make(FA_FACT_SLOW="1.5")
    [wid] = pool.start(1)
    with DurableClient(cfg) as client:
        h = client.enqueue_turn("s-crash", "pay once")
        wait_probe(env["FA_EFFECTS_DB"], "fact:pay once")
        pool.kill(wid)  # inside record_fact, after its claim, before its effect
        assert client.recover([wid]) == [h.turn_id]
        pool.start(1)
        res = h.result(timeout=120)
        assert res.ok
        results = [t for t in normalized(client.store.load("s-crash")) if t[0] == "ToolResult"]
        assert results[0][1] == "record_fact" and "not run again" in str(results[0][2])
    c = effects_table(env["FA_EFFECTS_DB"])
    assert c.execute("SELECT COUNT(*) FROM effects").fetchone()[0] == 0  # at most once: not repeated
    c.close()


def test_bad_database_urls_and_agent_factories_are_configuration_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="sqlite:///PATH or postgresql"):
        DurableConfig("mysql://x")
    with pytest.raises(ConfigurationError, match="at least 1"):
        DurableConfig(f"sqlite:///{tmp_path / 'x'}", worker_concurrency=0)
    out = _cli("worker", "--db", f"sqlite:///{tmp_path / 'x'}", "--agent", "no_such_module_xyz:agent")
    assert out.returncode == 2 and "cannot import 'no_such_module_xyz'" in out.stderr
    out = _cli("status", "turn-nope", "--db", f"sqlite:///{tmp_path / 'x'}")
    assert out.returncode == 2 and "no such file" in out.stderr  # a mistyped --db: not created
    from foundation_ai.agentic import SqliteSessionStore

    SqliteSessionStore(tmp_path / "x").close()
    out = _cli("status", "turn-nope", "--db", f"sqlite:///{tmp_path / 'x'}")
    assert out.returncode == 1 and "no durable turn 'turn-nope'" in out.stderr


def test_sigterm_hands_back_a_turn_that_outlives_the_grace_period(embedded) -> None:  # type: ignore[no-untyped-def]
    make, env = embedded
    gate = Path(env["FA_EFFECTS_DB"]).with_name("gate")
    pool, cfg = make(FA_GATE=str(gate))
    pool.grace = 1
    pool.concurrency = 1
    first, _second = pool.start(2)
    with DurableClient(cfg) as client:
        h = client.enqueue_turn("s-term", "deploy")
        pid = wait_probe(env["FA_EFFECTS_DB"], "deploy")
        wid = pool.pid_of(pid)
        assert wid in (first, _second)
        assert pool.terminate(wid) == 0  # graceful: exits 0 once it handed the turn back
        gate.touch()  # the tool can end now (on the worker that resumed the turn)
        res = h.result(timeout=120)
        assert res.ok and res.text == "done: deploy"
        assert normalized(client.store.load("s-term")) == expected_history(["deploy"])
        [row] = client.turns("s-term")
        assert row["executor"] != wid  # finished by the other worker
    c = effects_table(env["FA_EFFECTS_DB"])
    assert c.execute("SELECT COUNT(*) FROM effects").fetchone()[0] == 1
    c.close()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_reports_an_unreachable_database_in_one_line(tmp_path: Path) -> None:
    env = {"FOUNDATION_AI_HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    db = f"postgresql://u:secret@127.0.0.1:{_closed_port()}/x"
    worker = ("worker", "--agent", "tests._durable_app:agent")
    for args in (("submit", "s1", "hi"), ("status", "t1"), ("follow", "t1"), worker):
        r = _cli(*args, "--db", db, env=env)
        assert r.returncode == 1, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, (args, r.stderr)
        assert lines[0].startswith("foundation-ai: error: cannot reach the database postgresql://u:***@")
        assert "secret" not in r.stderr


def test_cli_submit_refuses_an_empty_prompt(tmp_path: Path) -> None:
    env = {"FOUNDATION_AI_HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
    for prompt in ("", "  \n"):
        r = _cli("submit", "s1", prompt, "--db", db, env=env)
        assert r.returncode == 2 and r.stderr.strip() == "foundation-ai: error: the prompt is empty", r.stderr


def test_a_postgresql_session_db_opens_a_postgres_session_store() -> None:

    from foundation_ai.agentic.stores.postgres import PostgresSessionStore
    from foundation_ai.types import Messages, SessionRecord

    from ._postgres import fresh_database

    url = fresh_database("durable_store")
    store = DurableConfig(url).open_store()
    try:
        assert isinstance(store, PostgresSessionStore)
        rec = SessionRecord.Conversation(message=Messages.user("hello"))
        store.append("s1", [rec])
        assert [type(r) for r in store.load("s1")] == [SessionRecord.Conversation]
    finally:
        store.close()
    other = DurableConfig("sqlite:///x.db", session_db=url).open_store()
    try:
        assert isinstance(other, PostgresSessionStore) and len(other.load("s1")) == 1
    finally:
        other.close()
