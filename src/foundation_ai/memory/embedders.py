"""Text embedders: the :class:`Embedder` protocol and its implementations.

An embedder turns a batch of texts into a ``float32`` matrix of shape ``(len(texts),
dimensions)``, one row per text, in input order. The empty string has no meaning to embed: its
row is all zeros (the model is not asked), so a cosine vector store refuses it and similarity
code can test for it; every other row is finite (a model answering NaN or infinite values
raises :class:`EmbeddingError`). Implementations:

- :class:`WordLlamaEmbedder` (the default, see :func:`default_embedder`): static word
  embeddings whose weights ship inside the ``wordllama`` wheel (256 dimensions, no network,
  microseconds per text). https://github.com/dleemiller/WordLlama
- :class:`LlamaCppEmbedder`: any GGUF model in this process through llama.cpp (mean pooling,
  L2-normalised rows).
- :class:`OpenAIEmbedder`: ``POST {base_url}/embeddings`` of OpenAI and compatible servers
  (llama.cpp's ``llama-server --embeddings``, vLLM, Ollama...).
  https://platform.openai.com/docs/api-reference/embeddings/create
- :class:`CachedEmbedder`: an LRU cache in front of any of them, keyed by (SHA-256 of the text,
  model id).

numpy is imported when an embedder is first used, never by ``import foundation_ai``. See
``docs/memory.md``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import ConfigurationError, FoundationAIError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Matrix = NDArray[np.float32]
else:
    Matrix = Any

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "EmbeddingError",
    "LlamaCppEmbedder",
    "OpenAIEmbedder",
    "WordLlamaEmbedder",
    "default_embedder",
]

KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "all-MiniLM-L6-v2": 384,
    "bge-small-en-v1.5": 384,
}
"""Output dimensions of well-known embedding models (from their model cards)."""


class EmbeddingError(FoundationAIError):
    """An embedder failed: the server refused the request or answered something unusable
    (wrong count of vectors, wrong dimension, not JSON)."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors.

    Attributes:
        model_id: a stable name of the model (cache keys and stored vectors are tied to it).
        dimensions: the length of every vector.
    """

    model_id: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> Matrix:
        """A ``float32`` matrix of shape ``(len(texts), dimensions)``, rows in input order; an
        empty batch gives shape ``(0, dimensions)``; the empty string gives a row of zeros.

        Raises:
            EmbeddingError: the model failed or answered NaN or infinite values.
        """
        ...


def _as_matrix(rows: Any, dimensions: int | None, count: int, who: str) -> Matrix:
    import numpy as np

    if count == 0:
        return np.zeros((0, dimensions or 0), dtype=np.float32)
    m = np.asarray(rows, dtype=np.float32)
    if m.ndim != 2 or m.shape[0] != count:
        raise EmbeddingError(f"{who} returned {m.shape[0] if m.ndim else 0} vectors for {count} texts")
    if dimensions is not None and m.shape[1] != dimensions:
        raise EmbeddingError(f"{who} returned {m.shape[1]} dimensions, expected {dimensions}")
    finite = np.isfinite(m).all(axis=1)
    if not finite.all():
        raise EmbeddingError(
            f"{who} returned NaN or infinite values for text #{int(np.flatnonzero(~finite)[0])}"
        )
    return m


def _without_empty(texts: list[str], embed: Any, dimensions: Any, who: str) -> Matrix:
    """``embed(non-empty texts)`` spread back over all of ``texts``, with a row of zeros for
    every empty string (the model never sees one). ``dimensions()`` gives the width when no
    text is left to embed."""
    import numpy as np

    keep = [i for i, t in enumerate(texts) if t]
    if len(keep) == len(texts):
        return _as_matrix(embed(texts), dimensions(), len(texts), who)
    if not keep:
        return np.zeros((len(texts), dimensions()), dtype=np.float32)
    rows = _as_matrix(embed([texts[i] for i in keep]), dimensions(), len(keep), who)
    out = np.zeros((len(texts), rows.shape[1]), dtype=np.float32)
    out[keep] = rows
    return out


# --------------------------------------------------------------------------------------------
# wordllama (the default)


class WordLlamaEmbedder:
    """Static embeddings from the ``wordllama`` wheel (weights inside the wheel, loaded offline).

    Args:
        dimensions: 64, 128, 256 (default; Matryoshka truncation of the shipped 256-dimension
            weights).

    Rows are L2-normalised, so cosine similarity equals the dot product (the empty string's
    row is all zeros).

    Raises:
        ConfigurationError: ``wordllama`` is not installed (``pip install 'foundation-ai[memory]'``)
            or its files are missing.
    """

    def __init__(self, dimensions: int = 256) -> None:
        if dimensions not in (64, 128, 256):
            raise ConfigurationError(f"wordllama dimensions must be 64, 128 or 256, got {dimensions}")
        self.dimensions = dimensions
        self.model_id = f"wordllama/l2_supercat_{dimensions}"
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    try:
                        import wordllama
                        from wordllama import WordLlama
                    except ImportError as exc:
                        raise ConfigurationError(
                            "the default embedder needs wordllama: pip install 'foundation-ai[memory]'"
                        ) from exc
                    # The wheel ships its tokenizer under ``tokenizers/`` while load() looks in
                    # ``tokenizer/`` of cache_dir first; pointing cache_dir at the package folder
                    # finds both files, and disable_download guarantees no network access.
                    folder = os.path.dirname(wordllama.__file__)
                    try:
                        self._model = WordLlama.load(
                            cache_dir=folder, disable_download=True, trunc_dim=self.dimensions
                        )
                    except Exception as exc:
                        raise ConfigurationError(f"could not load the wordllama weights: {exc}") from exc
        return self._model

    def embed(self, texts: Sequence[str]) -> Matrix:
        """See :meth:`Embedder.embed`."""
        texts = list(texts)
        if not texts:
            return _as_matrix([], self.dimensions, 0, "wordllama")
        return _without_empty(
            texts, lambda ts: self._load().embed(ts, norm=True), lambda: self.dimensions, "wordllama"
        )

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder({self.model_id!r})"


# --------------------------------------------------------------------------------------------
# llama.cpp in process


class LlamaCppEmbedder:
    """Embeddings from a GGUF model in this process (llama.cpp, mean pooling, L2-normalised).

    Args:
        model: a GGUF path, a Hugging Face GGUF id, ``None`` for the bundled SmolLM2 file, or a
            ``LlamaCppModel`` already opened with ``embedding=True``.
        n_ctx: context size when the file is opened here (longer texts are truncated).

    Raises:
        ConfigurationError: xllamacpp is missing, the file does not load, or the given
            model was not opened for embeddings.
    """

    def __init__(self, model: Any = None, *, n_ctx: int = 512) -> None:
        from ..backends._llamacpp import LlamaCppModel, llamacpp

        if isinstance(model, LlamaCppModel):
            if not model.embedding:
                raise ConfigurationError("open the model with llamacpp(..., embedding=True) to embed")
            self._model = model
        else:
            self._model = llamacpp(model, n_ctx=n_ctx, embedding=True)
        self.model_id = f"llamacpp/{self._model.descriptor.name}"
        self.dimensions = int(self._model.dimensions)

    def embed(self, texts: Sequence[str]) -> Matrix:
        """See :meth:`Embedder.embed`."""
        texts = list(texts)
        if not texts:
            return _as_matrix([], self.dimensions, 0, "llama.cpp")
        return _without_empty(texts, self._embed, lambda: self.dimensions, "llama.cpp")

    def _embed(self, texts: list[str]) -> Any:
        try:
            return self._model.embed(texts)
        except FoundationAIError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"llama.cpp failed while embedding: {type(exc).__name__}: {exc}") from exc

    def __repr__(self) -> str:
        return f"LlamaCppEmbedder({self.model_id!r})"


# --------------------------------------------------------------------------------------------
# OpenAI /v1/embeddings and compatible servers


class OpenAIEmbedder:
    """``POST {base_url}/embeddings`` (OpenAI and compatible servers).

    Request ``{"model", "input": [texts], "encoding_format": "float"}`` (plus ``dimensions``
    when given); the answer's ``data[i].embedding`` are put back in input order by their
    ``index``. Batches larger than ``batch_size`` are split into several requests.
    https://platform.openai.com/docs/api-reference/embeddings/create

    Args:
        model: the model name sent to the server.
        base_url: e.g. ``https://api.openai.com/v1`` (default) or ``http://127.0.0.1:8080/v1``.
        api_key: bearer token (default: ``$OPENAI_API_KEY``; none for local servers).
        dimensions: the vector length; ``None`` takes it from :data:`KNOWN_DIMENSIONS` or the
            first answer. Sent as ``dimensions`` only when ``send_dimensions`` is true (the
            text-embedding-3 models can shorten their vectors).
        batch_size: texts per request.
        timeout: seconds per request.

    Raises:
        EmbeddingError: (from ``embed``) an HTTP error, a transport error or a malformed answer.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        dimensions: int | None = None,
        send_dimensions: bool = False,
        batch_size: int = 256,
        timeout: float = 60.0,
    ) -> None:
        import httpx2

        if batch_size < 1:
            raise ConfigurationError("batch_size must be at least 1")
        self.model = model
        self.model_id = f"openai/{model}@{base_url.rstrip('/')}"
        self._dims: int | None = dimensions if dimensions is not None else KNOWN_DIMENSIONS.get(model)
        self._send_dims = send_dimensions and dimensions is not None
        self.batch_size = batch_size
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._url = base_url.rstrip("/") + "/embeddings"
        self._client = httpx2.Client(headers=headers, timeout=timeout, trust_env=False)

    @property
    def dimensions(self) -> int:
        """The vector length (asks the server with a one-text request when not yet known)."""
        if self._dims is None:
            self.embed(["dimension probe"])
        assert self._dims is not None
        return self._dims

    def _request(self, texts: list[str]) -> list[list[float]]:
        import httpx2

        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self._send_dims:
            body["dimensions"] = self._dims
        try:
            resp = self._client.post(self._url, json=body)
        except httpx2.HTTPError as exc:
            raise EmbeddingError(f"embeddings request to {self._url} failed: {exc}") from exc
        if resp.status_code >= 400:
            raise EmbeddingError(f"embeddings request failed: HTTP {resp.status_code}: {resp.text[:300]}")
        try:
            data = resp.json()["data"]
            ordered = sorted(data, key=lambda d: int(d.get("index", 0)))
            rows = [[float(x) for x in d["embedding"]] for d in ordered]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"malformed embeddings answer: {resp.text[:300]}") from exc
        if len(rows) != len(texts):
            raise EmbeddingError(f"the server returned {len(rows)} vectors for {len(texts)} texts")
        return rows

    def embed(self, texts: Sequence[str]) -> Matrix:
        """See :meth:`Embedder.embed`."""
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dims or 0), dtype=np.float32)
        return _without_empty(texts, self._batches, lambda: self.dimensions, "the embeddings server")

    def _batches(self, texts: list[str]) -> list[list[float]]:
        rows: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            rows.extend(self._request(texts[i : i + self.batch_size]))
        if self._dims is None and rows:
            self._dims = len(rows[0])
        return rows

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.model_id!r})"


# --------------------------------------------------------------------------------------------
# LRU cache


class CachedEmbedder:
    """An LRU cache of vectors in front of ``inner``, keyed by (SHA-256 of the text, model id).

    Only the texts not in the cache are sent to ``inner`` (in one batch); a text repeated within
    a batch is embedded once. Thread-safe.

    Args:
        inner: the embedder.
        max_entries: vectors kept (least recently used dropped first).

    Attributes:
        hits, misses: texts answered without and with a call to ``inner``, since creation.
    """

    def __init__(self, inner: Embedder, max_entries: int = 10_000) -> None:
        self.inner = inner
        self.max_entries = max_entries
        self._cache: OrderedDict[tuple[bytes, str], Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed(self, texts: Sequence[str]) -> Matrix:
        """See :meth:`Embedder.embed`."""
        import numpy as np

        texts = list(texts)
        model = self.inner.model_id
        keys = [(hashlib.sha256(t.encode("utf-8")).digest(), model) for t in texts]
        found: dict[tuple[bytes, str], Any] = {}
        with self._lock:
            for k in keys:
                row = self._cache.get(k)
                if row is not None:
                    self._cache.move_to_end(k)
                    found[k] = row
        todo: dict[tuple[bytes, str], str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in found and k not in todo:
                todo[k] = t
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        if todo:
            fresh = self.inner.embed(list(todo.values()))
            with self._lock:
                for k, row in zip(todo, fresh, strict=True):
                    found[k] = row
                    self._cache[k] = row
                    self._cache.move_to_end(k)
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
        if not texts:
            return np.zeros((0, self.inner.dimensions), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def __len__(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, {len(self)} cached)"


_DEFAULT: CachedEmbedder | None = None
_DEFAULT_LOCK = threading.Lock()


def default_embedder() -> CachedEmbedder:
    """The process-wide default embedder: :class:`WordLlamaEmbedder` (256 dimensions) behind a
    :class:`CachedEmbedder`. The weights load on the first ``embed`` (~0.2 s), offline.

    Raises:
        ConfigurationError: (on first ``embed``) ``wordllama`` is not installed.
    """
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = CachedEmbedder(WordLlamaEmbedder())
        return _DEFAULT
