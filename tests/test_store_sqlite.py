"""The SQLite store under pressure (issue 10, kind C7) and its migration (issue 11, section 4):
many processes opening fresh files at once, a lock held past the busy timeout (a typed,
retryable ``StoreError``; nothing half-written; the same batch succeeds later), store I/O off the
event loop (other coroutines progress while a write waits for a lock), old files without the
metadata columns migrated on open, and unusable files refused with the typed error."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from foundation_ai.agentic import StoreError
from foundation_ai.agentic.stores import SessionHeader, SqliteSessionStore
from foundation_ai.errors import FoundationAIError
from foundation_ai.types import Messages, SessionRecord, TokenSnapshot, to_json

ROOT = Path(__file__).resolve().parent.parent
PROCS = Path(__file__).resolve().parent / "_store_procs.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def user(text: str) -> SessionRecord:
    return SessionRecord.Conversation(message=Messages.user(text))


class Locker:
    """Another process holding an exclusive write lock on a database until :meth:`release`."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(PROCS), "lock", str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "locked"

    def holding(self) -> bool:
        return self.proc.poll() is None

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=30)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "s.db"
    SqliteSessionStore(path).close()  # created, WAL mode
    yield path


def test_eight_processes_opening_fresh_files_at_once_never_fail(tmp_path: Path) -> None:
    files = 40
    procs = [
        subprocess.Popen(
            [sys.executable, str(PROCS), "open", str(tmp_path), str(files), f"p{n}", "8"],
            stdout=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for n in range(8)
    ]
    outputs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert outputs == ["ok"] * 8
    for i in range(files):
        store = SqliteSessionStore(tmp_path / f"f{i}.db")
        assert sorted(store.sessions()) == sorted(f"p{n}" for n in range(8))
        assert all(store.session_meta(f"p{n}").message_count == 1 for n in range(8))  # type: ignore[union-attr]
        store.close()


def test_a_lock_held_past_the_busy_timeout_is_a_typed_retryable_error(db: Path) -> None:
    store = SqliteSessionStore(db, busy_timeout=0.2)
    first = [user("kept")]
    store.append("s", first)
    batch = [user("one"), user("two")]
    locker = Locker(db)
    try:
        with pytest.raises(StoreError) as info:
            store.append("s", batch, SessionHeader(model="m:x"))
        assert info.value.retryable
        assert "locked" in str(info.value)
        assert isinstance(info.value, FoundationAIError)
        assert not isinstance(info.value, sqlite3.Error)
    finally:
        locker.release()
    assert store.load("s") == first  # nothing of the failed batch was written
    meta = store.session_meta("s")
    assert meta is not None and meta.message_count == 1 and meta.model is None
    store.append("s", batch, SessionHeader(model="m:x"))  # the same batch, sent again
    assert store.load("s") == first + batch
    meta = store.session_meta("s")
    assert meta is not None and meta.message_count == 3 and meta.model == "m:x"
    store.close()


def test_a_write_waiting_for_a_lock_does_not_block_the_event_loop(db: Path) -> None:
    store = SqliteSessionStore(db, busy_timeout=60)
    events: list[str] = []
    locker = Locker(db)

    async def blocked_writer() -> None:
        await store.aappend("waiting", [user("after the lock")])
        events.append("write done")

    async def other_session(n: int) -> None:
        for _ in range(20):
            await asyncio.sleep(0)
        events.append(f"session {n}")

    async def main() -> None:
        writer = asyncio.create_task(blocked_writer())
        await asyncio.sleep(0)
        await asyncio.gather(*(other_session(n) for n in range(200)))
        events.append("others done" if locker.holding() else "lock released early")
        await asyncio.to_thread(locker.release)
        await writer

    try:
        asyncio.run(main())
    finally:
        locker.release()
    assert events.index("others done") == 200  # all 200 progressed while the write waited
    assert events[-1] == "write done"
    assert [r.message.content.content for r in store.load("waiting")] == ["after the lock"]  # type: ignore[union-attr]
    store.close()


def test_an_old_file_without_metadata_columns_is_migrated_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE records (session_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, "
        "body BLOB NOT NULL, PRIMARY KEY (session_id, seq))"
    )
    conn.execute("CREATE TABLE sessions (session_id TEXT PRIMARY KEY, created REAL NOT NULL)")
    rows = [
        ("a", 0, user("first question\nmore")),
        ("a", 1, SessionRecord.Summary(message_count=1, usage=TokenSnapshot())),
        ("a", 2, user("second")),
        ("b", 0, user("b question")),
    ]
    for sid, seq, rec in rows:
        conn.execute(
            "INSERT INTO records VALUES (?, ?, ?, ?)", (sid, seq, rec.__struct_config__.tag, to_json(rec))
        )
    conn.execute("INSERT INTO sessions VALUES ('a', 100.0)")  # "b" has records but no row
    conn.commit()
    conn.close()
    store = SqliteSessionStore(path)
    a, b = store.session_meta("a"), store.session_meta("b")
    assert a is not None and (a.message_count, a.title, a.created, a.model, a.tools) == (
        2,
        "first question",
        100.0,
        None,
        (),
    )
    assert b is not None and (b.message_count, b.title) == (1, "b question")
    assert len(store.load("a")) == 3
    store.append("a", [user("third")], SessionHeader(model="openai:gpt-4o-mini"))
    a = store.session_meta("a")
    assert a is not None and a.message_count == 3 and a.model == "openai:gpt-4o-mini"
    store.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 3


def test_a_version_2_file_gains_the_base_url_column_and_keeps_its_metadata(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    store = SqliteSessionStore(path)
    store.append("a", [user("question"), user("more")], SessionHeader(model="openai:m", tools=("add",)))
    before = store.session_meta("a")
    store.close()
    conn = sqlite3.connect(path)  # back to version 2: the same tables without base_url
    conn.execute("ALTER TABLE sessions DROP COLUMN base_url")
    conn.execute("PRAGMA user_version=2")
    conn.commit()
    conn.close()
    store = SqliteSessionStore(path)
    assert store.session_meta("a") == before  # counts, times, title, model and tools kept
    store.append("a", [], SessionHeader(model="openai:m", base_url="http://127.0.0.1:8080/v1"))
    after = store.session_meta("a")
    assert after is not None and after.base_url == "http://127.0.0.1:8080/v1" and after.message_count == 2
    store.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 3


def test_a_file_that_is_not_a_database_is_a_typed_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not an SQLite database at all, just some text" * 20)
    with pytest.raises(StoreError) as info:
        SqliteSessionStore(bad)
    assert not info.value.retryable
    (tmp_path / "a-file").write_text("")
    with pytest.raises(StoreError):
        SqliteSessionStore(tmp_path / "a-file" / "x.db")  # its directory is a file
