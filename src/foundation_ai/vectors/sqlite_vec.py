"""``SqliteVecStore``: a :class:`~foundation_ai.vectors.VectorStore` in an SQLite file, searched
with the sqlite-vec extension (https://alexgarcia.xyz/sqlite-vec/).

The extension is loaded through ``apsw`` (which bundles its own SQLite and can load
extensions) because many Python builds, including macOS's system Python and some pyenv builds,
ship an ``sqlite3`` module without ``enable_load_extension``.

Schema (``<t>`` is the table prefix, default ``vectors``):

- ``<t>_items(rowid INTEGER PRIMARY KEY, id TEXT UNIQUE, metadata TEXT)``: the entry id and its
  metadata as JSON;
- ``<t>_vec``: a ``vec0`` virtual table, ``embedding float[<dimensions>]`` with the store's
  distance metric, keyed by the same ``rowid``;
- ``<t>_tags(tag, rowid)`` and ``<t>_labels(key, value, rowid)``: what filters read (each also
  indexed by ``rowid``, for deletes);
- ``<t>_meta(key, value)``: ``dimensions``, ``metric`` and ``embedder`` (the ``model_id`` of
  the embedder whose vectors it holds) of the store, recorded at creation and checked at every
  open (:class:`~foundation_ai.vectors.DimensionMismatchError`,
  :class:`~foundation_ai.vectors.EmbedderMismatchError`; ``reindex`` switches embedders).

A search without a filter is a ``vec0`` k-nearest-neighbour query (exact; sqlite-vec has no
approximate index); with a filter it scores only the rows that pass it
(``vec_distance_cosine`` / ``vec_distance_l2``), so a filtered search always returns up to
``k`` matches. A ``k`` above sqlite-vec's k-nearest-neighbour limit (4096) scores every row the
same exact way. Metrics: ``Metric.Cosine`` and ``Metric.L2`` (sqlite-vec has no dot-product
distance). Vectors are stored as ``float32``; a NaN, an infinity or (cosine) a zero vector is
refused with :class:`~foundation_ai.vectors.InvalidVectorError` before anything is written, and
database failures are :class:`~foundation_ai.vectors.VectorStoreError`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from .._private import private_file
from ..errors import ConfigurationError
from ._store import (
    DimensionMismatchError,
    Metric,
    TagFilter,
    VectorEntry,
    VectorMatch,
    VectorMetadata,
    VectorStoreError,
    check_identity,
    check_k,
    checked_rows,
    driver_errors,
    want_filter,
)

__all__ = ["SqliteVecStore", "default_vector_path"]

log = logging.getLogger(__name__)

_TABLE_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,40}$")
_SQL_METRIC = {Metric.Cosine: "cosine", Metric.L2: "l2"}
_DISTANCE_FN = {Metric.Cosine: "vec_distance_cosine", Metric.L2: "vec_distance_l2"}
_KNN_MAX = 4096
"""The largest ``k`` of a sqlite-vec ``vec0`` k-nearest-neighbour query."""
HOME_ENV = "FOUNDATION_AI_HOME"
"""The variable naming the folder of the session store and of this file (``docs/memory.md``)."""


def default_vector_path() -> Path:
    """``vectors.sqlite3`` beside the default session store: ``$FOUNDATION_AI_HOME/vectors.sqlite3``
    when ``FOUNDATION_AI_HOME`` is set, else ``<user data dir>/foundation-ai/vectors.sqlite3``
    (``platformdirs.user_data_dir``). See ``docs/memory.md``."""
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home) / "vectors.sqlite3"
    import platformdirs

    return Path(platformdirs.user_data_dir("foundation-ai", appauthor=False)) / "vectors.sqlite3"


def _open(path: str) -> Any:
    try:
        import apsw
        import sqlite_vec
    except ImportError as exc:
        raise ConfigurationError(
            "SqliteVecStore needs apsw and sqlite-vec: pip install 'foundation-ai[memory]'"
        ) from exc
    conn = apsw.Connection(path)
    try:
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        conn.setbusytimeout(5000)
    except BaseException:
        conn.close()
        raise
    return conn


class SqliteVecStore:
    """A vector store in an SQLite file (sqlite-vec through apsw). Thread-safe.

    Args:
        path: the database file (created with its parent folders); ``":memory:"`` works;
            default :func:`default_vector_path`.
        dimensions: vector length; ``None`` reads it from an existing table or takes it from
            the first upserted entry.
        metric: ``Metric.Cosine`` (default) or ``Metric.L2``; an existing table keeps its own.
        table: the table prefix (letters, digits, ``_``), so several stores share one file.
        embedder_id: the ``model_id`` of the embedder whose vectors the store holds: recorded
            when the store has none, checked otherwise (or :meth:`use_embedder` later).

    Raises:
        ConfigurationError: apsw/sqlite-vec missing, ``Metric.Dot``, a bad table name, or an
            existing table with another metric.
        DimensionMismatchError: an existing table of another dimension than ``dimensions``.
        EmbedderMismatchError: an existing table written by another embedder than
            ``embedder_id``.
        VectorStoreError: the file cannot be opened or is not a database (a directory, no
            permission), or (from any method) the database failed.
        DimensionMismatchError: (from upsert/search) a vector of another length.
        InvalidVectorError: (from upsert/search) a NaN or infinite component, or a zero vector
            with ``Metric.Cosine``; an ``upsert`` that raises stores nothing.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        dimensions: int | None = None,
        metric: Metric = Metric.Cosine,
        table: str = "vectors",
        embedder_id: str | None = None,
    ) -> None:
        if metric not in _SQL_METRIC:
            raise ConfigurationError("sqlite-vec supports Metric.Cosine and Metric.L2, not Metric.Dot")
        if not _TABLE_OK.match(table):
            raise ConfigurationError(f"invalid table name {table!r}")
        p = default_vector_path() if path is None else path
        self.path = str(p)
        self.table = table
        self.metric = metric
        self.dimensions: int | None = None
        self.embedder_id: str | None = None
        self._lock = threading.RLock()
        if self.path != ":memory:":
            if Path(p).is_dir():
                raise VectorStoreError(
                    f"the vector store path {self.path!r} is a folder: give a file path "
                    "(e.g. <folder>/vectors.sqlite3)",
                    where=self.path,
                )
            try:
                private_file(p)  # 0600 in a 0700 folder when made here (SQLite's -wal/-shm follow)
            except OSError as exc:
                raise VectorStoreError(
                    f"cannot create the folder of the vector store {self.path!r}: {exc}", where=self.path
                ) from None
        with self._errors("open"):
            self._conn = _open(self.path)
        try:
            with self._errors("open"):
                self._setup(dimensions, metric, embedder_id)
                if embedder_id is not None:
                    self._bind(embedder_id, dimensions, reindex=False)
        except BaseException:
            self._conn.close()
            raise

    def _errors(self, action: str) -> contextlib.AbstractContextManager[None]:
        """apsw errors as :class:`VectorStoreError` (``action``: what was being done)."""
        return driver_errors(
            "apsw", f"{action} the vector store {self.path!r} (table {self.table!r})", self.path
        )

    def _setup(self, dimensions: int | None, metric: Metric, embedder_id: str | None) -> None:
        t = self.table
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            f"CREATE TABLE IF NOT EXISTS {t}_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            f"CREATE TABLE IF NOT EXISTS {t}_items (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,"
            " metadata TEXT NOT NULL);"
            f"CREATE TABLE IF NOT EXISTS {t}_tags (tag TEXT NOT NULL, rowid INTEGER NOT NULL,"
            " PRIMARY KEY (tag, rowid)) WITHOUT ROWID;"
            f"CREATE TABLE IF NOT EXISTS {t}_labels (key TEXT NOT NULL, value TEXT NOT NULL,"
            " rowid INTEGER NOT NULL, PRIMARY KEY (key, value, rowid)) WITHOUT ROWID;"
            # deleting or replacing an entry finds its filter rows by ``rowid`` (without these,
            # each delete scanned both tables: 50,000 deletes of 100,000 entries took 70 s);
            # added to tables made before them too
            f"CREATE INDEX IF NOT EXISTS {t}_tags_rowid ON {t}_tags (rowid);"
            f"CREATE INDEX IF NOT EXISTS {t}_labels_rowid ON {t}_labels (rowid);"
        )
        meta = dict(self._conn.execute(f"SELECT key, value FROM {t}_meta"))
        if meta:
            stored_metric = Metric(meta["metric"])
            stored_dims = int(meta["dimensions"])
            self.embedder_id = meta.get("embedder")
            check_identity(self._where(), self.embedder_id, stored_dims, embedder_id, dimensions)
            if metric is not stored_metric and metric is not Metric.Cosine:
                raise ConfigurationError(f"table {t!r} uses {stored_metric.value}, not {metric.value}")
            self.metric = stored_metric
            self.dimensions = stored_dims
        elif dimensions is not None:
            self._create(dimensions)

    def _where(self) -> str:
        return f"{self.path!r} (table {self.table!r})"

    def use_embedder(self, embedder_id: str, dimensions: int) -> None:
        """Bind the store to an embedder before anything is written: record its id (and its
        dimension, for a store that has none yet) when the store recorded none, else check both.

        Raises:
            DimensionMismatchError, EmbedderMismatchError: the store was created for another
                embedder (nothing is changed).
            VectorStoreError: the database failed.
        """
        with self._lock, self._errors("open"):
            self._bind(embedder_id, dimensions, reindex=False)

    def reindex(self, embedder_id: str, dimensions: int) -> None:
        """Delete every entry and bind the store to another embedder (its own dimension), in one
        transaction. :func:`foundation_ai.vectors.reindex` also re-embeds the texts.

        Raises:
            VectorStoreError: the database failed (nothing was changed).
        """
        with self._lock, self._errors("reindex"):
            self._bind(embedder_id, dimensions, reindex=True)

    def _bind(self, embedder_id: str, dimensions: int | None, *, reindex: bool) -> None:
        t = self.table
        with self._lock:
            if not reindex:
                check_identity(self._where(), self.embedder_id, self.dimensions, embedder_id, dimensions)
            with self._conn:
                if reindex:
                    for part in ("items", "tags", "labels"):
                        self._conn.execute(f"DELETE FROM {t}_{part}")
                    self._conn.execute(f"DROP TABLE IF EXISTS {t}_vec")
                    self._conn.execute(f"DELETE FROM {t}_meta WHERE key = 'dimensions'")
                    self.dimensions = None
                elif self.embedder_id is None and len(self):
                    log.warning(
                        "vector store %s: %d vectors written before embedders were recorded are "
                        "taken as embedder %r's",
                        self._where(),
                        len(self),
                        embedder_id,
                    )
                self._conn.execute(f"INSERT OR REPLACE INTO {t}_meta VALUES ('embedder', ?)", (embedder_id,))
                if self.dimensions is None and dimensions is not None:
                    self._create(dimensions)
            self.embedder_id = embedder_id

    def _create(self, dimensions: int) -> None:
        t = self.table
        with self._lock:
            self._conn.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {t}_vec USING vec0("
                f"embedding float[{int(dimensions)}] distance_metric={_SQL_METRIC[self.metric]})"
            )
            self._conn.execute(
                f"INSERT OR REPLACE INTO {t}_meta VALUES ('dimensions', ?), ('metric', ?)",
                (str(dimensions), self.metric.value),
            )
            self.dimensions = dimensions

    def _rows(self, vectors: Sequence[Sequence[float]], ids: Sequence[str] | None) -> Any:
        """The checked ``float32`` rows (see :func:`~foundation_ai.vectors._store.checked_rows`);
        the first vector fixes the dimension of a store that has none yet."""
        if not vectors:
            return []
        if self.dimensions is None:
            if len(vectors[0]) == 0:
                raise DimensionMismatchError("a vector needs at least one dimension")
            rows = checked_rows(vectors, ids, len(vectors[0]), self.metric)
            self._create(len(vectors[0]))
            return rows
        return checked_rows(vectors, ids, self.dimensions, self.metric)

    def upsert(self, entries: Iterable[VectorEntry]) -> None:
        """Insert entries, replacing those with the same id (one transaction; every vector is
        checked before anything is written)."""
        batch = list(entries)
        t = self.table
        enc = msgspec.json.encode
        with self._lock, self._errors("write to"):
            rows = self._rows([e.vector for e in batch], [e.id for e in batch])
            with self._conn:
                cur = self._conn.cursor()
                for e, vec in zip(batch, rows, strict=True):
                    blob = vec.astype("<f4").tobytes()
                    row = cur.execute(f"SELECT rowid FROM {t}_items WHERE id = ?", (e.id,)).fetchone()
                    if row is None:
                        cur.execute(
                            f"INSERT INTO {t}_items (id, metadata) VALUES (?, ?)",
                            (e.id, enc(e.metadata).decode()),
                        )
                        rowid = self._conn.last_insert_rowid()
                    else:
                        rowid = row[0]
                        cur.execute(
                            f"UPDATE {t}_items SET metadata = ? WHERE rowid = ?",
                            (enc(e.metadata).decode(), rowid),
                        )
                        cur.execute(f"DELETE FROM {t}_vec WHERE rowid = ?", (rowid,))
                        cur.execute(f"DELETE FROM {t}_tags WHERE rowid = ?", (rowid,))
                        cur.execute(f"DELETE FROM {t}_labels WHERE rowid = ?", (rowid,))
                    cur.execute(f"INSERT INTO {t}_vec (rowid, embedding) VALUES (?, ?)", (rowid, blob))
                    if e.metadata.tags:
                        cur.executemany(
                            f"INSERT OR IGNORE INTO {t}_tags VALUES (?, ?)",
                            [(g, rowid) for g in e.metadata.tags],
                        )
                    if e.metadata.labels:
                        cur.executemany(
                            f"INSERT OR IGNORE INTO {t}_labels VALUES (?, ?, ?)",
                            [(k, v, rowid) for k, v in e.metadata.labels.items()],
                        )

    def get(self, id: str) -> VectorEntry | None:
        """The entry with this id (vector as ``float32`` values), or ``None``."""
        import numpy as np

        t = self.table
        with self._lock, self._errors("read"):
            row = self._conn.execute(f"SELECT rowid, metadata FROM {t}_items WHERE id = ?", (id,)).fetchone()
            if row is None:
                return None
            vec = self._conn.execute(f"SELECT embedding FROM {t}_vec WHERE rowid = ?", (row[0],)).fetchone()
        values = np.frombuffer(vec[0], dtype=np.float32).tolist()
        return VectorEntry(id, values, msgspec.json.decode(row[1], type=VectorMetadata))

    def delete(self, ids: Iterable[str]) -> int:
        """Delete entries; returns how many existed."""
        t = self.table
        count = 0
        with self._lock, self._errors("delete from"), self._conn:
            cur = self._conn.cursor()
            for id_ in ids:
                row = cur.execute(f"SELECT rowid FROM {t}_items WHERE id = ?", (id_,)).fetchone()
                if row is None:
                    continue
                count += 1
                for table in ("items", "tags", "labels"):
                    cur.execute(f"DELETE FROM {t}_{table} WHERE rowid = ?", (row[0],))
                if self.dimensions is not None:
                    cur.execute(f"DELETE FROM {t}_vec WHERE rowid = ?", (row[0],))
        return count

    def __len__(self) -> int:
        with self._lock, self._errors("read"):
            return int(self._conn.execute(f"SELECT count(*) FROM {self.table}_items").fetchone()[0])

    def search(
        self, vector: Sequence[float], k: int = 10, tags: TagFilter | None = None
    ) -> list[VectorMatch]:
        """The ``k`` best matches, best first (cosine: similarity = 1 - cosine distance; L2:
        the distance); see :class:`~foundation_ai.vectors.VectorStore`."""
        k = check_k(k)
        if k <= 0:
            return []
        want = want_filter(tags)
        if self.dimensions is None:  # nothing stored yet
            return []
        blob = checked_rows([vector], None, self.dimensions, self.metric)[0].astype("<f4").tobytes()
        t = self.table
        # rows without a distance (a zero vector written before such vectors were refused) go last
        with self._lock, self._errors("search"):
            if want is None and k <= _KNN_MAX:
                rows = self._conn.execute(
                    f"SELECT i.id, v.distance FROM (SELECT rowid, distance FROM {t}_vec "
                    f"WHERE embedding MATCH ? AND k = ?) v JOIN {t}_items i ON i.rowid = v.rowid "
                    "ORDER BY v.distance IS NULL, v.distance, i.id",
                    (blob, k),
                ).fetchall()
            else:
                where, params = self._filter_sql(want) if want is not None else ("", [])
                rows = self._conn.execute(
                    f"SELECT i.id, {_DISTANCE_FN[self.metric]}(v.embedding, ?) AS d FROM {t}_vec v "
                    f"JOIN {t}_items i ON i.rowid = v.rowid "
                    f"{f'WHERE v.rowid IN ({where}) ' if where else ''}"
                    "ORDER BY d IS NULL, d, i.id LIMIT ?",
                    (blob, *params, k),
                ).fetchall()
        if self.metric is Metric.Cosine:
            return [VectorMatch(i, 1.0 - float(d) if d is not None else 0.0) for i, d in rows]
        return [VectorMatch(i, float(d)) for i, d in rows]

    def _filter_sql(self, want: TagFilter) -> tuple[str, list[str]]:
        t = self.table
        if isinstance(want, Mapping):
            parts = [f"SELECT rowid FROM {t}_labels WHERE key = ? AND value = ?"] * len(want)
            params = [x for kv in want.items() for x in kv]
        else:
            names = list(want)
            parts = [f"SELECT rowid FROM {t}_tags WHERE tag = ?"] * len(names)
            params = names
        return " INTERSECT ".join(parts), params

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock, self._errors("close"):
            self._conn.close()

    def __repr__(self) -> str:
        return f"SqliteVecStore({self.path!r}, table={self.table!r}, metric={self.metric.value})"
