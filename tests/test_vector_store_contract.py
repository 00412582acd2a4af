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

from foundation_ai.errors import ConfigurationError, FoundationAIError
from foundation_ai.vectors import (
    DimensionMismatchError,
    InMemoryVectorStore,
    InvalidVectorError,
    Metric,
    PgVectorStore,
    SqliteVecStore,
    VectorEntry,
    VectorMetadata,
    VectorStore,
    VectorStoreError,
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


def test_a_plain_string_tag_filter_is_one_tag_name_not_its_letters(make_store: StoreFactory) -> None:
    s = make_store(2, Metric.L2)
    s.upsert([entry("ab", [1.0, 0.0], "ab"), entry("letters", [0.0, 1.0], "a", "b")])
    assert [m.id for m in s.search([0.0, 0.0], k=10, tags="ab")] == ["ab"]
    assert [m.id for m in s.search([0.0, 0.0], k=10, tags="a")] == ["letters"]
    assert len(s.search([0.0, 0.0], k=10, tags="")) == 2  # no filter


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
    with pytest.raises(DimensionMismatchError, match=r"\(2 dimensions\) .* \(5 dimensions\)"):
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


@pytest.mark.parametrize(
    "bad",
    [[math.nan, 0.0], [math.inf, 1.0], [1.0, -math.inf], [1e39, 0.0]],
    ids=["nan", "inf", "minus-inf", "beyond-float32"],
)
@pytest.mark.parametrize("metric", [Metric.Cosine, Metric.L2])
def test_a_non_finite_vector_is_refused_and_its_batch_stores_nothing(
    make_store: StoreFactory, metric: Metric, bad: list[float]
) -> None:
    s = make_store(2, metric)
    with pytest.raises(InvalidVectorError, match=r"'bad'.*NaN or infinite") as caught:
        s.upsert([entry("good", [1.0, 0.0]), entry("bad", bad)])
    assert caught.value.id == "bad"
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, FoundationAIError)
    assert s.get("good") is None and s.get("bad") is None
    assert len(s) == 0  # type: ignore[arg-type]


def test_a_zero_vector_is_refused_under_cosine_and_never_outranks_a_match(make_store: StoreFactory) -> None:
    s = make_store(3, Metric.Cosine)
    with pytest.raises(InvalidVectorError, match="'zero' is a zero vector") as caught:
        s.upsert(
            [entry("good", [1.0, 0.0, 0.0]), entry("ok", [0.7, 0.7, 0.0]), entry("zero", [0.0, 0.0, 0.0])]
        )
    assert caught.value.id == "zero"
    s.upsert([entry("good", [1.0, 0.0, 0.0]), entry("ok", [0.7, 0.7, 0.0])])
    assert [m.id for m in s.search([1.0, 0.0, 0.0], k=3)] == ["good", "ok"]


def test_a_zero_vector_is_an_ordinary_point_under_l2(make_store: StoreFactory) -> None:
    s = make_store(2, Metric.L2)
    s.upsert([entry("origin", [0.0, 0.0]), entry("far", [3.0, 4.0])])
    got = s.search([0.0, 0.0], k=2)
    assert [(m.id, m.score) for m in got] == [("origin", 0.0), ("far", pytest.approx(5.0))]


@pytest.mark.parametrize("query", [[math.nan, 1.0], [1.0, math.inf]], ids=["nan", "inf"])
def test_a_query_with_non_finite_values_is_refused(make_store: StoreFactory, query: list[float]) -> None:
    s = compass(make_store, Metric.Cosine)
    with pytest.raises(InvalidVectorError, match="query vector") as caught:
        s.search(query, k=3)
    assert caught.value.id == ""


def test_a_zero_query_under_cosine_scores_every_match_zero_in_id_order(make_store: StoreFactory) -> None:
    s = compass(make_store, Metric.Cosine)
    got = s.search([0.0, 0.0], k=10)
    assert [(m.id, m.score) for m in got] == [
        ("east", 0.0),
        ("far-east", 0.0),
        ("north", 0.0),
        ("north-east", 0.0),
        ("west", 0.0),
    ]
    assert [m.id for m in s.search([0.0, 0.0], k=2, tags=["x"])] == ["east", "far-east"]


def test_a_k_beyond_any_engine_limit_returns_every_match(make_store: StoreFactory) -> None:
    s = compass(make_store, Metric.Cosine)
    everything = [m.id for m in s.search([1.0, 0.0], k=5)]
    for k in (4097, 10**9, 10**30):
        assert [m.id for m in s.search([1.0, 0.0], k=k)] == everything
        assert [m.id for m in s.search([1.0, 0.0], k=k, tags=["x"])] == ["east", "far-east", "west"]
    with pytest.raises(TypeError, match="k must be an int"):
        s.search([1.0, 0.0], k=2.5)  # type: ignore[arg-type]


def test_a_zero_vector_written_by_an_older_version_ranks_last_in_sqlite_vec(tmp_path: Path) -> None:
    s = SqliteVecStore(tmp_path / "old.sqlite3", dimensions=3)
    s.upsert([entry("good", [1.0, 0.0, 0.0]), entry("ok", [0.7, 0.7, 0.0])])
    with s._conn:  # what an older version wrote for a zero vector
        s._conn.execute("INSERT INTO vectors_items (id, metadata) VALUES ('zero', '{}')")
        rowid = s._conn.last_insert_rowid()
        s._conn.execute("INSERT INTO vectors_vec (rowid, embedding) VALUES (?, ?)", (rowid, bytes(12)))
    got = s.search([1.0, 0.0, 0.0], k=3)
    assert [m.id for m in got] == ["good", "ok", "zero"]
    assert [m.id for m in s.search([1.0, 0.0, 0.0], k=5000)] == ["good", "ok", "zero"]
    s.close()


def test_sqlite_vec_deletes_find_filter_rows_by_index_also_in_a_table_made_before_the_indexes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite3"
    s = SqliteVecStore(path, dimensions=2)
    with s._conn:  # the layout of an older version: no rowid indexes
        s._conn.execute("DROP INDEX vectors_tags_rowid")
        s._conn.execute("DROP INDEX vectors_labels_rowid")
    s.close()
    s = SqliteVecStore(path, dimensions=2)  # reopening adds them
    s.upsert([entry(f"e{i}", [1.0, float(i)], "t", lang="en") for i in range(50)])
    for table in ("vectors_tags", "vectors_labels"):
        plan = " ".join(
            str(r[-1]) for r in s._conn.execute(f"EXPLAIN QUERY PLAN DELETE FROM {table} WHERE rowid = 7")
        )
        assert f"USING COVERING INDEX {table}_rowid" in plan or f"USING INDEX {table}_rowid" in plan, plan
    s.delete([f"e{i}" for i in range(0, 50, 2)])
    assert len(s.search([1.0, 0.0], k=100, tags=["t"])) == 25
    assert len(s.search([1.0, 0.0], k=100, tags={"lang": "en"})) == 25
    assert s._conn.execute("SELECT count(*) FROM vectors_tags").fetchone()[0] == 25
    s.close()


def test_a_zero_vector_written_by_an_older_version_ranks_last_in_pgvector(postgres_uri: str) -> None:
    s = PgVectorStore(postgres_uri, dimensions=3, table=f"t{next(_tables)}")
    try:
        s.upsert([entry("good", [1.0, 0.0, 0.0]), entry("ok", [0.7, 0.7, 0.0])])
        s._conn.execute(f"INSERT INTO {s.table} (id, embedding) VALUES ('zero', '[0,0,0]')")
        # pgvector's HNSW index does not hold zero vectors under cosine: the indexed search
        # leaves it out; the exact one (k above ef_search's maximum, or a filter) puts it last
        assert [m.id for m in s.search([1.0, 0.0, 0.0], k=3)][:2] == ["good", "ok"]
        assert [m.id for m in s.search([1.0, 0.0, 0.0], k=2000)] == ["good", "ok", "zero"]
    finally:
        s.drop()
        s.close()


def test_a_folder_as_the_sqlite_vec_path_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(VectorStoreError, match="is a folder") as caught:
        SqliteVecStore(tmp_path, dimensions=3)
    assert caught.value.where == str(tmp_path)
    assert isinstance(caught.value, FoundationAIError)


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"this is not an SQLite database, just text " * 200)
    with pytest.raises(VectorStoreError, match=r"junk\.sqlite3"):
        SqliteVecStore(junk, dimensions=3)
    assert junk.read_bytes().startswith(b"this is not")  # left as it was


def test_an_unreachable_postgres_is_a_store_error() -> None:
    import socket

    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(VectorStoreError, match=rf"127\.0\.0\.1:{port}") as caught:
        PgVectorStore(f"postgresql://user:secret@127.0.0.1:{port}/db?connect_timeout=5", dimensions=2)
    assert "secret" not in str(caught.value.where)


def test_a_vector_of_text_is_refused_as_invalid(make_store: StoreFactory) -> None:
    s = make_store(2, Metric.L2)
    with pytest.raises(InvalidVectorError, match="'words' is not a sequence of numbers"):
        s.upsert([entry("ok", [1.0, 2.0]), entry("words", ["a", "b"])])  # type: ignore[list-item]
    assert len(s) == 0  # type: ignore[arg-type]
