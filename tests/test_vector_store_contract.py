"""One contract for every VectorStore: in-memory (numpy), sqlite-vec (apsw) and PostgreSQL +
pgvector (a real server started by pgserver in a temporary folder)."""

from __future__ import annotations

import itertools
import math
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from foundation_ai.errors import ConfigurationError
from foundation_ai.vectors import (
    DimensionMismatchError,
    InMemoryVectorStore,
    Metric,
    PgVectorStore,
    SqliteVecStore,
    VectorEntry,
    VectorMetadata,
    VectorStore,
)

_tables = itertools.count()


@pytest.fixture(scope="session")
def postgres_uri() -> Iterator[str]:
    """A real PostgreSQL 16 with pgvector (pgserver), for the whole test session. Its folder is
    made with ``tempfile.mkdtemp``, not pytest's ``tmp_path_factory``: another pytest run of
    the same user may prune pytest's numbered folders while this server still uses one."""
    pgserver = pytest.importorskip("pgserver")
    folder = tempfile.mkdtemp(prefix="fai-pg-")
    server = pgserver.get_server(folder, cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


StoreFactory = Callable[..., VectorStore]


@pytest.fixture(params=["memory", "sqlite-vec", "pgvector"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A function (dimensions, metric) -> a fresh, empty store of one implementation."""
    made: list[object] = []

    def make(dimensions: int = 2, metric: Metric = Metric.Cosine) -> VectorStore:
        s: VectorStore
        if request.param == "memory":
            s = InMemoryVectorStore(metric, dimensions)
        elif request.param == "sqlite-vec":
            s = SqliteVecStore(
                tmp_path / "v.sqlite3", dimensions=dimensions, metric=metric, table=f"t{next(_tables)}"
            )
        else:
            uri = request.getfixturevalue("postgres_uri")
            s = PgVectorStore(uri, dimensions=dimensions, metric=metric, table=f"t{next(_tables)}")
        made.append(s)
        return s

    make.kind = request.param  # type: ignore[attr-defined]
    yield make
    for s in made:
        if isinstance(s, PgVectorStore):
            s.drop()
        close = getattr(s, "close", None)
        if close is not None:
            close()


def entry(id: str, vector: list[float], *tags: str, **labels: str) -> VectorEntry:
    return VectorEntry(id, vector, VectorMetadata(tags=list(tags), labels=labels))


def compass(make: StoreFactory, metric: Metric) -> VectorStore:
    s = make(2, metric)
    s.upsert(
        [
            entry("east", [1.0, 0.0], "dir", "x", lang="en"),
            entry("north", [0.0, 1.0], "dir", "y", lang="fr"),
            entry("far-east", [10.0, 0.0], "x", lang="en"),
            entry("north-east", [1.0, 1.0], "dir"),
            entry("west", [-1.0, 0.0], "dir", "x"),
        ]
    )
    return s


def test_every_store_satisfies_the_protocol(make_store: StoreFactory) -> None:
    assert isinstance(make_store(), VectorStore)


def test_cosine_scores_are_similarities_best_first(make_store: StoreFactory) -> None:
    got = compass(make_store, Metric.Cosine).search([2.0, 0.0], k=5)
    scores = {m.id: m.score for m in got}
    assert scores["east"] == pytest.approx(1.0, abs=1e-5)
    assert scores["far-east"] == pytest.approx(1.0, abs=1e-5)
    assert scores["north-east"] == pytest.approx(1 / math.sqrt(2), abs=1e-5)
    assert scores["north"] == pytest.approx(0.0, abs=1e-5)
    assert scores["west"] == pytest.approx(-1.0, abs=1e-5)
    assert [m.id for m in got[2:]] == ["north-east", "north", "west"]


def test_l2_scores_are_distances_lowest_first(make_store: StoreFactory) -> None:
    got = compass(make_store, Metric.L2).search([1.0, 0.0], k=5)
    assert [m.id for m in got] == ["east", "north-east", "north", "west", "far-east"]
    expect = [0.0, 1.0, math.sqrt(2), 2.0, 9.0]
    assert [m.score for m in got] == pytest.approx(expect, abs=1e-5)


def test_dot_product_where_the_engine_has_it(make_store: StoreFactory) -> None:
    if make_store.kind == "sqlite-vec":  # type: ignore[attr-defined]
        with pytest.raises(ConfigurationError, match="Dot"):
            make_store(2, Metric.Dot)
        return
    got = compass(make_store, Metric.Dot).search([1.0, 0.5], k=5)
    assert [m.id for m in got] == ["far-east", "north-east", "east", "north", "west"]
    assert [m.score for m in got] == pytest.approx([10.0, 1.5, 1.0, 0.5, -1.0], abs=1e-5)


def test_k_limits_results(make_store: StoreFactory) -> None:
    s = compass(make_store, Metric.Cosine)
    assert len(s.search([1.0, 0.0], k=2)) == 2
    assert len(s.search([1.0, 0.0], k=100)) == 5
    assert s.search([1.0, 0.0], k=0) == []


def test_tag_filters_require_every_tag_or_label(make_store: StoreFactory) -> None:
    s = compass(make_store, Metric.L2)
    assert [m.id for m in s.search([0.0, 0.0], k=10, tags=["x"])] == ["east", "west", "far-east"]
    assert {m.id for m in s.search([0.0, 0.0], k=10, tags=["dir", "x"])} == {"east", "west"}
    assert s.search([0.0, 0.0], k=10, tags=["nope"]) == []
    assert len(s.search([0.0, 0.0], k=10, tags=[])) == 5
    assert [m.id for m in s.search([1.0, 0.0], k=10, tags={"lang": "en"})] == ["east", "far-east"]
    assert [m.id for m in s.search([1.0, 0.0], k=1, tags={"lang": "en"})] == ["east"]
    assert s.search([1.0, 0.0], tags={"lang": "de"}) == []
    assert s.search([1.0, 0.0], tags=["lang"]) == []  # tag names never match labels
    assert [m.id for m in s.search([0.0, 0.0], k=10, tags=iter(["y"]))] == ["north"]


def test_a_selective_filter_still_returns_k_matches(make_store: StoreFactory) -> None:
    rng = np.random.default_rng(7)
    s = make_store(8, Metric.Cosine)
    s.upsert(
        entry(f"e{i}", rng.normal(size=8).tolist(), *(["rare"] if i % 50 == 0 else [])) for i in range(500)
    )
    got = s.search(rng.normal(size=8).tolist(), k=10, tags=["rare"])
    assert len(got) == 10
    assert all(int(m.id[1:]) % 50 == 0 for m in got)


def test_upsert_replaces_get_returns_and_delete_removes(make_store: StoreFactory) -> None:
    s = compass(make_store, Metric.Cosine)
    assert len(s) == 5  # type: ignore[arg-type]
    s.upsert([VectorEntry("east", [0.0, -1.0], VectorMetadata(tags=["moved"], extra={"n": 1}))])
    assert len(s) == 5  # type: ignore[arg-type]
    got = s.get("east")
    assert got is not None
    assert got.vector == [0.0, -1.0]
    assert got.metadata.tags == ["moved"] and got.metadata.extra == {"n": 1}
    assert s.search([0.0, 0.0 - 1.0], k=1)[0].id == "east"
    assert s.search([0.0, 0.0], k=10, tags=["dir", "x"])[0].id == "west"  # old tags gone
    assert s.delete(["east", "missing"]) == 1
    assert s.get("east") is None
    assert len(s) == 4  # type: ignore[arg-type]
    assert "east" not in {m.id for m in s.search([1.0, 0.0], k=10)}
    assert s.get("never") is None


def test_vectors_round_trip_as_float32(make_store: StoreFactory) -> None:
    s = make_store(3, Metric.Cosine)
    s.upsert([entry("a", [0.1, -2.5, 1e-3])])
    got = s.get("a")
    assert got is not None
    assert got.vector == np.asarray([0.1, -2.5, 1e-3], dtype=np.float32).tolist()


def test_dimension_mismatch_raises(make_store: StoreFactory) -> None:
    s = compass(make_store, Metric.Cosine)
    with pytest.raises(DimensionMismatchError, match="3 dimensions, store has 2"):
        s.upsert([entry("z", [1.0, 2.0, 3.0])])
    with pytest.raises(DimensionMismatchError):
        s.search([1.0])
    assert s.get("z") is None


def test_an_empty_store_finds_nothing(make_store: StoreFactory) -> None:
    assert make_store(2).search([1.0, 0.0]) == []


def test_search_agrees_with_exact_numpy_ranking(make_store: StoreFactory) -> None:
    rng = np.random.default_rng(1)
    data = rng.normal(size=(300, 16)).astype(np.float32)
    s = make_store(16, Metric.Cosine)
    s.upsert(VectorEntry(f"v{i}", row.tolist()) for i, row in enumerate(data))
    q = rng.normal(size=16).astype(np.float32)
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    exact = np.argsort(-(unit @ (q / np.linalg.norm(q))))[:10]
    got = s.search(q.tolist(), k=10)
    hits = len({f"v{i}" for i in exact} & {m.id for m in got})
    assert hits >= 9  # HNSW (pgvector) is approximate; the others are exact
    if make_store.kind != "pgvector":  # type: ignore[attr-defined]
        assert [m.id for m in got] == [f"v{i}" for i in exact]


def test_sqlite_vec_store_persists_in_its_file(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    s = SqliteVecStore(path, metric=Metric.L2, table="mem")
    s.upsert([entry("a", [1.0, 2.0], "t")])  # dimensions from the first entry
    s.close()
    again = SqliteVecStore(path, table="mem")
    assert again.metric is Metric.L2 and again.dimensions == 2
    assert again.search([1.0, 2.0], k=1)[0].id == "a"
    with pytest.raises(ConfigurationError, match="2-dimension"):
        SqliteVecStore(path, table="mem", dimensions=5)
    with pytest.raises(ConfigurationError, match="table name"):
        SqliteVecStore(path, table="x; drop")
    again.close()


def test_pgvector_store_persists_in_its_table(postgres_uri: str) -> None:
    s = PgVectorStore(postgres_uri, dimensions=2, table="persisted")
    try:
        s.upsert([entry("a", [1.0, 0.0], "t", k="v")])
        s.close()
        again = PgVectorStore(postgres_uri, dimensions=2, table="persisted")
        got = again.get("a")
        assert got is not None and got.metadata.tags == ["t"] and got.metadata.labels == {"k": "v"}
        again.drop()
        again.close()
    finally:
        s.close()
