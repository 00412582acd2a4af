"""Seed 000 section 5: ``ToolArguments`` and the ``ToolArgs`` readers."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import pytest

from foundation_ai.errors import FoundationAIError, ToolArgumentError
from foundation_ai.types import ToolArgs, ToolArguments

ARGS: ToolArguments = {
    "q": "weather in Paris",
    "n": -3,
    "count": 5,
    "float_int": 3.0,
    "ratio": 0.25,
    "flag": True,
    "null": None,
    "nested": {"a": [1, 2]},
}


@pytest.fixture
def args() -> ToolArgs:
    return ToolArgs(ARGS)


def test_required_readers(args: ToolArgs) -> None:
    assert args.str("q") == "weather in Paris"
    assert args.i64("n") == -3
    assert args.i64("float_int") == 3
    assert args.usize("count") == 5
    assert args.f64("ratio") == 0.25
    assert args.f64("count") == 5.0 and isinstance(args.f64("count"), float)
    assert args.bool("flag") is True


@pytest.mark.parametrize(
    ("reader", "field", "expected", "got"),
    [
        ("str", "missing", "a string", "missing"),
        ("str", "n", "a string", "number -3"),
        ("i64", "q", "an integer (64-bit)", "string 'weather in Paris'"),
        ("i64", "ratio", "an integer (64-bit)", "number 0.25"),
        ("i64", "flag", "an integer (64-bit)", "boolean true"),
        ("usize", "n", "a non-negative integer", "number -3"),
        ("f64", "flag", "a number", "boolean true"),
        ("f64", "nested", "a number", "an object"),
        ("bool", "count", "a boolean", "number 5"),
        ("bool", "null", "a boolean", "null"),
    ],
)
def test_errors_name_field_and_expectation(
    args: ToolArgs, reader: str, field: str, expected: str, got: str
) -> None:
    with pytest.raises(ToolArgumentError) as info:
        getattr(args, reader)(field)
    err = info.value
    assert (err.field, err.expected, err.got) == (field, expected, got)
    assert field in str(err) and expected in str(err)
    assert isinstance(err, FoundationAIError)


def test_i64_range() -> None:
    a = ToolArgs({"big": 2**63, "ok": 2**63 - 1, "low": -(2**63)})
    assert a.i64("ok") == 2**63 - 1
    assert a.i64("low") == -(2**63)
    with pytest.raises(ToolArgumentError):
        a.i64("big")


def test_optional_readers(args: ToolArgs) -> None:
    assert args.opt_str("q") == "weather in Paris"
    assert args.opt_str("absent") is None
    assert args.opt_str("null") is None  # null counts as absent
    assert args.opt_i64("n") == -3 and args.opt_i64("absent") is None
    assert args.opt_usize("count") == 5 and args.opt_usize("absent") is None
    assert args.opt_f64("ratio") == 0.25 and args.opt_f64("absent") is None
    assert args.opt_bool("flag") is True and args.opt_bool("absent") is None
    assert args.opt_value("nested") == {"a": [1, 2]}
    assert args.opt_value("absent") is None


@pytest.mark.parametrize(
    ("reader", "field"),
    [("opt_str", "count"), ("opt_i64", "q"), ("opt_usize", "n"), ("opt_f64", "q"), ("opt_bool", "q")],
)
def test_optional_readers_reject_present_but_mistyped(args: ToolArgs, reader: str, field: str) -> None:
    with pytest.raises(ToolArgumentError) as info:
        getattr(args, reader)(field)
    assert info.value.field == field


def test_none_arguments_count_as_empty_object() -> None:
    a = ToolArgs(None)
    assert a.raw == {}
    assert a.opt_str("q") is None
    with pytest.raises(ToolArgumentError, match="'q'"):
        a.str("q")


class Filters(msgspec.Struct):
    tags: list[str]
    exact: bool = False


class Search(msgspec.Struct):
    q: str
    limit: int = 10
    filters: Filters | None = None


@dataclass
class Point:
    x: float
    y: float


def test_parse_into_struct() -> None:
    got = ToolArgs({"q": "cats", "filters": {"tags": ["a"]}, "unknown": 1}).parse(Search)
    assert got == Search(q="cats", limit=10, filters=Filters(tags=["a"]))


def test_parse_into_dataclass_with_lax_numbers() -> None:
    assert ToolArgs({"x": 1, "y": "2.5"}).parse(Point) == Point(1.0, 2.5)


def test_parse_missing_field_names_it() -> None:
    with pytest.raises(ToolArgumentError) as info:
        ToolArgs({"limit": 3}).parse(Search)
    assert info.value.field == "q"
    assert info.value.got == "missing"


def test_parse_missing_nested_field_names_its_path() -> None:
    with pytest.raises(ToolArgumentError) as info:
        ToolArgs({"q": "x", "filters": {"exact": True}}).parse(Search)
    assert info.value.field == "filters.tags"


def test_parse_mistyped_field_names_it_and_expectation() -> None:
    with pytest.raises(ToolArgumentError) as info:
        ToolArgs({"q": "x", "limit": "many"}).parse(Search)
    assert (info.value.field, info.value.expected, info.value.got) == ("limit", "int", "str")


def test_parse_mistyped_list_item_names_its_index() -> None:
    with pytest.raises(ToolArgumentError) as info:
        ToolArgs({"q": "x", "filters": {"tags": ["a", 3]}}).parse(Search)
    assert (info.value.field, info.value.expected, info.value.got) == ("filters.tags[1]", "str", "int")
