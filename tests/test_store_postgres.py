"""``PostgresSessionStore`` beyond the shared contract (tests/test_store_contract.py runs that
on PostgreSQL too): eight real writer processes, typed errors for every driver failure, corrupt
rows, and an agent session resumed exactly from PostgreSQL. A real server from ``pgserver``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pgserver")
psycopg = pytest.importorskip("psycopg")

from foundation_ai import AgentSession  # noqa: E402
from foundation_ai.agentic import ScriptedModel, call, say, tool  # noqa: E402
from foundation_ai.agentic.errors import CorruptRecordError, SessionClosedError, StoreError  # noqa: E402
from foundation_ai.agentic.stores import conversation_of  # noqa: E402
from foundation_ai.agentic.stores.postgres import PostgresSessionStore  # noqa: E402
from foundation_ai.types import Messages, SessionRecord  # noqa: E402

from ._postgres import fresh_url, server_uri  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def user(text: str) -> SessionRecord:
    return SessionRecord.Conversation(message=Messages.user(text))


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def test_eight_writer_processes_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    url = fresh_url("writers")
    PostgresSessionStore(url).close()  # tables exist; the children race on the rows only
    ready = tmp_path / "ready"
    ready.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    batches = 40
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "_pg_writer.py"),
                url,
                str(n),
                str(batches),
                str(ready),
                "8",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(8)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [o for o, _ in outs] == ["ok\n"] * 8, [e[-2000:] for _, e in outs]
    store = PostgresSessionStore(url)
    try:
        shared = [r.message.content.content for r in store.load("shared")]  # type: ignore[union-attr]
        assert len(shared) == 8 * batches
        assert sorted(shared) == sorted(f"{n}-{i}" for n in range(8) for i in range(batches))
        for n in range(8):
            mine = [t for t in shared if t.startswith(f"{n}-")]
            assert mine == [f"{n}-{i}" for i in range(batches)]  # each writer's order kept
            own = [r.message.content.content for r in store.load(f"own-{n}")]  # type: ignore[union-attr]
            assert own == [f"{n}-{i}-{s}" for i in range(batches) for s in "ab"]
            meta = store.session_meta(f"own-{n}")
            assert meta is not None and meta.message_count == 2 * batches
        meta = store.session_meta("shared")
        assert meta is not None and meta.message_count == 8 * batches
        assert len(store.list_sessions()) == 9
        with psycopg.connect(url) as conn:
            dup = conn.execute(
                "SELECT count(*) FROM (SELECT body FROM foundation_ai_records GROUP BY session_id, body"
                " HAVING count(*) > 1) d"
            ).fetchone()
        assert dup == (0,)
    finally:
        store.close()


def test_eight_processes_creating_the_tables_at_once_never_fail(tmp_path: Path) -> None:
    url = fresh_url("create")  # an empty schema: every child runs CREATE TABLE at once
    ready = tmp_path / "ready"
    ready.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "_pg_writer.py"), url, str(n), "1", str(ready), "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(8)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [o for o, _ in outs] == ["ok\n"] * 8, [e[-2000:] for _, e in outs]
    store = PostgresSessionStore(url)
    try:
        assert len(store.load("shared")) == 8
    finally:
        store.close()


def test_an_unreachable_server_is_a_typed_retryable_error_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://someone:s3cret-pw@/postgres?host={tmp_path}&port=1"
    with pytest.raises(StoreError) as err:
        PostgresSessionStore(url, timeout=1.0)
    assert err.value.retryable
    assert "s3cret-pw" not in str(err.value) and "s3cret-pw" not in err.value.path
    assert not isinstance(err.value, psycopg.Error)


def test_a_connection_killed_by_the_server_is_a_typed_error_and_the_next_write_works() -> None:
    url = fresh_url("killed")
    store = PostgresSessionStore(url, min_size=1, max_size=1)
    try:
        store.append("s", [user("one")])
        with psycopg.connect(server_uri(), autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = '' AND pid <> pg_backend_pid() AND datname = current_database()"
                " AND backend_type = 'client backend'"
            )
        try:
            store.append("s", [user("two")])
        except StoreError as exc:  # the pooled connection was dead: typed, retryable, nothing stored
            assert exc.retryable
            store.append("s", [user("two")])  # the pool replaced it
        assert [r.message.content.content for r in store.load("s")] == ["one", "two"]  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_server_side_error_is_a_typed_error_not_a_driver_error() -> None:
    url = fresh_url("broken")
    store = PostgresSessionStore(url)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE foundation_ai_records ADD CONSTRAINT tiny CHECK (length(body) < 10)")
        with pytest.raises(StoreError) as err:
            store.append("s", [user("a message longer than ten bytes")])
        assert not err.value.retryable and "tiny" in str(err.value)
        assert store.load("s") == [] and store.session_meta("s") is None  # nothing of the batch
    finally:
        store.close()


def test_corrupt_rows_are_skipped_counted_and_strict_raises() -> None:
    url = fresh_url("corrupt")
    store = PostgresSessionStore(url)
    try:
        store.append("s", [user("a"), user("b"), user("c")])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE foundation_ai_records SET body = '{broken'::bytea WHERE seq = 1")
        assert [r.message.content.content for r in store.load("s")] == ["a", "c"]  # type: ignore[union-attr]
        assert store.corrupt_records == {"s": [1]}
        with pytest.raises(CorruptRecordError) as err:
            store.load("s", strict=True)
        assert err.value.seqs == [1]
    finally:
        store.close()


def test_a_closed_store_raises_session_closed() -> None:
    store = PostgresSessionStore(fresh_url("closed"))
    store.close()
    store.close()  # idempotent
    with pytest.raises(SessionClosedError):
        store.append("s", [user("x")])
    with pytest.raises(SessionClosedError):
        store.list_sessions()


def test_an_agent_session_resumes_exactly_from_postgres() -> None:
    url = fresh_url("agent")
    store = PostgresSessionStore(url)
    model = ScriptedModel([[say("Adding."), call("add", {"a": 1, "b": 2})], say("3")], chunk_mode="delta")
    agent = AgentSession.builder(model).with_tools(add).with_store(store).build()
    assert agent.run_turn("1+2").ok
    agent.close()
    other = PostgresSessionStore(url)  # another connection pool, as another process would have
    try:
        resumed = (
            AgentSession.builder(ScriptedModel([say("more")]))
            .with_tools(add)
            .with_store(other)
            .resume(agent.session_id)
        )
        assert resumed.messages == agent.messages  # exact: ids, timestamps, usage
        assert conversation_of(other.load(agent.session_id)) == agent.messages
        meta = other.session_meta(agent.session_id)
        assert meta is not None and meta.title == "1+2" and meta.tools == ("add",)
        assert resumed.run_turn("again").text() == "more"
    finally:
        other.close()


def test_a_sqlalchemy_style_url_is_accepted() -> None:
    url = server_uri()
    assert url.startswith("postgresql://")
    store = PostgresSessionStore("postgresql+psycopg://" + url[len("postgresql://") :])
    try:
        store.append("sqlalchemy-url", [user("hi")])
        assert [r.message.content.content for r in store.load("sqlalchemy-url")] == ["hi"]  # type: ignore[union-attr]
    finally:
        store.close()
