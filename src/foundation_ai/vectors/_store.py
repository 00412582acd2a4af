"""Vector entries, matches, the store protocol and an exact in-memory store (numpy)."""

from __future__ import annotations

import contextlib
import enum
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from ..errors import FoundationAIError

__all__ = [
    "DimensionMismatchError",
    "EmbedderMismatchError",
    "InMemoryVectorStore",
    "InvalidVectorError",
    "Metric",
    "VectorEntry",
    "VectorMatch",
    "VectorMetadata",
    "TagFilter",
    "VectorStore",
    "VectorStoreError",
    "reindex",
]

MAX_K = 2**31 - 1
"""The largest ``k`` a search asks its engine for (a larger ``k`` means "every match")."""


class Metric(enum.Enum):
    """How vectors are compared. See the package docstring for what scores mean."""

    Cosine = "cosine"
    L2 = "l2"
    Dot = "dot"


TagFilter = Iterable[str] | Mapping[str, str]
"""A search filter: tag names that must all be in ``metadata.tags`` (one ``str`` is one tag name,
never its letters), or key-value pairs that must all be in ``metadata.labels``."""


class VectorMetadata(msgspec.Struct, omit_defaults=True):
    """Metadata of an entry (docs/concepts.md: Vectors).

    ``tags`` are plain tag names and ``labels`` key-value tags (a
    ``dict[str, str]``); both are used by search filters. ``extra`` holds free-form
    fields that are stored but never filtered on.
    """

    tags: list[str] = msgspec.field(default_factory=list)
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    labels: dict[str, str] = msgspec.field(default_factory=dict)

    def matches(self, tags: TagFilter | None) -> bool:
        """True when this metadata passes the filter (``None`` or empty passes everything)."""
        if not tags:
            return True
        if isinstance(tags, Mapping):
            return all(self.labels.get(k) == v for k, v in tags.items())
        if isinstance(tags, str):  # one tag name
            return tags in self.tags
        return set(tags).issubset(self.tags)


class VectorEntry(msgspec.Struct, omit_defaults=True):
    """One stored vector: ``id``, ``vector`` (floats) and ``metadata``."""

    id: str
    vector: list[float]
    metadata: VectorMetadata = msgspec.field(default_factory=VectorMetadata)


class VectorMatch(msgspec.Struct, frozen=True):
    """A search hit: the entry ``id`` and its ``score`` (meaning per :class:`Metric`)."""

    id: str
    score: float


@runtime_checkable
class VectorStore(Protocol):
    """A store of vectors searchable by similarity."""

    def upsert(self, entries: Iterable[VectorEntry]) -> None:
        """Insert entries, replacing those with the same id. Every vector is checked first: a
        batch with one bad vector raises :class:`DimensionMismatchError` or
        :class:`InvalidVectorError` and stores nothing."""
        ...

    def get(self, id: str) -> VectorEntry | None:
        """The entry with this id, or ``None``."""
        ...

    def delete(self, ids: Iterable[str]) -> int:
        """Delete entries; returns how many existed."""
        ...

    def search(
        self, vector: Sequence[float], k: int = 10, tags: TagFilter | None = None
    ) -> list[VectorMatch]:
        """The ``k`` best matches, best first; with ``tags``, only entries that pass the filter:
        holding every tag name (an iterable of strings) or every key-value label (a mapping).
        ``k <= 0`` finds nothing; any larger ``k`` is allowed (every match).

        Raises:
            DimensionMismatchError, InvalidVectorError: the query vector, as for ``upsert``.
            TypeError: ``k`` is not an ``int``.
        """
        ...


class InvalidVectorError(FoundationAIError, ValueError):
    """A vector no store can keep or search, refused before anything is written:

    - a NaN or infinite component, counted after conversion to ``float32`` (every store keeps
      ``float32``, so ``1e39`` is infinite there);
    - with ``Metric.Cosine``, a stored vector without direction (all zeros, or so small that
      its ``float32`` norm is zero): its cosine similarity is undefined (0/0), so it could not be
      ranked against real matches. ``Metric.L2`` and ``Metric.Dot`` accept it. (A zero *query*
      is allowed: it has no preference, every match scores 0.0 and comes in id order.)

    See ``docs/memory.md`` (Vector stores).

    Attributes:
        id: the entry's id, ``""`` for a query vector.
    """

    def __init__(self, message: str, *, id: str = "") -> None:
        super().__init__(message)
        self.id = id


class DimensionMismatchError(InvalidVectorError):
    """A vector's length differs from the store's dimension; or, when a store is opened, the
    embedder it is opened for makes vectors of another length than the store was created for
    (raised before anything is written; the message names both embedders and both lengths).

    Attributes:
        id: the entry's id (``""`` for a query vector or a store being opened).
        stored: the store's dimension, when known.
        given: the other length (the vector's, or the embedder's).
    """

    def __init__(
        self, message: str, *, id: str = "", stored: int | None = None, given: int | None = None
    ) -> None:
        super().__init__(message, id=id)
        self.stored = stored
        self.given = given


class EmbedderMismatchError(FoundationAIError, ValueError):
    """A vector store is opened for another embedder than the one that wrote it, with the same
    dimension (two models' vectors in one index would rank nonsense). Raised when the store is
    opened or bound (``use_embedder``), before anything is written; switch embedders with
    :func:`foundation_ai.vectors.reindex` (``docs/memory.md``, "Vector stores").

    Attributes:
        stored: the embedder id the store recorded at creation.
        given: the embedder id it was opened with.
        dimensions: the (equal) vector length.
        where: the store's file or table.
    """

    def __init__(self, message: str, *, stored: str, given: str, dimensions: int | None, where: str) -> None:
        super().__init__(message)
        self.stored = stored
        self.given = given
        self.dimensions = dimensions
        self.where = where


def check_identity(
    where: str,
    stored_id: str | None,
    stored_dims: int | None,
    given_id: str | None,
    given_dims: int | None,
) -> None:
    """Compare what a store recorded at creation (``stored_*``, ``None``: not recorded) with the
    embedder it is opened for (``given_*``, ``None``: not said).

    Raises:
        DimensionMismatchError: both lengths known and different (checked first).
        EmbedderMismatchError: both ids known and different.
    """

    def name(eid: str | None, dims: int | None) -> str:
        who = f"embedder {eid!r}" if eid else "an unnamed embedder"
        return f"{who} ({dims} dimensions)" if dims is not None else who

    fix = (
        "open it with the embedder that wrote it, use another store (or table), or switch the "
        "store to the new embedder with foundation_ai.vectors.reindex (docs/memory.md)"
    )
    if stored_dims is not None and given_dims is not None and stored_dims != given_dims:
        raise DimensionMismatchError(
            f"the vector store {where} was created for {name(stored_id, stored_dims)} but is opened "
            f"for {name(given_id, given_dims)}: {fix}",
            stored=stored_dims,
            given=given_dims,
        )
    if stored_id and given_id and stored_id != given_id:
        raise EmbedderMismatchError(
            f"the vector store {where} was created for {name(stored_id, stored_dims)} but is opened "
            f"for {name(given_id, given_dims)}: the same length, another model (their vectors "
            f"cannot be compared): {fix}",
            stored=stored_id,
            given=given_id,
            dimensions=stored_dims,
            where=where,
        )


class VectorStoreError(FoundationAIError):
    """The store's database could not be opened, read or written (a path that is a directory
    or not a database, a server that cannot be reached, a lock held too long, a full disk).
    A failed ``upsert`` wrote nothing.

    Attributes:
        where: the file path or the table the store uses.
    """

    def __init__(self, message: str, *, where: str = "") -> None:
        super().__init__(message)
        self.where = where


@contextlib.contextmanager
def driver_errors(driver: str, what: str, where: str) -> Iterator[None]:
    """Raise the database driver's errors (``<driver>.Error``: ``apsw``, ``psycopg``) inside the
    block as :class:`VectorStoreError` with the message ``f"cannot {what}: {type}: {error}"``;
    every other exception passes unchanged. The driver is looked up in ``sys.modules``, so it
    is never imported here."""
    try:
        yield
    except Exception as exc:
        module = sys.modules.get(driver)
        if module is None or not isinstance(exc, module.Error):
            raise
        raise VectorStoreError(f"cannot {what}: {type(exc).__name__}: {exc}", where=where) from exc


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"k must be an int, got {type(k).__name__}")


def check_k(k: int) -> int:
    """``k`` as the engine should see it: at most :data:`MAX_K` (``k <= 0`` is left to callers).

    Raises:
        TypeError: ``k`` is not an ``int``.
    """
    _check_k(k)
    return min(k, MAX_K)


def _numbers(vector: Any) -> bool:
    """True when every component of ``vector`` converts to a float (text does not count)."""
    try:
        for x in vector:
            if isinstance(x, str | bytes):
                return False
            float(x)
    except (TypeError, ValueError):
        return False
    return True


def checked_rows(
    vectors: Sequence[Sequence[float]], ids: Sequence[str] | None, dimensions: int, metric: Metric
) -> Any:
    """``vectors`` as one ``float32`` numpy matrix ``(len(vectors), dimensions)``, every row
    checked (``ids`` name them in errors; ``None``: one query vector, which may be zero).

    Raises:
        DimensionMismatchError: a row of another length.
        InvalidVectorError: a NaN or infinite component, or a zero vector to store with
            ``Metric.Cosine``.
    """
    import numpy as np

    def who(i: int) -> str:
        return "the query vector" if ids is None else f"vector {ids[i]!r}"

    def ident(i: int) -> str:
        return "" if ids is None else ids[i]

    for i, v in enumerate(vectors):
        if len(v) != dimensions:
            raise DimensionMismatchError(
                f"{who(i)} has {len(v)} dimensions, store has {dimensions}", id=ident(i)
            )
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            rows = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), dimensions)
        except (TypeError, ValueError):
            bad = next((i for i, v in enumerate(vectors) if not _numbers(v)), 0)
            raise InvalidVectorError(f"{who(bad)} is not a sequence of numbers", id=ident(bad)) from None
        finite = np.isfinite(rows).all(axis=1)
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise InvalidVectorError(
                f"{who(i)} has a NaN or infinite component (as float32); no store can rank it",
                id=ident(i),
            )
        if metric is Metric.Cosine and ids is not None:
            flat = ~(np.einsum("ij,ij->i", rows, rows) > 0)
            if flat.any():
                i = int(np.flatnonzero(flat)[0])
                raise InvalidVectorError(
                    f"{who(i)} is a zero vector: it has no direction, so its cosine similarity is "
                    "undefined and it cannot be ranked (leave it out, or use Metric.L2 or Metric.Dot)",
                    id=ident(i),
                )
    return rows


def want_filter(tags: TagFilter | None) -> TagFilter | None:
    """``tags`` materialised once (an iterator is read only once; one ``str`` is one tag name),
    ``None`` when it filters nothing."""
    if tags is None:
        return None
    if isinstance(tags, str):
        return [tags] if tags else None
    want: TagFilter = dict(tags) if isinstance(tags, Mapping) else list(tags)
    return want or None


class InMemoryVectorStore:
    """An exact (brute-force) :class:`VectorStore` in memory (numpy), thread-safe.

    Vectors are held as rows of one ``float32`` matrix (as sqlite-vec and pgvector store them),
    so :meth:`get` returns them rounded to ``float32``; a search is one matrix-vector product.
    numpy is imported on first use.

    Args:
        metric: how to score (default cosine).
        dimensions: fixed vector length; taken from the first entry when ``None``.
        embedder_id: the ``model_id`` of the embedder whose vectors it holds (or
            :meth:`use_embedder` later); ``None``: not recorded.

    Raises:
        DimensionMismatchError: (from upsert/search) a vector of another length.
        InvalidVectorError: (from upsert/search) a NaN or infinite component, or a zero vector
            with ``Metric.Cosine``; an ``upsert`` that raises stores nothing.
    """

    def __init__(
        self, metric: Metric = Metric.Cosine, dimensions: int | None = None, *, embedder_id: str | None = None
    ) -> None:
        self.metric = metric
        self.dimensions = dimensions
        self.embedder_id = embedder_id
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._meta: list[VectorMetadata] = []
        self._rows: Any = None  # float32 (capacity, dimensions)
        self._norms: Any = None  # float32 (capacity,)
        self._lock = threading.Lock()

    def _dims(self, first: Sequence[float]) -> int:
        """The store's dimension, taken from ``first`` when not yet fixed."""
        if self.dimensions is None:
            self.dimensions = len(first)
        return self.dimensions

    def _grow(self, need: int) -> None:
        import numpy as np

        cap = 0 if self._rows is None else self._rows.shape[0]
        if need <= cap:
            return
        new_cap = max(need, cap * 2, 64)
        rows = np.zeros((new_cap, self.dimensions or 0), dtype=np.float32)
        norms = np.zeros(new_cap, dtype=np.float32)
        if self._rows is not None:
            rows[:cap] = self._rows
            norms[:cap] = self._norms
        self._rows, self._norms = rows, norms

    def upsert(self, entries: Iterable[VectorEntry]) -> None:
        import numpy as np

        batch = list(entries)
        if not batch:
            return
        with self._lock:
            dims = self._dims(batch[0].vector)
            block = checked_rows([e.vector for e in batch], [e.id for e in batch], dims, self.metric)
            slots: list[int] = []
            for e in batch:
                i = self._pos.get(e.id)
                if i is None:
                    i = len(self._ids)
                    self._ids.append(e.id)
                    self._meta.append(e.metadata)
                    self._pos[e.id] = i
                else:
                    self._meta[i] = e.metadata
                slots.append(i)
            self._grow(len(self._ids))
            where = np.asarray(slots, dtype=np.int64)
            self._rows[where] = block  # a repeated id: the last one wins, as in order
            wide = block.astype(np.float64)
            self._norms[where] = np.sqrt(np.einsum("ij,ij->i", wide, wide))

    def use_embedder(self, embedder_id: str, dimensions: int) -> None:
        """Bind the store to an embedder: record its id and dimension when the store has none,
        else check them (see :func:`check_identity`).

        Raises:
            DimensionMismatchError, EmbedderMismatchError: the store holds another embedder's
                vectors (nothing is changed).
        """
        with self._lock:
            check_identity("in memory", self.embedder_id, self.dimensions, embedder_id, dimensions)
            self.embedder_id = embedder_id
            self.dimensions = dimensions

    def reindex(self, embedder_id: str, dimensions: int) -> None:
        """Forget every entry and bind the store to another embedder (see
        :func:`foundation_ai.vectors.reindex`, which also re-embeds the texts)."""
        with self._lock:
            self._ids, self._pos, self._meta = [], {}, []
            self._rows = self._norms = None
            self.embedder_id, self.dimensions = embedder_id, dimensions

    def get(self, id: str) -> VectorEntry | None:
        with self._lock:
            i = self._pos.get(id)
            if i is None:
                return None
            return VectorEntry(id, [float(x) for x in self._rows[i]], self._meta[i])

    def delete(self, ids: Iterable[str]) -> int:
        count = 0
        with self._lock:
            for id_ in ids:
                i = self._pos.pop(id_, None)
                if i is None:
                    continue
                count += 1
                last = len(self._ids) - 1
                if i != last:  # move the last row into the hole
                    moved = self._ids[last]
                    self._ids[i] = moved
                    self._meta[i] = self._meta[last]
                    self._rows[i] = self._rows[last]
                    self._norms[i] = self._norms[last]
                    self._pos[moved] = i
                self._ids.pop()
                self._meta.pop()
        return count

    def __len__(self) -> int:
        return len(self._ids)

    def _scores(self, q: Any, n: int) -> Any:
        """Higher-is-better scores of the first ``n`` rows (L2: negated distances)."""
        import numpy as np

        rows = self._rows[:n]
        # einsum, not ``rows @ q``: a matrix-vector product is memory-bound, and BLAS spreads it
        # over threads that spin for a core when the machine is busy (10x slower under load)
        if self.metric is Metric.Dot:
            return np.einsum("ij,j->i", rows, q)
        if self.metric is Metric.Cosine:
            qn = float(np.sqrt(np.dot(q.astype(np.float64), q.astype(np.float64))))
            denom = self._norms[:n] * qn
            dots = np.einsum("ij,j->i", rows, q)
            out = np.zeros(n, dtype=np.float32)
            np.divide(dots, denom, out=out, where=denom > 0)
            return out
        out = np.empty(n, dtype=np.float32)
        for s in range(0, n, 8192):  # exact differences, bounded memory
            diff = rows[s : s + 8192] - q
            out[s : s + 8192] = -np.sqrt(np.einsum("ij,ij->i", diff, diff))
        return out

    def search(
        self, vector: Sequence[float], k: int = 10, tags: TagFilter | None = None
    ) -> list[VectorMatch]:
        import numpy as np

        k = check_k(k)
        if k <= 0:
            return []
        q = checked_rows([vector], None, self._dims(vector), self.metric)[0]
        want = want_filter(tags)
        with self._lock:
            n = len(self._ids)
            if n == 0:
                return []
            scores = self._scores(q, n)
            ids = self._ids
            meta = self._meta
            sign = -1.0 if self.metric is Metric.L2 else 1.0
            if want is None:
                top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
                order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), ids[i]))
                return [VectorMatch(ids[i], sign * float(scores[i])) for i in order]
            out: list[VectorMatch] = []
            for i in np.argsort(-scores, kind="stable").tolist():
                if meta[i].matches(want):
                    out.append(VectorMatch(ids[i], sign * float(scores[i])))
                    if len(out) == k:
                        break
            return out


def reindex(
    store: Any,
    embedder: Any,
    items: Iterable[tuple[str, str, VectorMetadata | None]],
    *,
    batch_size: int = 64,
) -> int:
    """Switch ``store`` to another embedder: every entry is deleted, the store records
    ``embedder.model_id`` and ``embedder.dimensions`` (its own dimension, which may differ from the
    old one) and ``items`` (``(id, text, metadata or None)``) are embedded with ``embedder`` in
    batches of ``batch_size`` and upserted. This is the documented way to change a store's
    embedder (``docs/memory.md``, "Vector stores"): opening a store with another embedder raises
    :class:`DimensionMismatchError` or :class:`EmbedderMismatchError` instead. Returns how many
    entries were written.

    Args:
        store: a store with ``reindex(embedder_id, dimensions)`` (all three stores here).
        embedder: an ``Embedder`` (``model_id``, ``dimensions``, ``embed(texts)``).

    Raises:
        TypeError: ``store`` has no ``reindex``.
        VectorStoreError: the database failed; InvalidVectorError: an embedding cannot be stored
            (e.g. the empty text under ``Metric.Cosine``: leave empty texts out).
    """
    switch = getattr(store, "reindex", None)
    if switch is None:
        raise TypeError(f"{type(store).__name__} cannot be reindexed (it has no reindex method)")
    switch(embedder.model_id, int(embedder.dimensions))
    written = 0
    batch: list[tuple[str, str, VectorMetadata | None]] = []

    def put() -> int:
        rows = embedder.embed([text for _, text, _ in batch])
        store.upsert(
            VectorEntry(i, [float(x) for x in row], meta or VectorMetadata())
            for (i, _, meta), row in zip(batch, rows, strict=True)
        )
        n = len(batch)
        batch.clear()
        return n

    for item in items:
        batch.append(item)
        if len(batch) >= batch_size:
            written += put()
    if batch:
        written += put()
    return written
