"""Vector entries, matches, the store protocol and an exact in-memory store (numpy)."""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from ..errors import FoundationAIError

__all__ = [
    "DimensionMismatchError",
    "InMemoryVectorStore",
    "Metric",
    "VectorEntry",
    "VectorMatch",
    "VectorMetadata",
    "TagFilter",
    "VectorStore",
]


class Metric(enum.Enum):
    """How vectors are compared. See the package docstring for what scores mean."""

    Cosine = "cosine"
    L2 = "l2"
    Dot = "dot"


TagFilter = Iterable[str] | Mapping[str, str]
"""A search filter: tag names that must all be in ``metadata.tags``, or key-value pairs that must
all be in ``metadata.labels``."""


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
        """Insert entries, replacing those with the same id."""
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
        holding every tag name (an iterable of strings) or every key-value label (a mapping)."""
        ...


class DimensionMismatchError(FoundationAIError, ValueError):
    """A vector's length differs from the store's dimension."""


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"k must be an int, got {type(k).__name__}")


def want_filter(tags: TagFilter | None) -> TagFilter | None:
    """``tags`` materialised once (an iterator is read only once), ``None`` when it filters
    nothing."""
    if tags is None:
        return None
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

    Raises:
        DimensionMismatchError: (from upsert/search) a vector of another length.
    """

    def __init__(self, metric: Metric = Metric.Cosine, dimensions: int | None = None) -> None:
        self.metric = metric
        self.dimensions = dimensions
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._meta: list[VectorMetadata] = []
        self._rows: Any = None  # float32 (capacity, dimensions)
        self._norms: Any = None  # float32 (capacity,)
        self._lock = threading.Lock()

    def _check(self, vector: Sequence[float]) -> None:
        if self.dimensions is None:
            self.dimensions = len(vector)
        elif len(vector) != self.dimensions:
            raise DimensionMismatchError(f"vector has {len(vector)} dimensions, store has {self.dimensions}")

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
            for e in batch:
                self._check(e.vector)
            block = np.asarray([e.vector for e in batch], dtype=np.float32).reshape(len(batch), -1)
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

        _check_k(k)
        if k <= 0:
            return []
        self._check(vector)
        want = want_filter(tags)
        q = np.asarray(vector, dtype=np.float32)
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
