"""Vector stores know their embedder (issue 28, section 1; ``docs/memory.md``, "Vector stores"):
every store records the embedder id and dimension at creation and checks both when it is opened
or bound again, with a typed error naming both, before anything is written; ``reindex`` is the
way to switch; a failed memory write inside a session is a ``FailedAction`` of kind
``"memory"`` and the turn goes on. Real stores: numpy in memory, sqlite-vec files (apsw) and
PostgreSQL + pgvector on a pgserver."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from foundation_ai import AgentSession
from foundation_ai.agentic import InMemorySessionStore, ScriptedModel, say
from foundation_ai.memory import MemoryConfig, WordLlamaEmbedder
from foundation_ai.types import SessionRecord, Stream
from foundation_ai.vectors import (
    DimensionMismatchError,
    EmbedderMismatchError,
    InMemoryVectorStore,
    PgVectorStore,
    SqliteVecStore,
    VectorEntry,
    VectorMetadata,
    VectorStoreError,
    reindex,
)

pytest.importorskip("wordllama")

_tables = itertools.count()
TEXTS = [
    f"note {i}: the {w} is on the shelf"
    for i, w in enumerate(["cup", "pen", "book", "lamp", "key", "box", "hat", "map", "jar", "bell"])
]


class ReversedWordLlama:
    """Another embedding model of the same length as wordllama-256: its vectors reversed (a
    real, deterministic model whose vectors mean something else than wordllama's)."""

    dimensions = 256
    model_id = "test/reversed-wordllama-256"

    def __init__(self) -> None:
        self.inner = WordLlamaEmbedder(256)

    def embed(self, texts: Sequence[str]) -> Any:
        return np.ascontiguousarray(self.inner.embed(texts)[:, ::-1])


@pytest.fixture(scope="module")
def wordllama() -> WordLlamaEmbedder:
    return WordLlamaEmbedder(256)


@pytest.fixture(scope="module")
def pg_uri() -> str:
    pytest.importorskip("pgserver")
    from tests._postgres import server_uri

    return server_uri()


def entries(embedder: Any, texts: list[str] = TEXTS) -> list[VectorEntry]:
    rows = embedder.embed(texts)
    return [VectorEntry(f"t{i}", row.tolist(), VectorMetadata(tags=["note"])) for i, row in enumerate(rows)]


@pytest.fixture(params=["memory", "sqlite-vec", "pgvector"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """``open(dimensions, embedder_id)`` -> the same store (file, table, or in-memory object),
    opened again each call."""
    kind = request.param
    table = f"ident{next(_tables)}"
    opened: list[Any] = []
    shared = InMemoryVectorStore()

    def open_(dimensions: int | None, embedder_id: str) -> Any:
        if kind == "memory":
            shared.use_embedder(embedder_id, dimensions or 0)
            return shared
        if kind == "sqlite-vec":
            s: Any = SqliteVecStore(
                tmp_path / "v.sqlite3", dimensions=dimensions, table=table, embedder_id=embedder_id
            )
        else:
            s = PgVectorStore(
                request.getfixturevalue("pg_uri"),
                dimensions=dimensions or 0,
                table=table,
                embedder_id=embedder_id,
            )
        opened.append(s)
        return s

    open_.kind = kind  # type: ignore[attr-defined]
    yield open_
    for s in opened:
        if isinstance(s, PgVectorStore):
            try:
                s.drop()
            except VectorStoreError:
                pass
        s.close()


def test_a_store_records_its_embedder_and_reopening_with_another_dimension_raises_before_any_write(
    opener: Any, wordllama: WordLlamaEmbedder
) -> None:
    store = opener(256, wordllama.model_id)
    store.upsert(entries(wordllama))
    assert store.embedder_id == wordllama.model_id and store.dimensions == 256
    with pytest.raises(DimensionMismatchError) as err:
        opener(384, "sentence-transformers/all-MiniLM-L6-v2")
    text = str(err.value)
    assert wordllama.model_id in text and "all-MiniLM-L6-v2" in text
    assert "256 dimensions" in text and "384 dimensions" in text and "reindex" in text
    assert (err.value.stored, err.value.given) == (256, 384)
    again = opener(256, wordllama.model_id)  # the right embedder still opens it, rows intact
    assert len(again) == 10 and again.search(wordllama.embed(["the lamp"])[0].tolist(), k=1)[0].id == "t3"


def test_another_embedder_of_the_same_dimension_is_refused_and_the_index_keeps_its_rows(
    opener: Any, wordllama: WordLlamaEmbedder
) -> None:
    store = opener(256, wordllama.model_id)
    store.upsert(entries(wordllama))
    other = ReversedWordLlama()
    with pytest.raises(EmbedderMismatchError) as err:
        opener(256, other.model_id)
    assert err.value.stored == wordllama.model_id and err.value.given == other.model_id
    assert wordllama.model_id in str(err.value) and other.model_id in str(err.value)
    assert isinstance(err.value, ValueError)
    with pytest.raises(EmbedderMismatchError):
        store.use_embedder(other.model_id, 256)  # binding an open store is checked the same way
    assert len(opener(256, wordllama.model_id)) == 10  # not 12: nothing of the other model mixed in


def test_reindex_switches_a_store_to_another_embedder_and_dimension(
    opener: Any, wordllama: WordLlamaEmbedder
) -> None:
    store = opener(256, wordllama.model_id)
    store.upsert(entries(wordllama))
    small = WordLlamaEmbedder(64)
    written = reindex(store, small, [(f"n{i}", t, None) for i, t in enumerate(TEXTS[:4])])
    assert written == 4 and len(store) == 4
    assert store.embedder_id == small.model_id and store.dimensions == 64
    assert store.get("t0") is None and len(store.get("n2").vector) == 64  # type: ignore[union-attr]
    hit = store.search(small.embed(["where is the book"])[0].tolist(), k=1)[0]
    assert hit.id == "n2"
    if opener.kind != "memory":  # type: ignore[attr-defined]
        store.close()
        assert len(opener(64, small.model_id)) == 4  # reopened with the new embedder
        with pytest.raises(DimensionMismatchError):
            opener(256, wordllama.model_id)  # the old one is refused now


def test_a_pgvector_table_made_before_embedders_were_recorded_is_checked_by_its_column(
    pg_uri: str, wordllama: WordLlamaEmbedder
) -> None:
    import psycopg

    table = f"legacy{next(_tables)}"
    old = PgVectorStore(pg_uri, dimensions=256, table=table)  # no embedder recorded
    old.upsert(entries(wordllama))
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {table}_meta")  # as a table written by an older version
    old.close()
    try:
        with pytest.raises(DimensionMismatchError, match=r"256 dimensions.*384 dimensions"):
            PgVectorStore(pg_uri, dimensions=384, table=table)
        adopted = PgVectorStore(pg_uri, dimensions=256, table=table, embedder_id=wordllama.model_id)
        assert adopted.embedder_id == wordllama.model_id and len(adopted) == 10
        adopted.close()
    finally:
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.execute(f"DROP TABLE IF EXISTS {table}_meta")


def build(store: Any, embedder: Any, **kw: Any) -> AgentSession:
    return (
        AgentSession.builder(ScriptedModel([say("ok")] * 4))
        .with_store(InMemorySessionStore())
        .with_memory(MemoryConfig(embedder=embedder, vector_store=store, **kw))
        .build()
    )


def test_a_memory_session_binds_its_vector_store_to_its_embedder(
    tmp_path: Path, wordllama: WordLlamaEmbedder
) -> None:
    path = tmp_path / "v.sqlite3"
    agent = build(SqliteVecStore(path), wordllama)
    assert agent.run_turn("the cup is on the shelf").ok
    agent.memory.retriever.flush(10)
    agent.close()
    with pytest.raises(EmbedderMismatchError, match="reversed-wordllama"):
        build(SqliteVecStore(path), ReversedWordLlama())
    with pytest.raises(DimensionMismatchError, match="wordllama/l2_supercat_64"):
        build(SqliteVecStore(path), WordLlamaEmbedder(64))
    switched = build(SqliteVecStore(path), WordLlamaEmbedder(64), reindex=True)
    assert switched.memory.retriever.store.embedder_id == "wordllama/l2_supercat_64"
    assert switched.memory.retriever.store.dimensions == 64
    switched.close()


def test_a_failed_vector_write_in_a_session_is_a_failed_action_of_kind_memory_and_the_turn_goes_on(
    tmp_path: Path, wordllama: WordLlamaEmbedder
) -> None:
    store = SqliteVecStore(tmp_path / "v.sqlite3")
    agent = build(store, wordllama)
    store.close()  # every later write to the vector store fails (VectorStoreError)
    stream = agent.run_turn_stream("remember that the lamp is blue")
    items = list(stream)
    turn = stream.turn
    assert turn.ok and turn.text() == "ok"  # the turn goes on
    failed = [r for r in turn.records if isinstance(r, SessionRecord.FailedAction)]
    assert len(failed) == 1 and failed[0].error.kind == "memory"
    assert "VectorStoreError" in failed[0].error.message and "indexing" in failed[0].error.message
    assert any(isinstance(i, Stream.Next) and i.value == failed[0] for i in items)
    assert agent.memory.recall("lamp", "keyword", 3)  # the texts stay keyword-searchable
    assert agent.run_turn("and the cup?").ok  # the session still works
    agent.close()
