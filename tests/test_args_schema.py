"""Seed 000 sections 6-7: the ``scheme`` builder, ``Args`` and the tool declarations."""

from __future__ import annotations

from typing import Any

import pytest

import foundation_ai.types.tools as tools_module
from foundation_ai.errors import ArgumentValidationError, ConfigurationError, SchemaViolation
from foundation_ai.schema import scheme
from foundation_ai.types import (
    Args,
    FunctionSpec,
    Tool,
    ToolChoice,
    ToolDeclarations,
    ToolDefinition,
    from_json,
    to_json,
)


def search_schema() -> scheme.ObjectSchema:
    return (
        scheme.object()
        .required("q", scheme.string().description("The query").min_length(1))
        .optional("limit", scheme.integer().minimum(1).maximum(50).default(10))
        .optional("tags", scheme.array(scheme.string()).max_items(3).unique())
        .optional(
            "filter",
            scheme.object()
            .required("field", scheme.enum(["title", "body"]))
            .required("exact", scheme.boolean()),
        )
    )


# -- the scheme builder ---------------------------------------------------------------------------


def test_scheme_builds_closed_object_schema() -> None:
    assert search_schema().build() == {
        "type": "object",
        "properties": {
            "q": {"type": "string", "description": "The query", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3, "uniqueItems": True},
            "filter": {
                "type": "object",
                "properties": {
                    "field": {"enum": ["title", "body"], "type": "string"},
                    "exact": {"type": "boolean"},
                },
                "required": ["field", "exact"],
                "additionalProperties": False,
            },
        },
        "required": ["q"],
        "additionalProperties": False,
    }


def test_scheme_other_keywords() -> None:
    assert scheme.number().exclusive_minimum(0).multiple_of(0.5).build() == {
        "type": "number",
        "exclusiveMinimum": 0,
        "multipleOf": 0.5,
    }
    assert scheme.string().nullable().build() == {"type": ["string", "null"]}
    assert scheme.any_of(scheme.string(), scheme.null()).build() == {
        "anyOf": [{"type": "string"}, {"type": "null"}]
    }
    assert scheme.object().additional(True).build()["additionalProperties"] is True
    assert scheme.string().pattern("^a").format("uri").title("T").examples("a1").build() == {
        "type": "string",
        "pattern": "^a",
        "format": "uri",
        "title": "T",
        "examples": ["a1"],
    }
    assert scheme.enum([1, 2]).build() == {"enum": [1, 2]}
    assert scheme.raw({"const": 3}).extra("description", "three").build() == {
        "const": 3,
        "description": "three",
    }


def test_build_returns_a_copy() -> None:
    b = scheme.object().required("q", scheme.string())
    built = b.build()
    built["properties"]["q"]["type"] = "integer"
    assert b.build()["properties"]["q"]["type"] == "string"


# -- Args -----------------------------------------------------------------------------------------


def test_args_new_from_builder_and_from_dict() -> None:
    a = Args.new(search_schema())
    assert a.schema == search_schema().build()
    assert Args.new(search_schema().build()) == a
    assert a.validate({"q": "cats"}) == {"q": "cats"}


def test_args_from_value_checks_the_schema_now() -> None:
    a = Args.from_value({"type": "object", "properties": {"x": {"type": "integer"}}})
    assert a.violations({"x": 1}) == []
    with pytest.raises(ConfigurationError, match="invalid JSON Schema"):
        Args.from_value({"type": "objectz"})


def test_args_empty_accepts_nothing_but_empty() -> None:
    e = Args.empty()
    assert e.validate(None) == {}
    assert e.validate({}) == {}
    with pytest.raises(ArgumentValidationError):
        e.validate({"x": 1})


def test_validator_compiled_once_per_args(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    real = tools_module.compile_schema

    def counting(schema: dict[str, Any]) -> Any:
        calls.append(schema)
        return real(schema)

    monkeypatch.setattr(tools_module, "compile_schema", counting)
    a = Args.new(search_schema())
    for i in range(5):
        a.validate({"q": f"x{i}"})
        a.violations({"q": ""})
    assert len(calls) == 1
    assert a.validator is a.validator
    Args.new(search_schema()).validate({"q": "y"})
    assert len(calls) == 2


def test_every_violation_reported_with_its_json_path() -> None:
    a = Args.new(search_schema())
    bad = {"limit": 0, "tags": ["a", "a", 3, "d"], "filter": {"field": "author"}, "extra": True}
    with pytest.raises(ArgumentValidationError) as info:
        a.validate(bad)
    got = {(v.path, v.message.split(" ")[0]) for v in info.value.violations}
    paths = {v.path for v in info.value.violations}
    assert {"$", "$.limit", "$.tags", "$.tags[2]", "$.filter", "$.filter.field"} <= paths
    messages = " | ".join(v.message for v in info.value.violations)
    assert '"q" is a required property' in messages
    assert "less than the minimum of 1" in messages
    assert "'extra' was unexpected" in messages
    assert '"exact" is a required property' in messages
    assert len(info.value.violations) >= 7, got
    for v in info.value.violations:
        assert isinstance(v, SchemaViolation)
        assert str(v).startswith(v.path + ": ")
        assert v.schema_path.startswith("$")


def test_none_arguments_are_validated_as_empty_object() -> None:
    a = Args.new(search_schema())
    assert a.violations(None) == [SchemaViolation("$", '"q" is a required property')]


def test_args_json_round_trip_is_the_schema_only() -> None:
    a = Args.new(search_schema())
    a.validate({"q": "x"})  # a compiled validator must not leak into JSON
    data = to_json(a)
    assert data.startswith(b'{"schema":')
    back = from_json(data, Args)
    assert back == a
    assert back.validate({"q": "y"}) == {"q": "y"}


# -- ToolDefinition / Tool / ToolDeclarations --------------------------------------------------------


def _memory_tool() -> Tool:
    add = ToolDefinition(
        name="add",
        description="Remember a fact.",
        arguments=Args.new(scheme.object().required("fact", scheme.string().description("The fact"))),
    )
    remove = ToolDefinition(
        name="remove",
        description="Forget a fact.",
        arguments=Args.new(scheme.object().required("id", scheme.string())),
    )
    replace = ToolDefinition(
        name="replace",
        description="Replace a fact.",
        arguments=Args.new(scheme.object().required("id", scheme.string()).required("fact", scheme.string())),
    )
    return Tool.MultiCommands(
        tool_name="memory", commands=[add, remove, replace], description="Working memory."
    )


def test_tool_definition_defaults_and_function() -> None:
    d = ToolDefinition(name="now")
    assert d.description == "" and d.category == "" and d.returns is None
    assert d.arguments == Args.empty()
    assert d.function() == FunctionSpec("now", "", Args.empty().schema)


def test_single_command_renders_its_definition() -> None:
    d = ToolDefinition(name="search", description="Search the web.", arguments=Args.new(search_schema()))
    t = Tool.SingleCommand(d)
    assert t.name() == "search"
    assert t.functions() == [FunctionSpec("search", "Search the web.", search_schema().build())]
    assert t.resolve({"q": "x"}) == (d, {"q": "x"})


def test_multi_commands_render_as_one_function_with_command_argument() -> None:
    t = _memory_tool()
    [fn] = t.functions()
    assert fn.name == "memory" == t.name()
    params = fn.parameters
    assert params["required"] == ["command"]
    assert params["additionalProperties"] is False
    assert params["properties"]["command"]["enum"] == ["add", "remove", "replace"]
    assert set(params["properties"]) == {"command", "fact", "id"}
    assert params["properties"]["fact"]["description"] == "(for add, replace) The fact"
    assert params["properties"]["id"]["description"] == "(for remove, replace)"
    assert fn.description.splitlines() == [
        "Working memory.",
        "- add: Remember a fact.",
        "- remove: Forget a fact.",
        "- replace: Replace a fact.",
    ]
    assert Args.from_value(params).violations({"command": "add", "fact": "sky is blue"}) == []


def test_multi_commands_resolve_selects_command_and_drops_it() -> None:
    t = _memory_tool()
    definition, args = t.resolve({"command": "replace", "id": "f1", "fact": "new"})
    assert definition.name == "replace"
    assert args == {"id": "f1", "fact": "new"}
    definition.arguments.validate(args)


@pytest.mark.parametrize(
    ("arguments", "got"), [({"fact": "x"}, "missing"), (None, "missing"), ({"command": "wipe"}, "'wipe'")]
)
def test_multi_commands_resolve_rejects_unknown_command(arguments: dict[str, Any] | None, got: str) -> None:
    with pytest.raises(ArgumentValidationError) as info:
        _memory_tool().resolve(arguments)
    [v] = info.value.violations
    assert v.path == "$.command"
    assert "add, remove, replace" in v.message and got in v.message


def test_tool_declarations() -> None:
    shed = Tool.SingleCommand(ToolDefinition(name="shed", description="Find tools."))
    search = Tool.SingleCommand(ToolDefinition(name="search", arguments=Args.new(search_schema())))
    decl = ToolDeclarations(shed=shed, tools=[search, _memory_tool()])
    assert bool(decl) and not bool(ToolDeclarations())
    assert [f.name for f in decl.functions()] == ["shed", "search", "memory"]
    assert decl.find("memory") == _memory_tool()
    assert decl.find("nope") is None
    assert from_json(to_json(decl), ToolDeclarations) == decl


def test_tool_choice_variants_round_trip() -> None:
    choices = [ToolChoice.Auto(), ToolChoice.None_(), ToolChoice.Required(), ToolChoice.Function("search")]
    assert [to_json(c) for c in choices] == [
        b'{"type":"auto"}',
        b'{"type":"none"}',
        b'{"type":"required"}',
        b'{"type":"function","name":"search"}',
    ]
    assert [from_json(to_json(c), ToolChoice) for c in choices] == choices
