"""Vector types (docs/concepts.md: Vectors).

- :class:`VectorEntry`: ``id``, ``vector`` (floats), ``metadata`` (``tags``, key-value
  ``labels``, free ``extra`` fields).
- :class:`VectorMatch`: ``id`` and ``score``. What the score means depends on the metric:

  | metric | score | better |
  |---|---|---|
  | ``Metric.Cosine`` | cosine similarity, -1.0 to 1.0 | higher |
  | ``Metric.Dot`` | dot product, unbounded | higher |
  | ``Metric.L2`` | Euclidean distance, >= 0.0 | lower |

  ``search`` always returns the best match first. "Higher = more similar" holds for
  cosine and dot product; for L2 the score is the distance itself (0..inf), so lower is more
  similar.
- :class:`VectorStore`: the protocol (upsert, get, delete, search by vector with ``k`` and a tag
  filter: tag names or key-value labels). Implementations:

  - :class:`InMemoryVectorStore`: exact (brute-force, numpy) in memory;
  - :class:`SqliteVecStore`: an SQLite file with the sqlite-vec extension (through apsw), the
    embedded default;
  - :class:`PgVectorStore`: PostgreSQL with pgvector (HNSW index), for many machines.

  One contract holds for all three (see ``docs/memory.md``): a vector with a NaN or infinite
  component, or a zero vector under ``Metric.Cosine``, is refused with
  :class:`InvalidVectorError` (a ``ValueError``; :class:`DimensionMismatchError` is one too)
  before anything is written; a database that cannot be opened or fails is
  :class:`VectorStoreError`; any ``k`` is accepted.

  Every store records the embedder it holds vectors of (``embedder_id``, its ``model_id``, and
  the dimension) when it is created or first bound (``use_embedder``), and checks both whenever
  it is opened or bound again, before anything is written: another dimension raises
  :class:`DimensionMismatchError`, another embedder of the same dimension
  :class:`EmbedderMismatchError`, each naming both embedders. :func:`reindex` is the way to
  switch a store to another embedder.
"""

from __future__ import annotations

from ._store import (
    DimensionMismatchError,
    EmbedderMismatchError,
    InMemoryVectorStore,
    InvalidVectorError,
    Metric,
    TagFilter,
    VectorEntry,
    VectorMatch,
    VectorMetadata,
    VectorStore,
    VectorStoreError,
    reindex,
)
from .pgvector import PgVectorStore
from .sqlite_vec import SqliteVecStore, default_vector_path

__all__ = [
    "DimensionMismatchError",
    "EmbedderMismatchError",
    "InMemoryVectorStore",
    "InvalidVectorError",
    "Metric",
    "PgVectorStore",
    "SqliteVecStore",
    "TagFilter",
    "VectorEntry",
    "VectorMatch",
    "VectorMetadata",
    "VectorStore",
    "VectorStoreError",
    "default_vector_path",
    "reindex",
]
