"""The ``SessionStore`` contract, run against every store (in memory, SQLite, PostgreSQL; a new store adds a
``StoreKind`` to ``KINDS``): records appended atomically and loaded in order, ``FailedAction``
never stored, one metadata row per session (created, updated, message count, title, model, system
prompt, tools) written with each append, listing without decoding records, async twins, and
concurrent writers."""

from __future__ import annotations

import asyncio
import gc
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from foundation_ai.agentic import SessionStore
from foundation_ai.agentic.errors import CorruptRecordError, StoreError
from foundation_ai.agentic.stores import (
    InMemorySessionStore,
    SessionHeader,
    SessionMeta,
    SqliteSessionStore,
    aappend,
    alist_sessions,
    aload,
    asession_meta,
)
from foundation_ai.agentic.stores.base import paused_gc
from foundation_ai.types import (
    AgenticError,
    ImageContent,
    MessageRole,
    Messages,
    MimeType,
    ModelId,
    SessionRecord,
    TextContent,
    TokenSnapshot,
    ToolCall,
    UserMessage,
)


@dataclass
class StoreKind:
    """How the contract opens one kind of store.

    ``open(where)`` makes a store at ``where`` (a temp dir); ``reopen(store, where)`` closes it
    and opens the same data again (a new connection); ``corrupt(store, where)`` makes every stored
    record body undecodable, or is ``None`` when the store cannot hold bad bytes. ``sql(where,
    statements)`` runs SQL by hand on the store's data (``None``: not an SQL store), whose records
    table is ``records`` and whose literal for an undecodable body is ``bad_body``.
    """

    name: str
    open: Callable[[Path], Any]
    reopen: Callable[[Any, Path], Any]
    corrupt: Callable[[Any, Path], None] | None = None
    sql: Callable[[Path, list[str]], None] | None = None
    records: str = ""
    bad_body: str = ""
    before_base_url: tuple[str, ...] = ()
    """SQL turning the store's tables back into the version before the ``base_url`` column."""


def _sqlite_corrupt(store: Any, where: Path) -> None:
    with sqlite3.connect(where / "s.db") as conn:
        conn.execute("UPDATE records SET body = x'7b6e6f74206a736f6e'")  # "{not json"


def _sqlite_sql(where: Path, statements: list[str]) -> None:
    with sqlite3.connect(where / "s.db") as conn:
        for stmt in statements:
            conn.execute(stmt)


def _sqlite_reopen(store: Any, where: Path) -> Any:
    store.close()
    return SqliteSessionStore(where / "s.db")


def _postgres_open(where: Path) -> Any:
    pytest.importorskip("pgserver")
    from foundation_ai.agentic.stores.postgres import PostgresSessionStore
    from tests._postgres import fresh_url

    url = fresh_url("contract")
    (where / "pg-url").write_text(url)
    return PostgresSessionStore(url)


def _postgres_reopen(store: Any, where: Path) -> Any:
    from foundation_ai.agentic.stores.postgres import PostgresSessionStore

    store.close()
    return PostgresSessionStore((where / "pg-url").read_text())


def _postgres_corrupt(store: Any, where: Path) -> None:
    import psycopg

    with psycopg.connect((where / "pg-url").read_text(), autocommit=True) as conn:
        conn.execute("UPDATE foundation_ai_records SET body = '{not json'::bytea")


def _postgres_sql(where: Path, statements: list[str]) -> None:
    import psycopg

    with psycopg.connect((where / "pg-url").read_text()) as conn, conn.transaction():
        for stmt in statements:
            conn.execute(stmt.encode())


KINDS = [
    StoreKind("memory", lambda where: InMemorySessionStore(), lambda store, where: store),
    StoreKind(
        "sqlite",
        lambda where: SqliteSessionStore(where / "s.db"),
        _sqlite_reopen,
        _sqlite_corrupt,
        _sqlite_sql,
        "records",
        "x'7b6e6f74206a736f6e'",
        ("ALTER TABLE sessions DROP COLUMN base_url", "PRAGMA user_version=2"),
    ),
    StoreKind(
        "postgres",
        _postgres_open,
        _postgres_reopen,
        _postgres_corrupt,
        _postgres_sql,
        "foundation_ai_records",
        "'{not json'::bytea",
        ("ALTER TABLE foundation_ai_sessions DROP COLUMN base_url",),
    ),
]


@pytest.fixture(params=KINDS, ids=[k.name for k in KINDS])
def kind(request: pytest.FixtureRequest) -> StoreKind:
    k: StoreKind = request.param
    return k


@pytest.fixture
def store(kind: StoreKind, tmp_path: Path) -> Iterator[Any]:
    s = kind.open(tmp_path)
    yield s
    s.close()


def user(text: str) -> SessionRecord:
    return SessionRecord.Conversation(message=Messages.user(text))


def answer(text: str) -> SessionRecord:
    return SessionRecord.Conversation(
        message=Messages.Assistant(model=ModelId.Name("m"), content=TextContent(text))
    )


FAILED = SessionRecord.FailedAction(error=AgenticError(kind="provider", message="x"))
SUMMARY = SessionRecord.Summary(message_count=2, usage=TokenSnapshot(input=3))


# ---- records ---------------------------------------------------------------------------------


def test_store_satisfies_the_protocol(store: Any) -> None:
    assert isinstance(store, SessionStore)


def test_records_load_in_append_order_without_failed_actions(store: Any) -> None:
    batch1 = [user("hi"), FAILED, answer("hello"), SUMMARY]
    batch2 = [SessionRecord.Retracted(reason="r", message_ids=["x"]), user("again")]
    store.append("s1", batch1)
    store.append("s1", batch2)
    assert store.load("s1") == [batch1[0], batch1[2], batch1[3], *batch2]
    assert store.load("unknown") == []


def test_every_kind_of_content_round_trips(store: Any) -> None:
    recs = [
        SessionRecord.Conversation(message=Messages.user("naïve 😀 \u202e rtl \x00 nul")),
        SessionRecord.Conversation(
            message=Messages.User(content=ImageContent("aGVsbG8=", MimeType.Png))  # type: ignore[arg-type]
        ),
        SessionRecord.Conversation(
            message=Messages.Assistant(
                model=ModelId.Name("m"),
                content=ToolCall(id="c1", name="f", arguments={"deep": [[{"a": None}]], "n": 1.5}),
            )
        ),
        answer("x" * 200_000),
    ]
    store.append("s", recs)
    assert store.load("s") == recs


def test_sessions_lists_ids_oldest_first(store: Any) -> None:
    for sid in ("b", "a", "c"):
        store.append(sid, [user(sid)])
    store.append("b", [user("more")])
    assert store.sessions() == ["b", "a", "c"]


def test_an_empty_batch_creates_no_session(store: Any) -> None:
    store.append("s", [])
    store.append("s", [FAILED])
    assert store.sessions() == []
    assert store.session_meta("s") is None
    assert store.list_sessions() == []


def test_data_survives_reopening(kind: StoreKind, tmp_path: Path) -> None:
    s = kind.open(tmp_path)
    hi = user("hi")
    s.append("s", [hi], SessionHeader(model="openai:gpt-4o-mini", tools=("add",)))
    s = kind.reopen(s, tmp_path)
    assert s.load("s") == [hi]
    meta = s.session_meta("s")
    assert meta is not None and meta.model == "openai:gpt-4o-mini" and meta.tools == ("add",)
    s.close()


def test_a_long_session_interleaved_with_others_loads_in_append_order(store: Any) -> None:
    mine: list[SessionRecord] = []
    for i in range(40):
        batch = [user(f"q{i}-{j}") if j % 2 == 0 else answer(f"a{i}-{j}") for j in range(50)]
        store.append("long", batch)
        store.append("other", [user(f"other {i}")])  # rows of another session between batches
        mine.extend(batch)
    assert store.load("long") == mine
    assert len(store.load("other")) == 40


def _sql_kind(kind: StoreKind) -> Callable[[Path, list[str]], None]:
    if kind.sql is None:
        pytest.skip(f"{kind.name} has no SQL to edit by hand")
    return kind.sql


def test_rows_stored_in_reverse_physical_order_still_load_in_seq_order(
    kind: StoreKind, store: Any, tmp_path: Path
) -> None:
    sql = _sql_kind(kind)
    recs = [user(f"m{i}") for i in range(300)]
    store.append("s", recs[:100])
    store.append("s", recs[100:])
    t = kind.records
    sql(
        tmp_path,
        [
            f"CREATE TEMP TABLE rev AS SELECT * FROM {t}",
            f"DELETE FROM {t}",
            f"INSERT INTO {t} SELECT * FROM rev ORDER BY seq DESC",
        ],
    )
    assert store.load("s") == recs


def test_a_record_deleted_by_hand_leaves_the_others_in_order(
    kind: StoreKind, store: Any, tmp_path: Path
) -> None:
    sql = _sql_kind(kind)
    recs = [user(f"m{i}") for i in range(50)]
    store.append("s", recs)
    sql(tmp_path, [f"DELETE FROM {kind.records} WHERE seq = 10"])
    assert store.load("s") == recs[:10] + recs[11:]
    late = answer("after the gap")
    store.append("s", [late])
    assert store.load("s") == [*recs[:10], *recs[11:], late]


def test_one_bad_record_among_many_is_skipped_with_the_others_in_order(
    kind: StoreKind, store: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sql = _sql_kind(kind)
    recs = [user(f"m{i}") for i in range(300)]
    store.append("s", recs)
    untouched = user("untouched")
    store.append("t", [untouched])
    sql(tmp_path, [f"UPDATE {kind.records} SET body = {kind.bad_body} WHERE session_id = 's' AND seq = 150"])
    with caplog.at_level(logging.WARNING):
        assert store.load("s") == recs[:150] + recs[151:]
    assert "skipped 1 undecodable stored record(s) (seq [150])" in caplog.text
    assert store.corrupt_records == {"s": [150]}
    with pytest.raises(CorruptRecordError):
        store.load("s", strict=True)
    assert store.load("t") == [untouched]


# ---- metadata --------------------------------------------------------------------------------


def test_metadata_row_follows_each_append(store: Any) -> None:
    header = SessionHeader(
        model="anthropic:claude-sonnet-4-5", system_prompt="Be brief.", tools=["add", "search"]
    )
    store.append("s", [user("  \n  First line of the question\nsecond line"), FAILED], header)
    first = store.session_meta("s")
    assert isinstance(first, SessionMeta)
    assert first.session_id == "s"
    assert first.message_count == 1
    assert first.title == "First line of the question"
    assert (first.model, first.system_prompt, first.tools) == (
        header.model,
        header.system_prompt,
        tuple(header.tools),  # a list is accepted; rows hold tuples
    )
    assert first.created <= first.updated
    store.append("s", [answer("a"), user("later question"), SUMMARY])
    second = store.session_meta("s")
    assert second is not None
    assert second.message_count == 3
    assert second.title == "First line of the question"  # the first user text names the session
    assert second.model == header.model  # no header: the stored one stays
    assert second.created == first.created
    assert second.updated >= first.updated
    store.append("s", [], SessionHeader(model="openai:gpt-4.1", tools=()))
    third = store.session_meta("s")
    assert third is not None
    assert (third.model, third.system_prompt, third.tools, third.message_count) == (
        "openai:gpt-4.1",
        None,
        (),
        3,
    )
    assert store.session_meta("unknown") is None


def test_the_base_url_is_kept_with_the_header(kind: StoreKind, tmp_path: Path) -> None:
    s = kind.open(tmp_path)
    url = "http://127.0.0.1:8080/v1"
    s.append("s", [user("hi")], SessionHeader(model="openai:m", base_url=url))
    s.append("t", [user("yo")], SessionHeader(model="openai:m"))
    assert s.session_meta("s").base_url == url
    assert [(m.session_id, m.base_url) for m in s.list_sessions()] == [("t", None), ("s", url)]
    s = kind.reopen(s, tmp_path)
    assert s.session_meta("s").base_url == url
    s.append("s", [], SessionHeader(model="anthropic:c"))  # a new header replaces it
    assert s.session_meta("s").base_url is None
    s.close()


def test_tables_from_before_the_base_url_column_gain_it_on_open(kind: StoreKind, tmp_path: Path) -> None:
    if kind.sql is None:
        pytest.skip(f"{kind.name} has no tables")
    s = kind.open(tmp_path)
    s.append("s", [user("hi"), answer("a")], SessionHeader(model="openai:m", tools=("add",)))
    before = s.session_meta("s")
    s.close()
    kind.sql(tmp_path, list(kind.before_base_url))
    s = kind.reopen(s, tmp_path)
    assert s.session_meta("s") == before  # nothing else touched
    s.append("s", [user("again")], SessionHeader(model="openai:m", base_url="http://127.0.0.1:1/v1"))
    after = s.session_meta("s")
    assert after is not None and after.base_url == "http://127.0.0.1:1/v1" and after.message_count == 3
    s.close()


def test_title_is_cut_and_absent_without_user_text(store: Any) -> None:
    store.append("long", [user("y" * 500)])
    store.append("none", [answer("only an answer")])
    long_meta, none_meta = store.session_meta("long"), store.session_meta("none")
    assert long_meta is not None and long_meta.title == "y" * 80
    assert none_meta is not None and none_meta.title is None
    store.append("none", [user("now a question")])
    none_meta = store.session_meta("none")
    assert none_meta is not None and none_meta.title == "now a question"


def test_list_sessions_most_recently_updated_first_with_paging(store: Any) -> None:
    for sid in ("a", "b", "c", "d"):
        store.append(sid, [user(sid)])
    store.append("b", [answer("b2")])
    ids = [m.session_id for m in store.list_sessions()]
    assert ids == ["b", "d", "c", "a"]
    assert [m.session_id for m in store.list_sessions(limit=2)] == ["b", "d"]
    assert [m.session_id for m in store.list_sessions(limit=2, offset=2)] == ["c", "a"]
    assert store.list_sessions(limit=0) == []
    assert [m.message_count for m in store.list_sessions()] == [2, 1, 1, 1]


def test_listing_never_decodes_records(kind: StoreKind, store: Any, tmp_path: Path) -> None:
    if kind.corrupt is None:
        pytest.skip(f"{kind.name} cannot hold undecodable records")
    store.append("s1", [user("hi"), answer("x")], SessionHeader(model="m:n"))
    store.append("s2", [user("yo")])
    kind.corrupt(store, tmp_path)
    rows = store.list_sessions()
    assert [(m.session_id, m.message_count, m.title) for m in rows] == [("s2", 1, "yo"), ("s1", 2, "hi")]
    assert store.session_meta("s1").model == "m:n"
    assert store.load("s1") == []  # the records themselves are skipped as corrupt


# ---- async and concurrency -------------------------------------------------------------------


def test_async_helpers_match_the_blocking_methods(store: Any) -> None:
    hi, ok = user("hi"), answer("ok")

    async def main() -> None:
        await aappend(store, "s", [hi], SessionHeader(model="x:y"))
        await aappend(store, "s", [ok])
        assert await aload(store, "s") == [hi, ok]
        rows = await alist_sessions(store, 10, 0)
        assert [r.session_id for r in rows] == ["s"]
        meta = await asession_meta(store, "s")
        assert meta is not None and meta.message_count == 2 and meta.model == "x:y"

    asyncio.run(main())


def test_concurrent_writers_lose_nothing(store: Any) -> None:
    def writer(n: int) -> None:
        for i in range(25):
            store.append("shared", [user(f"{n}-{i}")])
            store.append(f"own-{n}", [user(f"{n}-{i}"), answer("a")])

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shared = store.load("shared")
    assert len(shared) == 200
    assert sorted(r.message.content.content for r in shared) == sorted(
        f"{n}-{i}" for n in range(8) for i in range(25)
    )
    for n in range(8):
        texts = [r.message.content.content for r in store.load(f"own-{n}")]
        assert texts[::2] == [f"{n}-{i}" for i in range(25)]  # each writer's own order kept
    assert store.session_meta("shared").message_count == 200
    assert len(store.list_sessions()) == 9


# ---- cost ------------------------------------------------------------------------------------


def test_listed_rows_add_no_work_for_the_garbage_collector(store: Any) -> None:
    store.append("s", [user("hi")], SessionHeader(model="m:n", tools=("add",)))
    (row,) = store.list_sessions()
    assert row.tools == ("add",)
    assert not gc.is_tracked(row)


def test_sqlite_append_is_one_transaction_of_statements_that_do_not_grow_with_history(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)

    def statements_of_one_append(text: str) -> list[str]:
        seen.clear()
        store.append("s", [user(text), answer(text)])
        return [s.split()[0].upper() for s in seen]

    first = statements_of_one_append("first")
    for i in range(200):
        store.append("s", [user(f"q{i}"), answer(f"a{i}")] * 5)
    later = statements_of_one_append("after 2,000 messages")
    assert later == first
    assert first.count("BEGIN") == 1 and first[-1] == "COMMIT"
    assert first.count("INSERT") == 3  # two records and the metadata row
    store._conn.set_trace_callback(None)
    # the one read inside the transaction finds the last seq through the primary key index
    plan = store._conn.execute(
        "EXPLAIN QUERY PLAN SELECT MAX(seq) FROM records WHERE session_id=?", ("s",)
    ).fetchall()
    assert any("USING" in str(step[-1]) and "INDEX" in str(step[-1]) for step in plan), plan
    assert not any(str(step[-1]).startswith("SCAN") for step in plan), plan
    store.close()


def test_sqlite_session_longer_than_the_sql_length_limit_still_loads_row_by_row(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    recs = [user(f"message {i} " + "x" * 300) for i in range(40)]
    store.append("s", recs)
    # SQLite refuses to build a value over SQLITE_LIMIT_LENGTH: the joined bodies (about 20 KB)
    # cannot be made in SQL, each row (under 1 KB) still can
    store._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 5_000)
    with pytest.raises(sqlite3.DataError):
        store._conn.execute("SELECT group_concat(body) FROM records").fetchone()
    assert store.load("s") == recs
    assert store.corrupt_records == {}
    store.close()


def test_paused_gc_resumes_the_collector_when_the_last_overlapping_pause_ends() -> None:
    assert gc.isenabled()
    entered, release = threading.Event(), threading.Event()

    def other_thread() -> None:
        with paused_gc():
            entered.set()
            release.wait(10)

    t = threading.Thread(target=other_thread)
    t.start()
    try:
        assert entered.wait(10)
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the other thread's pause is still running
    finally:
        release.set()
        t.join()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_paused_gc_keeps_a_collector_the_caller_disabled_disabled() -> None:
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_text_that_is_not_utf8_is_stored_with_replacement_characters(kind: StoreKind, store: Any) -> None:
    """Lone surrogates (a Latin-1 file name as ``os.listdir`` decodes it) in a message built
    around the constructors, in the system prompt and in a tool name: the write succeeds, and a
    store that writes UTF-8 (SQLite, PostgreSQL) holds U+FFFD in each place (docs/json-format.md,
    "Text"); the in-memory store keeps the Python strings as given."""
    bad = "caf" + b"\xe9".decode("utf-8", "surrogateescape")
    message = UserMessage(role=MessageRole.User, content=TextContent(f"read {bad}"))
    header = SessionHeader(model=f"openai:{bad}", system_prompt=f"Be {bad}.", tools=[f"t_{bad}"])
    store.append("s", [SessionRecord.Conversation(message=message), answer(bad)], header)
    meta = store.session_meta("s")
    assert meta is not None
    name = bad if kind.sql is None else "caf\ufffd"
    assert (meta.title, meta.model, meta.system_prompt, meta.tools) == (
        "read caf\ufffd",  # titles are always valid text
        f"openai:{name}",
        f"Be {name}.",
        (f"t_{name}",),
    )
    loaded = [r.message.content for r in store.load("s")]
    assert loaded == [TextContent(f"read {name}"), TextContent(name)]


def _deep_call(depth: int) -> SessionRecord:
    args: dict[str, Any] = {}
    for _ in range(depth):
        args = {"a": args}
    return SessionRecord.Conversation(
        message=Messages.Assistant(
            model=ModelId.Name("m"), content=ToolCall(id="c1", name="t", arguments=args)
        )
    )


@pytest.mark.parametrize("depth", [129, 980])
def test_a_store_never_keeps_a_record_it_cannot_load(kind: StoreKind, store: Any, depth: int) -> None:
    before = user("before")
    store.append("s", [before])
    batch = [user("in the batch"), _deep_call(depth)]
    try:
        store.append("s", batch)
    except StoreError as exc:
        assert "nests arrays/objects deeper than 128 levels" in str(exc)
        assert store.load("s") == [before]  # nothing of the batch was written
    else:
        assert kind.name == "memory"  # it keeps the objects themselves: it loads what was written
        assert store.load("s") == [before, *batch]
    assert not getattr(store, "corrupt_records", {})


def test_a_deleted_session_is_gone_and_the_others_stay(kind: StoreKind, store: Any, tmp_path: Path) -> None:
    secret = "the-deleted-text-Qx7Wv2Lp9"
    store.append("gone", [user(secret), answer(secret + " echoed")], SessionHeader(model="m"))
    stays = user("stays")
    store.append("kept", [stays])
    assert store.delete_session("gone") is True
    assert store.load("gone") == [] and store.session_meta("gone") is None
    assert store.sessions() == ["kept"] and [m.session_id for m in store.list_sessions()] == ["kept"]
    assert store.load("kept") == [stays]
    assert store.delete_session("gone") is False and store.delete_session("never") is False
    assert asyncio.run(aload(store, "gone")) == []
    if kind.name == "sqlite":  # the file and its WAL no longer hold the text (secure_delete)
        files = list(tmp_path.glob("s.db*"))
        assert files and not any(secret.encode() in f.read_bytes() for f in files)
        assert any(b"stays" in f.read_bytes() for f in files)
    if kind.name != "memory":  # and a reopened store does not have it either
        again = kind.reopen(store, tmp_path)
        assert again.load("gone") == [] and again.sessions() == ["kept"]
        again.close()
