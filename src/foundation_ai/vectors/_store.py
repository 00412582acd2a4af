"""Vector entries, matches, the store protocol and an exact in-memory store."""

from __future__ import annotations

import enum
import heapq
import math
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


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


class InMemoryVectorStore:
    """An exact (brute-force) :class:`VectorStore` in memory, thread-safe.

    Args:
        metric: how to score (default cosine).
        dimensions: fixed vector length; taken from the first entry when ``None``.

    Raises:
        DimensionMismatchError: (from upsert/search) a vector of another length.
    """

    def __init__(self, metric: Metric = Metric.Cosine, dimensions: int | None = None) -> None:
        self.metric = metric
        self.dimensions = dimensions
        self._entries: dict[str, tuple[VectorEntry, float]] = {}
        self._lock = threading.Lock()

    def _check(self, vector: Sequence[float]) -> None:
        if self.dimensions is None:
            self.dimensions = len(vector)
        elif len(vector) != self.dimensions:
            raise DimensionMismatchError(f"vector has {len(vector)} dimensions, store has {self.dimensions}")

    def upsert(self, entries: Iterable[VectorEntry]) -> None:
        with self._lock:
            for e in entries:
                self._check(e.vector)
                self._entries[e.id] = (e, math.sqrt(_dot(e.vector, e.vector)))

    def get(self, id: str) -> VectorEntry | None:
        found = self._entries.get(id)
        return found[0] if found else None

    def delete(self, ids: Iterable[str]) -> int:
        with self._lock:
            return sum(1 for i in ids if self._entries.pop(i, None) is not None)

    def __len__(self) -> int:
        return len(self._entries)

    def search(
        self, vector: Sequence[float], k: int = 10, tags: TagFilter | None = None
    ) -> list[VectorMatch]:
        if k <= 0:
            return []
        self._check(vector)
        want: TagFilter | None = dict(tags) if isinstance(tags, Mapping) else list(tags or ())
        qnorm = math.sqrt(_dot(vector, vector))
        with self._lock:
            items = list(self._entries.values())
        scored: list[tuple[float, str]] = []
        for entry, norm in items:
            if not entry.metadata.matches(want):
                continue
            if self.metric is Metric.L2:
                d = math.sqrt(math.fsum((x - y) ** 2 for x, y in zip(vector, entry.vector, strict=True)))
                scored.append((-d, entry.id))
            elif self.metric is Metric.Dot:
                scored.append((_dot(vector, entry.vector), entry.id))
            else:
                denom = qnorm * norm
                scored.append((_dot(vector, entry.vector) / denom if denom else 0.0, entry.id))
        best = heapq.nlargest(k, scored)
        sign = -1.0 if self.metric is Metric.L2 else 1.0
        return [VectorMatch(i, sign * s) for s, i in best]
