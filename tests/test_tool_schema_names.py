"""Schema post-processing never touches user-named properties (issue 10, kind F12): a parameter
or nested field named like a JSON Schema keyword (``title``, ``type``, ``description``,
``default``, ``properties``, ``items``, ``$ref``, ``required``, ``enum``, ``format``) keeps its
name and schema, and a valid call runs; a property test over any identifier, top level and
nested."""

from __future__ import annotations

import asyncio
import keyword
from typing import Any, TypedDict

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foundation_ai.agentic import ToolRegistry, tool
from foundation_ai.agentic.tools import FunctionTool
from foundation_ai.schema.walk import map_subschemas
from foundation_ai.types import ToolCall

KEYWORDS = ["title", "type", "description", "default", "properties", "items", "required", "enum", "format"]


def run(t: FunctionTool, arguments: dict[str, Any]) -> Any:
    result = asyncio.run(ToolRegistry([t]).run(ToolCall(id="c", name=t.definition.name, arguments=arguments)))
    assert result.error_detail is None, result.error_detail
    return result.content.content  # type: ignore[union-attr]


def test_create_issue_with_a_title_parameter_keeps_it() -> None:
    @tool
    def create_issue(title: str, body: str) -> str:
        """File an issue.

        Args:
            title: One line.
        """
        return f"{title}: {body}"

    schema = create_issue.definition.arguments.schema
    assert set(schema["properties"]) == {"title", "body"}
    assert schema["properties"]["title"] == {"type": "string", "description": "One line."}
    assert schema["required"] == ["title", "body"]
    assert run(create_issue, {"title": "Bug", "body": "it broke"}) == "Bug: it broke"


def function_with(name: str, nested: type) -> FunctionTool:
    """``def f(<name>: str, other: <nested> , limit: int = 2)`` built at run time."""
    scope: dict[str, Any] = {"Nested": nested}
    src = (
        f"def f({name}: str, other: 'Nested', limit: int = 2) -> str:\n"
        f"    return {name} + '|' + str(limit) + '|' + repr(other)\n"
    )
    exec(src, scope)
    return tool(scope["f"])


def nested_struct(name: str) -> type:
    return msgspec.defstruct("Nested", [(name, int), ("note", str, "")])


def check(name: str, t: FunctionTool) -> None:
    schema = t.definition.arguments.schema
    assert name in schema["properties"], schema
    assert schema["properties"][name] == {"type": "string"}
    assert name in schema["required"]
    inner = schema["properties"]["other"]
    assert inner["properties"][name] == {"type": "integer"}, inner
    assert inner["required"] == [name]
    out = run(t, {name: "v", "other": {name: 7}})
    assert out.startswith("v|2|")


@pytest.mark.parametrize("name", KEYWORDS)
def test_keyword_named_parameter_and_nested_field_survive(name: str) -> None:
    check(name, function_with(name, nested_struct(name)))


Inner = msgspec.defstruct("Inner", [("ref", str, msgspec.field(name="$ref"))])
Typed = TypedDict("Typed", {"$ref": int, "title": str})


def test_dollar_ref_named_field_survives() -> None:
    @tool
    def f(a: Inner, b: Typed, title: str) -> str:  # type: ignore[valid-type]
        """Refs."""
        return "ok"

    schema = f.definition.arguments.schema
    assert schema["properties"]["a"]["properties"] == {"$ref": {"type": "string"}}
    assert schema["properties"]["b"]["properties"] == {
        "$ref": {"type": "integer"},
        "title": {"type": "string"},
    }
    assert "$defs" not in schema
    assert run(f, {"a": {"$ref": "x"}, "b": {"$ref": 1, "title": "t"}, "title": "x"}) == "ok"


def test_keyword_names_inside_data_keywords_are_untouched() -> None:
    schema = {
        "title": "dropped by the caller's fn only",
        "properties": {"title": {"title": "T", "type": "string"}},
        "enum": [{"title": 1, "$ref": "#/$defs/x"}],
        "default": {"properties": {"title": 2}},
        "items": [{"title": "a"}, True],
    }
    seen: list[Any] = []
    out = map_subschemas(schema, lambda s: seen.append(s) or s)
    assert out == schema
    assert seen == [{"title": "T", "type": "string"}, {"title": "a"}, True]


identifiers = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,20}\Z").filter(
    lambda s: not keyword.iskeyword(s) and s not in ("other", "limit", "note", "f", "Nested")
)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.sampled_from(KEYWORDS) | identifiers)
def test_any_identifier_as_a_parameter_name_survives_top_level_and_nested(name: str) -> None:
    check(name, function_with(name, nested_struct(name)))
