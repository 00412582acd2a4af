"""Retrieval over a session: background embedding, semantic / keyword / hybrid search, a shared
vector store split by session, and the search_context tool."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from foundation_ai.agentic import InMemorySessionStore, ScriptedModel, ToolRegistry
from foundation_ai.errors import ConfigurationError
from foundation_ai.memory import MemoryConfig, MemoryManager, Retriever, WordLlamaEmbedder
from foundation_ai.types import Messages, SessionRecord, TextContent, ToolCall
from foundation_ai.vectors import SqliteVecStore

DOCS = [
    ("m1", "My favourite database is SQLite because it runs inside the process.", "message"),
    ("m2", "The train to Porto leaves at 9:40 from platform 4.", "message"),
    ("m3", "Remember to water the basil on the balcony every morning.", "message"),
    ("o1", "The user is allergic to peanuts.", "observation"),
]


def ready(r: Retriever) -> Retriever:
    r.add(DOCS)
    assert r.flush(30.0)
    return r


def test_semantic_search_finds_related_meaning() -> None:
    r = ready(Retriever())
    try:
        hits = r.search("which embedded database engine do I like?", k=2, mode="semantic")
        assert hits[0].id == "m1" and hits[0].kind == "message"
        assert -1.0 <= hits[0].score <= 1.0 and hits[0].score >= hits[1].score
        assert r.search("food allergy", k=1, mode="semantic")[0].id == "o1"
    finally:
        r.close()


def test_keyword_search_ranks_by_shared_words_only() -> None:
    r = ready(Retriever())
    try:
        hits = r.search("platform 4 Porto", k=5, mode="keyword")
        assert [h.id for h in hits] == ["m2"]
        assert r.search("the of and", k=5, mode="keyword") == []  # stop words only
    finally:
        r.close()


def test_hybrid_fuses_both_rankings_and_honours_exclusions() -> None:
    r = ready(Retriever())
    try:
        hits = r.search("basil watering", k=3, mode="hybrid")
        assert hits[0].id == "m3"
        assert "m3" not in {h.id for h in r.search("basil watering", k=3, mode="hybrid", exclude={"m3"})}
        with pytest.raises(ConfigurationError, match="unknown search mode"):
            r.search("x", mode="graph")  # type: ignore[arg-type]
    finally:
        r.close()


def test_texts_are_keyword_searchable_before_they_are_embedded() -> None:
    class Slow:
        model_id = "slow"
        dimensions = 256

        def __init__(self) -> None:
            import threading

            self.gate = threading.Event()
            self.inner = WordLlamaEmbedder()

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            if len(texts) > 1:
                self.gate.wait(10)
            return self.inner.embed(texts)

    slow = Slow()
    r = Retriever(slow)
    try:
        r.add(DOCS)
        assert r.pending + (1 if r._busy else 0) > 0  # still queued or running
        assert [h.id for h in r.search("peanuts", mode="keyword")] == ["o1"]
        assert r.search("peanuts", mode="semantic") == []  # not embedded yet
        slow.gate.set()
        assert r.flush(30.0)
        assert r.search("peanuts allergy", k=1, mode="semantic")[0].id == "o1"
    finally:
        slow.gate.set()
        r.close()


def test_a_failing_embedder_is_logged_and_keyword_search_still_works() -> None:
    class Broken:
        model_id = "broken"
        dimensions = 4

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            raise RuntimeError("no model")

    r = Retriever(Broken())
    try:
        r.add(DOCS)
        assert r.flush(10.0)
        assert r.errors == 1
        assert r.search("Porto", mode="keyword")[0].id == "m2"
    finally:
        r.close()


def test_sessions_sharing_one_sqlite_vec_store_see_only_their_own_vectors(tmp_path: Path) -> None:
    store = SqliteVecStore(tmp_path / "v.sqlite3", dimensions=256)
    a, b = Retriever(store=store, session_id="a"), Retriever(store=store, session_id="b")
    try:
        a.add([("a1", "SQLite runs inside the process.", "message")])
        b.add([("b1", "SQLite is an embedded database.", "message")])
        assert a.flush() and b.flush()
        assert len(store) == 2
        assert [h.id for h in a.search("embedded database", mode="semantic")] == ["a1"]
        assert [h.id for h in b.search("embedded database", mode="semantic")] == ["b1"]
        got = store.get("a1")
        assert got is not None and got.metadata.labels == {"session": "a", "kind": "message"}
    finally:
        a.close()
        b.close()
        store.close()


async def test_search_context_tool_recalls_older_messages() -> None:
    mgr = MemoryManager(MemoryConfig())
    mgr.bind(
        SimpleNamespace(
            models=[ScriptedModel()],
            messages=[],
            store=InMemorySessionStore(),
            session_id="s",
            context_start=0,
        )
    )
    try:
        mgr.absorb(SessionRecord.Conversation(message=Messages.user(text)) for _, text, _ in DOCS)
        reg = ToolRegistry(mgr.tools())
        assert reg.names() == ["memory", "search_context"]
        res = await reg.run(
            ToolCall(
                id="c", name="search_context", arguments={"query": "when does my train leave?", "limit": 1}
            )
        )
        assert isinstance(res.content, TextContent) and res.error_detail is None
        assert res.content.content == '- (message) "The train to Porto leaves at 9:40 from platform 4."'
        res = await reg.run(
            ToolCall(id="d", name="search_context", arguments={"query": "zzzz qqqq", "mode": "keyword"})
        )
        assert isinstance(res.content, TextContent) and res.content.content == "nothing found"
        bad = await reg.run(
            ToolCall(id="e", name="search_context", arguments={"query": "x", "mode": "graph"})
        )
        assert bad.error_detail is not None
    finally:
        mgr.close()


def test_an_embedder_of_another_length_than_the_stored_vectors_is_refused_at_build(tmp_path: Path) -> None:
    from foundation_ai.agentic import AgentSession, say
    from foundation_ai.vectors import DimensionMismatchError, InMemoryVectorStore, VectorEntry

    path = tmp_path / "v.sqlite3"
    first = SqliteVecStore(path)
    first.upsert([VectorEntry(id="a", vector=[1.0] + [0.0] * 255)])  # the file now holds 256-dim vectors
    first.close()

    def build(embedder: WordLlamaEmbedder, store: object) -> AgentSession:
        config = MemoryConfig(embedder=embedder, vector_store=store)
        return (
            AgentSession.builder(ScriptedModel([say("ok")]))
            .with_store(InMemorySessionStore())
            .with_memory(config)
            .build()
        )

    store = SqliteVecStore(path)
    with pytest.raises(
        DimensionMismatchError,
        match=r"created for an unnamed embedder \(256 dimensions\) .* 'wordllama/l2_supercat_64' \(64 dimensions\)",
    ):
        build(WordLlamaEmbedder(64), store)
    with pytest.raises(DimensionMismatchError, match=r"\(256 dimensions\) .* \(128 dimensions\)"):
        build(WordLlamaEmbedder(128), InMemoryVectorStore(dimensions=256))
    agent = build(WordLlamaEmbedder(256), store)  # the same length builds
    assert agent.run_turn("hi").ok
    agent.close()
    fresh = build(WordLlamaEmbedder(64), SqliteVecStore(tmp_path / "new.sqlite3"))  # empty: takes 64
    fresh.close()
    store.close()
