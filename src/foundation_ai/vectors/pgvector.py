"""``PgVectorStore``: a :class:`~foundation_ai.vectors.VectorStore` in PostgreSQL with the
pgvector extension (https://github.com/pgvector/pgvector), through psycopg 3.

Table ``<t>`` (default ``vectors``)::

    id text PRIMARY KEY, embedding vector(<dimensions>) NOT NULL,
    tags text[] NOT NULL, labels jsonb NOT NULL, extra jsonb NOT NULL

and ``<t>_meta(key text PRIMARY KEY, value text)`` holding ``embedder`` (the ``model_id`` of the
embedder whose vectors the table holds). Both the column's dimension and the embedder are checked
when the store is opened, before anything is written
(:class:`~foundation_ai.vectors.DimensionMismatchError`,
:class:`~foundation_ai.vectors.EmbedderMismatchError`); :meth:`PgVectorStore.reindex` switches
embedders. The table has an HNSW index on ``embedding`` for the store's metric (``vector_cosine_ops``,
``vector_l2_ops`` or ``vector_ip_ops``) and GIN indexes on ``tags`` and ``labels``. Scores:
cosine similarity = 1 - ``<=>``; L2 distance = ``<->``; dot product = -(``<#>``), as the
pgvector README defines the operators.

An unfiltered search uses the HNSW index (approximate; ``ef_search`` sets its breadth, pgvector's
``hnsw.ef_search``). A filtered search (``tags @> ...`` / ``labels @> ...``) turns index scans
off for its transaction and scores every row that passes the filter exactly, so it returns up to
``k`` matches however selective the filter is (pgvector's HNSW filters after the index scan and
could return fewer). A ``k`` above pgvector's largest ``hnsw.ef_search`` (1000) is searched
exactly the same way, since the index could not return that many. ``index=None`` skips the HNSW
index: every search is exact.

A NaN, an infinity or (cosine) a zero vector is refused with
:class:`~foundation_ai.vectors.InvalidVectorError` before anything is sent (pgvector itself
refuses NaN and infinite values, and ranks a zero vector's undefined cosine distance apart from
real matches); database failures are :class:`~foundation_ai.vectors.VectorStoreError`.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ConfigurationError
from ._store import (
    Metric,
    TagFilter,
    VectorEntry,
    VectorMatch,
    VectorMetadata,
    check_identity,
    check_k,
    checked_rows,
    driver_errors,
    want_filter,
)

__all__ = ["PgVectorStore"]

_TABLE_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,40}$")
_OPS = {Metric.Cosine: "vector_cosine_ops", Metric.L2: "vector_l2_ops", Metric.Dot: "vector_ip_ops"}
_OPERATOR = {Metric.Cosine: "<=>", Metric.L2: "<->", Metric.Dot: "<#>"}
_EF_SEARCH_MAX = 1000
"""pgvector's largest ``hnsw.ef_search``: an HNSW scan returns at most that many rows."""


def _literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def _where(conninfo: Any, table: str) -> str:
    """The server and table, for messages (never the password)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(conninfo) if isinstance(conninfo, str) else {}
    except Exception:
        info = {}
    host = info.get("host") or "localhost"
    port = info.get("port") or "5432"
    db = info.get("dbname") or ""
    return f"postgresql://{host}:{port}/{db} table {table}"


def _score(metric: Metric, distance: float | None) -> float:
    if distance is None or math.isnan(distance):  # cosine of a zero vector: no direction
        return 0.0
    if metric is Metric.Cosine:
        return 1.0 - distance
    if metric is Metric.Dot:
        return -distance
    return distance


def _rank(row: tuple[str, float | None]) -> tuple[bool, float, str]:
    """Sort key of a ``(id, distance)`` row: lowest distance first, then id; a row without a
    distance (a zero vector stored before such vectors were refused: NaN) last."""
    d = row[1]
    undefined = d is None or math.isnan(d)
    return (undefined, 0.0 if undefined else float(d), row[0])  # type: ignore[arg-type]


class PgVectorStore:
    """A vector store in PostgreSQL + pgvector. Thread-safe (one connection behind a lock).

    Args:
        conninfo: a libpq connection string or URL (``postgresql://...``), or an open
            ``psycopg.Connection`` (autocommit is turned on).
        dimensions: the vector length (required: the column type needs it).
        metric: ``Metric.Cosine`` (default), ``Metric.L2`` or ``Metric.Dot``.
        table: the table name (letters, digits, ``_``).
        index: ``"hnsw"`` (default) or ``None`` (exact search only).
        ef_search: HNSW search breadth (pgvector ``hnsw.ef_search``; recall rises with it).
        embedder_id: the ``model_id`` of the embedder whose vectors the table holds: recorded
            when the table has none, checked otherwise (or :meth:`use_embedder` later).

    Raises:
        ConfigurationError: psycopg missing, the server has no ``vector`` extension, or a bad
            table name.
        DimensionMismatchError: the table exists with another dimension than ``dimensions``
            (checked before any write).
        EmbedderMismatchError: the table was written by another embedder than ``embedder_id``.
        VectorStoreError: the server cannot be reached, or (from any method) a statement failed.
        DimensionMismatchError: (from upsert/search) a vector of another length.
        InvalidVectorError: (from upsert/search) a NaN or infinite component, or a zero vector
            with ``Metric.Cosine``; an ``upsert`` that raises stores nothing.
    """

    def __init__(
        self,
        conninfo: Any,
        *,
        dimensions: int,
        metric: Metric = Metric.Cosine,
        table: str = "vectors",
        index: str | None = "hnsw",
        ef_search: int = 100,
        embedder_id: str | None = None,
    ) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise ConfigurationError(
                "PgVectorStore needs psycopg: pip install 'foundation-ai[postgres]'"
            ) from exc
        if not _TABLE_OK.match(table):
            raise ConfigurationError(f"invalid table name {table!r}")
        if index not in ("hnsw", None):
            raise ConfigurationError(f"index must be 'hnsw' or None, got {index!r}")
        self.dimensions = int(dimensions)
        self.metric = metric
        self.table = table
        self.ef_search = int(ef_search)
        self.index = index
        self.embedder_id: str | None = None
        self._lock = threading.RLock()
        self.where = _where(conninfo, table)
        if isinstance(conninfo, psycopg.Connection):
            self._conn = conninfo
            self._conn.autocommit = True
        else:
            with self._errors("connect to"):
                self._conn = psycopg.connect(conninfo, autocommit=True)
        try:
            self._conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            raise ConfigurationError(f"the server has no pgvector extension: {exc}") from exc
        try:
            with self._errors("create"):
                self._setup(index, embedder_id)
                if embedder_id is not None:
                    self._bind(embedder_id, self.dimensions, reindex=False)
        except BaseException:
            if not isinstance(conninfo, psycopg.Connection):
                self._conn.close()
            raise

    def _errors(self, action: str) -> contextlib.AbstractContextManager[None]:
        """psycopg errors as :class:`VectorStoreError` (``action``: what was being done)."""
        return driver_errors("psycopg", f"{action} the vector store ({self.where})", self.where)

    def _column_dimensions(self) -> int | None:
        """The dimension of an existing table's ``embedding`` column (``vector(256)``), or
        ``None`` when the table does not exist yet."""
        row = self._conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attname = 'embedding' AND NOT attisdropped",
            (self.table,),
        ).fetchone()
        if row is None:
            return None
        m = re.search(r"\((\d+)\)", str(row[0]))
        return int(m.group(1)) if m else None

    def _setup(self, index: str | None, embedder_id: str | None) -> None:
        t = self.table
        self._conn.execute(f"CREATE TABLE IF NOT EXISTS {t}_meta (key text PRIMARY KEY, value text NOT NULL)")
        meta = dict(self._conn.execute(f"SELECT key, value FROM {t}_meta").fetchall())
        self.embedder_id = meta.get("embedder")
        # before anything is created or written: the column's length against the one asked for
        check_identity(self.where, self.embedder_id, self._column_dimensions(), embedder_id, self.dimensions)
        self._create(index)

    def _create(self, index: str | None) -> None:
        t, metric = self.table, self.metric
        self._conn.execute(
            f"CREATE TABLE IF NOT EXISTS {t} (id text PRIMARY KEY, embedding vector({self.dimensions}) NOT NULL, "
            "tags text[] NOT NULL DEFAULT '{}', labels jsonb NOT NULL DEFAULT '{}', "
            "extra jsonb NOT NULL DEFAULT '{}')"
        )
        self._conn.execute(f"CREATE INDEX IF NOT EXISTS {t}_tags_idx ON {t} USING gin (tags)")
        self._conn.execute(f"CREATE INDEX IF NOT EXISTS {t}_labels_idx ON {t} USING gin (labels)")
        if index == "hnsw":
            self._conn.execute(
                f"CREATE INDEX IF NOT EXISTS {t}_hnsw_{metric.value} ON {t} "
                f"USING hnsw (embedding {_OPS[metric]})"
            )

    def use_embedder(self, embedder_id: str, dimensions: int) -> None:
        """Bind the table to an embedder before anything is written: record its id when the
        table recorded none, else check it; the dimension must be the column's.

        Raises:
            DimensionMismatchError, EmbedderMismatchError: the table was created for another
                embedder (nothing is changed).
            VectorStoreError: a statement failed.
        """
        with self._lock, self._errors("open"):
            self._bind(embedder_id, dimensions, reindex=False)

    def reindex(self, embedder_id: str, dimensions: int) -> None:
        """Drop every entry and make the table anew for another embedder (its own dimension),
        in one transaction. :func:`foundation_ai.vectors.reindex` also re-embeds the texts.

        Raises:
            VectorStoreError: a statement failed (nothing was changed).
        """
        with self._lock, self._errors("reindex"):
            self._bind(embedder_id, dimensions, reindex=True)

    def _bind(self, embedder_id: str, dimensions: int, *, reindex: bool) -> None:
        t = self.table
        with self._lock:
            if not reindex:
                check_identity(self.where, self.embedder_id, self.dimensions, embedder_id, dimensions)
            with self._conn.transaction():
                if reindex:
                    self._conn.execute(f"DROP TABLE IF EXISTS {t}")
                    self.dimensions = int(dimensions)
                    self._create(self.index)
                self._conn.execute(
                    f"INSERT INTO {t}_meta VALUES ('embedder', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (embedder_id,),
                )
            self.embedder_id = embedder_id

    def upsert(self, entries: Iterable[VectorEntry]) -> None:
        """Insert entries, replacing those with the same id (one transaction; every vector is
        checked before anything is sent)."""
        batch = list(entries)
        if not batch:
            return
        vectors = checked_rows([e.vector for e in batch], [e.id for e in batch], self.dimensions, self.metric)
        rows = []
        for e, vec in zip(batch, vectors, strict=True):
            m = e.metadata
            rows.append(
                (e.id, _literal(vec.tolist()), list(m.tags), json.dumps(m.labels), json.dumps(m.extra))
            )
        t = self.table
        with self._lock, self._errors("write to"), self._conn.transaction(), self._conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {t} (id, embedding, tags, labels, extra) "
                "VALUES (%s, %s::vector, %s, %s::jsonb, %s::jsonb) ON CONFLICT (id) DO UPDATE SET "
                "embedding = EXCLUDED.embedding, tags = EXCLUDED.tags, labels = EXCLUDED.labels, "
                "extra = EXCLUDED.extra",
                rows,
            )

    def get(self, id: str) -> VectorEntry | None:
        """The entry with this id (vector as ``float32`` values), or ``None``."""
        with self._lock, self._errors("read"):
            row = self._conn.execute(
                f"SELECT embedding::text, tags, labels, extra FROM {self.table} WHERE id = %s", (id,)
            ).fetchone()
        if row is None:
            return None
        import numpy as np

        vector = np.asarray(json.loads(row[0]), dtype=np.float32).tolist()
        return VectorEntry(
            id, vector, VectorMetadata(tags=list(row[1]), labels=dict(row[2]), extra=dict(row[3]))
        )

    def delete(self, ids: Iterable[str]) -> int:
        """Delete entries; returns how many existed."""
        wanted = list(ids)
        if not wanted:
            return 0
        with self._lock, self._errors("delete from"):
            cur = self._conn.execute(f"DELETE FROM {self.table} WHERE id = ANY(%s)", (wanted,))
            return int(cur.rowcount)

    def __len__(self) -> int:
        with self._lock, self._errors("read"):
            row = self._conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()
        return int(row[0]) if row else 0

    def search(
        self, vector: Sequence[float], k: int = 10, tags: TagFilter | None = None
    ) -> list[VectorMatch]:
        """The ``k`` best matches, best first; see the module docstring for scores and filters."""
        k = check_k(k)
        if k <= 0:
            return []
        row = checked_rows([vector], None, self.dimensions, self.metric)[0]
        q = _literal(row.tolist())
        # a zero query has no cosine distance to anything (NaN): no index can order by it
        indexed = k <= _EF_SEARCH_MAX and not (self.metric is Metric.Cosine and not row.any())
        want = want_filter(tags)
        op = _OPERATOR[self.metric]
        t = self.table
        with self._lock, self._errors("search"), self._conn.transaction():
            if want is None and indexed:
                self._conn.execute(f"SET LOCAL hnsw.ef_search = {max(self.ef_search, k)}")
                rows = self._conn.execute(  # ORDER BY the distance alone, so the HNSW index applies
                    f"SELECT id, embedding {op} %s::vector AS d FROM {t} ORDER BY d LIMIT %s", (q, k)
                ).fetchall()
                rows.sort(key=_rank)
            elif want is None:  # more than an HNSW scan returns, or a zero query: score every row
                self._conn.execute("SET LOCAL enable_indexscan = off")
                rows = self._conn.execute(
                    f"SELECT id, embedding {op} %s::vector AS d FROM {t} ORDER BY d, id LIMIT %s", (q, k)
                ).fetchall()
            else:
                self._conn.execute("SET LOCAL enable_indexscan = off")
                if isinstance(want, Mapping):
                    cond, arg = "labels @> %s::jsonb", json.dumps(dict(want))
                else:
                    cond, arg = "tags @> %s::text[]", list(want)  # type: ignore[assignment]
                rows = self._conn.execute(
                    f"SELECT id, embedding {op} %s::vector AS d FROM {t} WHERE {cond} ORDER BY d, id LIMIT %s",
                    (q, arg, k),
                ).fetchall()
        return [VectorMatch(i, _score(self.metric, None if d is None else float(d))) for i, d in rows]

    def drop(self) -> None:
        """Drop the table, its indexes and its recorded embedder."""
        with self._lock, self._errors("drop"):
            self._conn.execute(f"DROP TABLE IF EXISTS {self.table}")
            self._conn.execute(f"DROP TABLE IF EXISTS {self.table}_meta")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return (
            f"PgVectorStore(table={self.table!r}, metric={self.metric.value}, dimensions={self.dimensions})"
        )
