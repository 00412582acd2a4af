"""Vector types (seed 000 "Vector types"): entries, matches, the store protocol, the exact store."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from foundation_ai.errors import FoundationAIError
from foundation_ai.vectors import (
    DimensionMismatchError,
    InMemoryVectorStore,
    InvalidVectorError,
    Metric,
    SqliteVecStore,
    VectorEntry,
    VectorMatch,
    VectorMetadata,
    VectorStore,
    default_vector_path,
)


def entry(id: str, vector: list[float], *tags: str) -> VectorEntry:
    return VectorEntry(id, vector, VectorMetadata(tags=list(tags)))


def store(metric: Metric) -> InMemoryVectorStore:
    s = InMemoryVectorStore(metric)
    s.upsert(
        [
            entry("east", [1.0, 0.0], "dir", "x"),
            entry("north", [0.0, 1.0], "dir", "y"),
            entry("far-east", [10.0, 0.0], "x"),
            entry("north-east", [1.0, 1.0], "dir"),
            entry("west", [-1.0, 0.0], "dir", "x"),
        ]
    )
    return s


def test_in_memory_store_satisfies_protocol() -> None:
    assert isinstance(InMemoryVectorStore(), VectorStore)


def test_cosine_scores_are_similarities_best_first() -> None:
    got = store(Metric.Cosine).search([2.0, 0.0], k=5)
    assert [m.id for m in got[:2]] in (["east", "far-east"], ["far-east", "east"])  # both exactly 1.0
    scores = {m.id: m.score for m in got}
    assert scores["east"] == pytest.approx(1.0)
    assert scores["far-east"] == pytest.approx(1.0)  # cosine ignores length
    assert scores["north-east"] == pytest.approx(1 / math.sqrt(2))
    assert scores["north"] == pytest.approx(0.0)
    assert scores["west"] == pytest.approx(-1.0)
    assert got[-1].id == "west"
    assert [m.score for m in got] == sorted((m.score for m in got), reverse=True)


def test_l2_scores_are_distances_lowest_first() -> None:
    got = store(Metric.L2).search([1.0, 0.0], k=5)
    assert got[0] == VectorMatch("east", 0.0)
    scores = {m.id: m.score for m in got}
    assert scores["north-east"] == pytest.approx(1.0)
    assert scores["north"] == pytest.approx(math.sqrt(2))
    assert scores["west"] == pytest.approx(2.0)
    assert scores["far-east"] == pytest.approx(9.0)
    assert [m.id for m in got] == ["east", "north-east", "north", "west", "far-east"]
    assert all(m.score >= 0 for m in got)


def test_dot_scores_are_unbounded_products_highest_first() -> None:
    got = store(Metric.Dot).search([1.0, 0.5], k=5)
    assert [m.id for m in got] == ["far-east", "north-east", "east", "north", "west"]
    assert got[0].score == pytest.approx(10.0)
    assert got[1].score == pytest.approx(1.5)
    assert got[-1].score == pytest.approx(-1.0)


def test_k_limits_results() -> None:
    s = store(Metric.Cosine)
    assert len(s.search([1.0, 0.0], k=2)) == 2
    assert len(s.search([1.0, 0.0], k=100)) == 5
    assert s.search([1.0, 0.0], k=0) == []


def test_tag_filter_requires_every_tag() -> None:
    s = store(Metric.L2)
    assert {m.id for m in s.search([0.0, 0.0], k=10, tags=["x"])} == {"east", "far-east", "west"}
    assert {m.id for m in s.search([0.0, 0.0], k=10, tags=["dir", "x"])} == {"east", "west"}
    assert s.search([0.0, 0.0], k=10, tags=["nope"]) == []
    assert len(s.search([0.0, 0.0], k=10, tags=[])) == 5


def test_upsert_replaces_get_and_delete() -> None:
    s = store(Metric.Cosine)
    assert len(s) == 5
    s.upsert([entry("east", [0.0, -1.0], "moved")])
    assert len(s) == 5
    got = s.get("east")
    assert got is not None and got.vector == [0.0, -1.0] and got.metadata.tags == ["moved"]
    assert s.search([0.0, -1.0], k=1) == [VectorMatch("east", pytest.approx(1.0))]  # type: ignore[arg-type]
    assert s.delete(["east", "missing"]) == 1
    assert s.get("east") is None and len(s) == 4


def test_dimension_mismatch_raises() -> None:
    s = store(Metric.Cosine)
    with pytest.raises(DimensionMismatchError, match="3 dimensions, store has 2"):
        s.upsert([entry("z", [1.0, 2.0, 3.0])])
    with pytest.raises(DimensionMismatchError):
        s.search([1.0])
    assert issubclass(DimensionMismatchError, FoundationAIError)
    fixed = InMemoryVectorStore(dimensions=3)
    with pytest.raises(DimensionMismatchError):
        fixed.upsert([entry("a", [1.0, 2.0])])


def test_zero_vector_is_refused_under_cosine_and_kept_under_dot() -> None:
    s = InMemoryVectorStore()
    with pytest.raises(InvalidVectorError, match="zero vector"):
        s.upsert([entry("zero", [0.0, 0.0]), entry("one", [1.0, 0.0])])
    assert len(s) == 0
    dot = InMemoryVectorStore(Metric.Dot)
    dot.upsert([entry("zero", [0.0, 0.0]), entry("one", [1.0, 0.0])])
    assert [(m.id, m.score) for m in dot.search([1.0, 0.0])] == [("one", 1.0), ("zero", 0.0)]


def test_label_filter_matches_key_value_tags() -> None:
    s = InMemoryVectorStore(Metric.Dot)
    s.upsert(
        [
            VectorEntry("a", [1.0, 0.0], VectorMetadata(labels={"lang": "en", "kind": "faq"})),
            VectorEntry("b", [2.0, 0.0], VectorMetadata(labels={"lang": "fr", "kind": "faq"})),
            VectorEntry("c", [3.0, 0.0], VectorMetadata(tags=["lang"])),
        ]
    )
    assert [m.id for m in s.search([1.0, 0.0], tags={"kind": "faq"})] == ["b", "a"]
    assert [m.id for m in s.search([1.0, 0.0], tags={"kind": "faq", "lang": "en"})] == ["a"]
    assert s.search([1.0, 0.0], tags={"lang": "de"}) == []
    assert [m.id for m in s.search([1.0, 0.0], tags=["lang"])] == ["c"]  # names match tags, not labels
    assert len(s.search([1.0, 0.0], tags={})) == 3


def test_metadata_matches() -> None:
    meta = VectorMetadata(tags=["a", "b"], labels={"k": "v"})
    assert meta.matches(None) and meta.matches([]) and meta.matches(["a"]) and meta.matches({"k": "v"})
    assert not meta.matches(["a", "c"]) and not meta.matches({"k": "w"}) and not meta.matches({"x": "v"})


def test_default_vector_path_sits_beside_the_default_session_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from foundation_ai.agentic.stores import HOME_ENV, default_store_path

    home = tmp_path / "fa-home"
    monkeypatch.setenv(HOME_ENV, str(home))
    assert default_vector_path() == home / "vectors.sqlite3"
    assert default_vector_path().parent == default_store_path().parent
    monkeypatch.delenv(HOME_ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # platformdirs on Linux
    assert default_vector_path().parent == default_store_path().parent
    assert default_vector_path().name == "vectors.sqlite3"


def test_a_store_opened_without_a_path_lands_in_foundation_ai_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOUNDATION_AI_HOME", str(tmp_path / "home"))
    s = SqliteVecStore(dimensions=2)
    try:
        s.upsert([entry("a", [1.0, 0.0])])
    finally:
        s.close()
    assert (tmp_path / "home" / "vectors.sqlite3").is_file()
