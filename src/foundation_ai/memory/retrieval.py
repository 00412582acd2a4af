"""Retrieval over a session: what ``search_context`` and context assembly recall.

:class:`Retriever` keeps every indexed text (messages, observation and reflection entries) in
a keyword index at once and embeds it in the background: texts are queued and a worker thread
embeds them in batches and upserts the vectors into a :class:`~foundation_ai.vectors.VectorStore`,
off the turn's hot path. Modes:

- ``"semantic"``: cosine similarity of the query's embedding (entries not yet embedded are not
  found this way);
- ``"keyword"``: BM25 over lower-cased word tokens (Robertson & Zaragoza, "The Probabilistic
  Relevance Framework: BM25 and Beyond", k1 = 1.2, b = 0.75);
- ``"hybrid"``: reciprocal rank fusion of both (score = sum of 1 / (60 + rank), Cormack et al.
  2009).

See ``docs/memory.md``.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from ..errors import ConfigurationError
from ..vectors import DimensionMismatchError, InMemoryVectorStore, Metric, VectorEntry, VectorMetadata
from .assembly import Recalled

__all__ = ["Retriever", "SearchMode", "bind_store", "tokenize"]

log = logging.getLogger(__name__)

SearchMode = Literal["semantic", "keyword", "hybrid"]
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "which",
        "who",
        "will",
        "with",
        "you",
        "your",
    ]
)
_RRF_K = 60


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without common English stop words."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class KeywordIndex:
    """BM25 over lower-cased word tokens (k1 = 1.2, b = 0.75), scored with numpy: each term's
    postings are arrays, so a query costs a few vector operations per term. Not thread-safe
    (the :class:`Retriever` holds a lock)."""

    K1 = 1.2
    B = 0.75

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.slot: dict[str, int] = {}
        self.lens: list[int] = []
        self.alive: list[bool] = []
        self.postings: dict[str, tuple[list[int], list[int]]] = {}
        self._arrays: dict[str, tuple[Any, Any]] = {}
        self.total_len = 0
        self.count = 0

    def add(self, id_: str, text: str) -> None:
        """Index ``text`` under ``id_`` (replacing an earlier text of that id)."""
        self.remove(id_)
        tf = Counter(tokenize(text))
        s = len(self.ids)
        self.ids.append(id_)
        self.slot[id_] = s
        length = sum(tf.values())
        self.lens.append(length)
        self.alive.append(True)
        self.total_len += length
        self.count += 1
        for term, f in tf.items():
            slots, tfs = self.postings.setdefault(term, ([], []))
            slots.append(s)
            tfs.append(f)
            self._arrays.pop(term, None)

    def remove(self, id_: str) -> None:
        """Forget ``id_`` (its postings stay, masked as dead)."""
        s = self.slot.pop(id_, None)
        if s is None:
            return
        self.alive[s] = False
        self.total_len -= self.lens[s]
        self.count -= 1

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs with a positive score, best first."""
        import numpy as np

        terms = set(tokenize(query))
        if not self.count or not terms or k <= 0:
            return []
        n = len(self.ids)
        alive = np.asarray(self.alive, dtype=bool)
        lens = np.asarray(self.lens, dtype=np.float32)
        avg = (self.total_len / self.count) or 1.0
        norm = self.K1 * (1 - self.B + self.B * lens / avg)
        scores = np.zeros(n, dtype=np.float32)
        for term in terms:
            post = self.postings.get(term)
            if post is None:
                continue
            arrays = self._arrays.get(term)
            if arrays is None:
                arrays = (np.asarray(post[0], dtype=np.int64), np.asarray(post[1], dtype=np.float32))
                self._arrays[term] = arrays
            slots, tfs = arrays
            live = alive[slots]
            df = int(live.sum())
            if not df:
                continue
            idf = math.log(1 + (self.count - df + 0.5) / (df + 0.5))
            scores[slots] += live * (idf * tfs * (self.K1 + 1) / (tfs + norm[slots]))
        hits = np.flatnonzero(scores > 0)
        if hits.size == 0:
            return []
        if hits.size > k:
            hits = hits[np.argpartition(-scores[hits], k - 1)[:k]]
        order = sorted(hits.tolist(), key=lambda i: (-float(scores[i]), self.ids[i]))
        return [(self.ids[i], float(scores[i])) for i in order]


def _check_dimensions(embedder: Any, store: Any) -> None:
    """Raise ``DimensionMismatchError`` naming both lengths when ``store`` has a fixed vector
    length (``dimensions``; ``None`` while a new store is empty) other than ``embedder``'s (for a
    store without ``use_embedder``)."""
    made, held = getattr(embedder, "dimensions", None), getattr(store, "dimensions", None)
    if isinstance(made, int) and isinstance(held, int) and made != held:
        raise DimensionMismatchError(
            f"the embedder {embedder!r} makes {made}-dimension vectors but the vector store "
            f"{store!r} holds {held}-dimension vectors: use a store (or table) of {made} "
            f"dimensions, an embedder of {held}, or MemoryConfig(reindex=True) to switch the store",
            stored=held,
            given=made,
        )


def bind_store(embedder: Any, store: Any, *, reindex: bool = False) -> None:
    """Tie ``store`` to ``embedder`` before anything is written: ``store.use_embedder(model_id,
    dimensions)`` (records them in a new store, checks them in one that recorded an embedder),
    or with ``reindex`` ``store.reindex(...)`` (every stored vector deleted, the store switched
    to this embedder). A store without these methods only has its ``dimensions`` compared.

    Raises:
        DimensionMismatchError, EmbedderMismatchError: the store holds another embedder's vectors.
    """
    model_id = getattr(embedder, "model_id", None)
    use = getattr(store, "reindex" if reindex else "use_embedder", None)
    if use is None or not isinstance(model_id, str):
        _check_dimensions(embedder, store)
        return
    use(model_id, int(embedder.dimensions))


class Retriever:
    """Semantic, keyword and hybrid search over a session's texts.

    Args:
        embedder: an :class:`~foundation_ai.memory.Embedder` (default: ``default_embedder()``).
        store: where vectors go (default: a private ``InMemoryVectorStore``); a shared store is
            filtered by ``session`` label.
        session_id: the label written with every vector (``labels["session"]``).
        batch_size: texts per embedding call.
        reindex: switch the store to this embedder first (every vector in it deleted; see
            :func:`bind_store`).

    Thread-safe. :meth:`close` stops the worker.

    Raises:
        DimensionMismatchError, EmbedderMismatchError: the store was created for another
            embedder (:func:`bind_store`; nothing is written).
    """

    def __init__(
        self,
        embedder: Any = None,
        store: Any = None,
        *,
        session_id: str = "",
        batch_size: int = 64,
        reindex: bool = False,
    ) -> None:
        if embedder is None:
            from .embedders import default_embedder

            embedder = default_embedder()
        self.embedder = embedder
        self._private = store is None
        self.store = store if store is not None else InMemoryVectorStore(Metric.Cosine)
        bind_store(embedder, self.store, reindex=reindex)
        self.session_id = session_id
        self.batch_size = batch_size
        self._texts: dict[str, tuple[str, str]] = {}
        self._keywords = KeywordIndex()
        self._queue: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._busy = False
        self._closed = False
        self._worker: threading.Thread | None = None
        self.errors = 0
        """Embedding batches that failed (logged; their texts stay keyword-searchable)."""
        self._failures: list[tuple[BaseException, int]] = []

    # -- indexing --------------------------------------------------------------------------------

    def add(self, items: Iterable[tuple[str, str, str]]) -> None:
        """Index ``(id, text, kind)`` items: keyword-searchable at once, embedded in the
        background. An id already indexed is replaced."""
        fresh: list[tuple[str, str, str]] = []
        with self._lock:
            for id_, text, kind in items:
                if not text.strip():
                    continue
                self._texts[id_] = (text, kind)
                self._keywords.add(id_, text)
                fresh.append((id_, text, kind))
            if fresh and not self._closed:
                self._queue.extend(fresh)
                if self._worker is None or not self._worker.is_alive():
                    self._worker = threading.Thread(target=self._run, name="foundation-ai-embed", daemon=True)
                    self._worker.start()
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._busy = False
                    self._cond.notify_all()
                    self._cond.wait()
                if self._closed:
                    self._busy = False
                    self._cond.notify_all()
                    return
                batch = self._queue[: self.batch_size]
                del self._queue[: self.batch_size]
                self._busy = True
            try:
                vectors = self.embedder.embed([t for _, t, _ in batch])
                labels = {"session": self.session_id} if self.session_id else {}
                self.store.upsert(
                    VectorEntry(id_, row.tolist(), VectorMetadata(labels={**labels, "kind": kind}))
                    for (id_, _, kind), row in zip(batch, vectors, strict=True)
                )
            except Exception as exc:
                self.errors += 1
                log.warning("could not embed %d texts for retrieval", len(batch), exc_info=True)
                with self._lock:
                    self._failures.append((exc, len(batch)))

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every queued text is embedded; False on timeout."""
        with self._lock:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)

    def take_failures(self) -> list[tuple[BaseException, int]]:
        """The batches that failed to embed or store since the last call: ``(error, texts)``
        (the session reports each as a ``FailedAction`` of kind ``"memory"``)."""
        with self._lock:
            out, self._failures = self._failures, []
        return out

    @property
    def idle(self) -> bool:
        """True when nothing is queued or being embedded."""
        return not self._queue and not self._busy

    @property
    def pending(self) -> int:
        """Texts queued and not yet embedded."""
        return len(self._queue)

    def __len__(self) -> int:
        return len(self._texts)

    def text(self, id_: str) -> tuple[str, str] | None:
        """``(text, kind)`` of an indexed id, or ``None``."""
        return self._texts.get(id_)

    # -- search ----------------------------------------------------------------------------------

    def semantic(self, query: str, k: int, min_score: float = -1.0) -> list[Recalled]:
        """The ``k`` nearest embedded texts by cosine similarity (at least ``min_score``)."""
        vec = self.embedder.embed([query])[0].tolist()
        tags = None if self._private or not self.session_id else {"session": self.session_id}
        out: list[Recalled] = []
        for m in self.store.search(vec, k, tags):
            got = self._texts.get(m.id)
            if got is not None and m.score >= min_score:
                out.append(Recalled(id=m.id, text=got[0], kind=got[1], score=float(m.score)))
        return out

    def keyword(self, query: str, k: int) -> list[Recalled]:
        """The ``k`` best texts by BM25 (only texts sharing a word with the query)."""
        with self._lock:
            best = self._keywords.search(query, k)
            return [
                Recalled(id=i, text=self._texts[i][0], kind=self._texts[i][1], score=sc) for i, sc in best
            ]

    def search(
        self,
        query: str,
        k: int = 5,
        mode: SearchMode = "hybrid",
        *,
        min_score: float = -1.0,
        exclude: Sequence[str] | set[str] = (),
    ) -> list[Recalled]:
        """The ``k`` best matches for ``query``, best first (see the module docstring).

        Args:
            min_score: semantic hits below this cosine similarity are ignored.
            exclude: ids never returned.

        Raises:
            ConfigurationError: an unknown mode.
        """
        if mode not in ("semantic", "keyword", "hybrid"):
            raise ConfigurationError(f"unknown search mode {mode!r}: semantic, keyword or hybrid")
        if k <= 0 or not query.strip():
            return []
        skip = set(exclude)
        wide = k + len(skip)
        if mode == "keyword":
            return [r for r in self.keyword(query, wide) if r.id not in skip][:k]
        sem = [
            r
            for r in self.semantic(query, wide * 2 if mode == "hybrid" else wide, min_score)
            if r.id not in skip
        ]
        if mode == "semantic":
            return sem[:k]
        kw = [r for r in self.keyword(query, wide * 2) if r.id not in skip]
        fused: dict[str, float] = {}
        found: dict[str, Recalled] = {}
        for ranked in (sem, kw):
            for rank, r in enumerate(ranked):
                fused[r.id] = fused.get(r.id, 0.0) + 1.0 / (_RRF_K + rank + 1)
                found.setdefault(r.id, r)
        order = sorted(fused, key=lambda i: (-fused[i], i))[:k]
        return [Recalled(id=i, text=found[i].text, kind=found[i].kind, score=fused[i]) for i in order]

    def close(self) -> None:
        """Stop the worker (queued texts are dropped)."""
        with self._lock:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
        w = self._worker
        if w is not None and w is not threading.current_thread():
            w.join(timeout=5.0)
