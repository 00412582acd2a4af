"""Embedders: the wordllama default, llama.cpp in process, OpenAI-compatible /v1/embeddings
(against a real llama.cpp server with embeddings on), and the LRU cache."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from foundation_ai.errors import ConfigurationError, FoundationAIError
from foundation_ai.memory import (
    CachedEmbedder,
    Embedder,
    EmbeddingError,
    LlamaCppEmbedder,
    OpenAIEmbedder,
    WordLlamaEmbedder,
    default_embedder,
)
from tests._llama_server import LlamaServerHandle, LlamaServerUnavailable, start_llama_server

SENTENCES = [
    "SQLite is a database engine that runs inside your process.",
    "The weather in Lisbon is sunny in July.",
    "My cat likes to sleep on the keyboard.",
]


@pytest.fixture(scope="module")
def embedding_server() -> Iterator[LlamaServerHandle]:
    """A loopback llama.cpp server with ``/v1/embeddings`` (the bundled SmolLM2 GGUF)."""
    try:
        handle = start_llama_server(n_ctx=512, embedding=True)
    except LlamaServerUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"llama.cpp server unavailable in CI: {exc}")
        pytest.skip(str(exc))
    with handle:
        yield handle


def test_default_embedder_gives_normalised_float32_rows_in_input_order() -> None:
    e = default_embedder()
    assert isinstance(e, Embedder)
    assert e.dimensions == 256
    assert e.model_id == "wordllama/l2_supercat_256"
    m = e.embed(SENTENCES)
    assert m.dtype == np.float32
    assert m.shape == (3, 256)
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-4)
    again = e.embed(list(reversed(SENTENCES)))
    assert np.allclose(again[::-1], m)
    assert default_embedder() is e


def test_default_embedder_ranks_the_related_sentence_first() -> None:
    e = default_embedder()
    q = e.embed(["which database runs inside my process?"])[0]
    scores = e.embed(SENTENCES) @ q
    assert int(np.argmax(scores)) == 0


def test_empty_batch_gives_an_empty_matrix_with_the_right_width() -> None:
    assert WordLlamaEmbedder().embed([]).shape == (0, 256)


def test_wordllama_truncates_to_fewer_dimensions_and_rejects_others() -> None:
    small = WordLlamaEmbedder(dimensions=64)
    assert small.embed(["hello"]).shape == (1, 64)
    assert small.model_id != WordLlamaEmbedder().model_id
    with pytest.raises(ConfigurationError):
        WordLlamaEmbedder(dimensions=100)


class CountingEmbedder:
    """Wraps a real embedder and records every batch it is asked for."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimensions = inner.dimensions
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return self.inner.embed(texts)


def test_cache_embeds_only_missing_texts_once_and_returns_the_same_vectors() -> None:
    inner = CountingEmbedder(WordLlamaEmbedder())
    cached = CachedEmbedder(inner)
    first = cached.embed(["a", "b", "a"])
    assert inner.batches == [["a", "b"]]
    assert np.allclose(first[0], first[2])
    second = cached.embed(["b", "c"])
    assert inner.batches[-1] == ["c"]
    assert np.allclose(second[0], first[1])
    assert cached.hits == 2 and cached.misses == 3
    cached.embed(["a", "b", "c"])
    assert len(inner.batches) == 2  # all three were cached


def test_cache_evicts_the_least_recently_used_vector() -> None:
    inner = CountingEmbedder(WordLlamaEmbedder())
    cached = CachedEmbedder(inner, max_entries=2)
    cached.embed(["a", "b"])
    cached.embed(["a"])  # a is now the most recent
    cached.embed(["c"])  # evicts b
    assert len(cached) == 2
    cached.embed(["a"])
    assert inner.batches[-1] == ["c"]
    cached.embed(["b"])
    assert inner.batches[-1] == ["b"]


def test_cache_keys_include_the_model_id() -> None:
    a, b = CountingEmbedder(WordLlamaEmbedder()), CountingEmbedder(WordLlamaEmbedder(dimensions=64))
    ca, cb = CachedEmbedder(a), CachedEmbedder(b)
    ca.embed(["same text"])
    assert cb.embed(["same text"]).shape == (1, 64)
    assert b.batches == [["same text"]]


def test_openai_embedder_against_a_real_llama_cpp_server(embedding_server: LlamaServerHandle) -> None:
    e = OpenAIEmbedder("smollm2", base_url=embedding_server.base_url + "/v1", batch_size=2)
    try:
        assert isinstance(e, Embedder)
        m = e.embed(SENTENCES)  # two requests (batch_size 2), order kept
        assert m.dtype == np.float32
        assert m.shape == (3, e.dimensions)
        assert e.dimensions == 576  # SmolLM2-135M's hidden size
        one = e.embed([SENTENCES[2]])
        assert np.allclose(one[0], m[2], atol=1e-4)
        assert not np.allclose(m[0], m[1], atol=1e-3)
    finally:
        e.close()


def test_openai_embedder_reports_http_errors_as_embedding_errors(
    embedding_server: LlamaServerHandle,
) -> None:
    e = OpenAIEmbedder("smollm2", base_url=embedding_server.base_url + "/no-such-path")
    with pytest.raises(EmbeddingError, match="HTTP 404"):
        e.embed(["x"])
    assert issubclass(EmbeddingError, FoundationAIError)
    refused = OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", timeout=2.0)
    with pytest.raises(EmbeddingError, match="failed"):
        refused.embed(["x"])


def test_llama_cpp_embedder_in_process_on_the_bundled_model() -> None:
    pytest.importorskip("xllamacpp")
    e = LlamaCppEmbedder(None, n_ctx=256)
    assert isinstance(e, Embedder)
    assert e.dimensions == 576
    m = e.embed(SENTENCES[:2])
    assert m.shape == (2, 576) and m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-3)
    assert e.embed([]).shape == (0, 576)


def test_importing_the_library_loads_no_numpy_and_no_embedding_engine() -> None:
    import subprocess
    import sys

    code = (
        "import sys, foundation_ai, foundation_ai.agentic, foundation_ai.memory, foundation_ai.vectors\n"
        "from foundation_ai.memory import MemoryConfig\n"
        "heavy = [m for m in ('numpy', 'wordllama', 'apsw', 'sqlite_vec', 'psycopg') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_empty_string_embeds_to_a_zero_row_not_nan() -> None:
    e = default_embedder()
    m = e.embed(["", "hello world", ""])
    assert m.shape == (3, 256) and m.dtype == np.float32
    assert np.isfinite(m).all()
    assert not m[0].any() and not m[2].any()
    assert np.allclose(m[1], e.embed(["hello world"])[0])
    assert np.linalg.norm(m[1]) == pytest.approx(1.0, abs=1e-4)
    only_empty = WordLlamaEmbedder(dimensions=64).embed(["", ""])
    assert only_empty.shape == (2, 64) and not only_empty.any()


def test_the_empty_string_never_reaches_an_embeddings_server() -> None:
    from tests._fixture_server import Canned, FixtureServer

    answer = {"data": [{"index": 0, "embedding": [0.6, 0.8]}]}
    with FixtureServer() as srv:
        srv.queue(Canned(body=json.dumps(answer).encode(), content_type="application/json"))
        e = OpenAIEmbedder("m", base_url=srv.base_url, dimensions=2)
        try:
            m = e.embed(["", "text", ""])
        finally:
            e.close()
        assert [r.json()["input"] for r in srv.requests] == [["text"]]
    assert m.tolist() == [[0.0, 0.0], [pytest.approx(0.6), pytest.approx(0.8)], [0.0, 0.0]]


def test_an_embeddings_server_answering_nan_is_an_embedding_error() -> None:
    from tests._fixture_server import Canned, FixtureServer

    body = b'{"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [NaN, 1.0]}]}'
    with FixtureServer() as srv:
        srv.queue(Canned(body=body, content_type="application/json"))
        e = OpenAIEmbedder("m", base_url=srv.base_url, dimensions=2)
        try:
            with pytest.raises(EmbeddingError, match="NaN or infinite values for text #1"):
                e.embed(["a", "b"])
        finally:
            e.close()
