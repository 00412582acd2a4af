"""Every schema we send is self-contained: a property test over generated schemas with
``$defs``/``definitions``, nested refs (pointers into a definition's own ``$defs``) and
recursion, through every backend's request body (OpenAI Chat with native and emulated forced
calls, Responses, Anthropic, the llama.cpp forced-call grammar) and every ``tool_choice``; and
:func:`self_contained` keeps the meaning (the same instances are valid), never fetches, and
refuses a remote or dangling reference with a typed error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foundation_ai.errors import ConfigurationError
from foundation_ai.schema import compile_schema
from foundation_ai.schema.refs import SchemaRefError, self_contained
from foundation_ai.types import (
    Args,
    FunctionSpec,
    Messages,
    ModelInteraction,
    ModelParams,
    Tool,
    ToolChoice,
    ToolDeclarations,
    ToolDefinition,
)

from ._fuzz import fuzz_settings
from ._schema_checks import dangling_refs, nested_defs, sent_schemas

_PRIMS = [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "number", "minimum": 0}]


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A tool-arguments schema: root properties over 1..4 definitions (``$defs`` or
    ``definitions``) that refer to each other (cycles included), one of them with definitions
    of its own reached by a nested pointer."""
    n = draw(st.integers(1, 4))
    names = [f"D{i}" for i in range(n)]
    key = draw(st.sampled_from(["$defs", "definitions"]))
    inner = draw(st.booleans())

    def ref(name: str) -> dict[str, Any]:
        return {"$ref": f"#/{key}/{name}"}

    def value(depth: int) -> dict[str, Any]:
        choices = [st.sampled_from(_PRIMS), st.sampled_from(names).map(ref)]
        if inner:
            choices.append(st.just({"$ref": f"#/{key}/D0/$defs/Inner"}))
        leaf = draw(st.one_of(*choices))
        shape = draw(st.sampled_from(["plain", "array", "nullable", "described"]))
        if shape == "array":
            return {"type": "array", "items": leaf}
        if shape == "nullable":
            return {"anyOf": [leaf, {"type": "null"}]}
        if shape == "described" and "$ref" in leaf:
            return {**leaf, "description": "a sibling keyword beside the reference"}
        return leaf

    defs: dict[str, Any] = {}
    for name in names:
        props = {f"p{j}": value(1) for j in range(draw(st.integers(1, 3)))}
        body: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
        if draw(st.booleans()):
            body["required"] = sorted(props)[:1]
        defs[name] = body
    if inner:
        defs["D0"] = {
            **defs["D0"],
            "$defs": {"Inner": {"type": "object", "properties": {"k": ref(names[-1])}}},
        }
    root_props = {f"r{j}": value(0) for j in range(draw(st.integers(1, 3)))}
    return {"type": "object", "properties": root_props, key: defs}


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["p0", "p1", "p2", "r0", "r1", "k"]), inner, max_size=3)
    ),
    max_leaves=12,
)


def _choices(name: str) -> list[Any]:
    return [None, ToolChoice.Auto(), ToolChoice.None_(), ToolChoice.Required(), ToolChoice.Function(name)]


def _bodies(schema: dict[str, Any], choice: Any) -> list[tuple[str, dict[str, Any]]]:
    from foundation_ai.backends import _anthropic_request, _openai_chat, _responses_request

    tool = Tool.SingleCommand(ToolDefinition(name="walk", description="Walks.", arguments=Args(schema)))
    interaction = ModelInteraction(
        messages=[Messages.user("go")], tools_shed=ToolDeclarations(tools=[tool]), tool_choice=choice
    )
    params = ModelParams()
    return [
        ("openai_chat", _openai_chat.build_request(interaction, params, "gpt-4o-mini")),
        (
            "openai_chat emulated",
            _openai_chat.build_request(
                interaction, params, "smollm2", official=False, emulate_forced_tools=True
            ),
        ),
        ("openai_responses", _responses_request.build_request(interaction, params, "gpt-4.1", stream=True)),
        (
            "anthropic",
            _anthropic_request.build_request(interaction, params, "claude-sonnet-4-5", stream=True),
        ),
    ]


@pytest.mark.fuzz
@fuzz_settings(100)
@given(schemas(), st.lists(_json, min_size=1, max_size=4))
def test_every_schema_sent_is_self_contained_for_every_backend_and_tool_choice(
    schema: dict[str, Any], instances: list[Any]
) -> None:
    from foundation_ai.backends._llama_tools import tool_call_schema

    made = self_contained(schema)
    assert dangling_refs(made) == [] and nested_defs(made) == []
    # the same meaning: jsonschema-rs resolves the original's references itself
    before, after = compile_schema(schema), compile_schema(made)
    for value in [{}, *instances]:
        assert before.is_valid(value) == after.is_valid(value), (value, json.dumps(made))
    for choice in _choices("walk"):
        for backend, body in _bodies(schema, choice):
            docs = list(sent_schemas(body))
            assert docs, (backend, choice)
            for where, doc in docs:
                assert dangling_refs(doc) == [], (backend, choice, where, json.dumps(doc))
                assert nested_defs(doc) == [], (backend, choice, where)
    # llama.cpp in process: the forced-call schema nests the parameters under "arguments"
    call = tool_call_schema([FunctionSpec("walk", "Walks.", schema)])
    assert dangling_refs(call) == [] and nested_defs(call) == [], json.dumps(call)


def test_a_root_recursion_and_an_anchor_resolve_inside_the_document() -> None:
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    made = self_contained(tree)
    assert made["properties"]["kids"]["items"] == {"$ref": "#/$defs/Root"} and "Root" in made["$defs"]
    assert dangling_refs(made) == []
    anchored = {
        "type": "object",
        "properties": {"a": {"$ref": "#leaf"}},
        "$defs": {"L": {"$anchor": "leaf", "type": "integer"}},
    }
    assert self_contained(anchored) == {"type": "object", "properties": {"a": {"type": "integer"}}}


@pytest.mark.parametrize(
    ("ref", "external"),
    [("http://127.0.0.1:9/schema.json", True), ("other.json#/X", True), ("#/$defs/Missing", False)],
)
def test_a_remote_or_dangling_ref_is_a_typed_error_and_never_fetched(ref: str, external: bool) -> None:
    schema = {"type": "object", "properties": {"q": {"$ref": ref}}}
    with pytest.raises(SchemaRefError) as caught:
        self_contained(schema, where="inputSchema")
    assert isinstance(caught.value, ConfigurationError)
    assert caught.value.external is external and caught.value.ref == ref
    assert caught.value.path == "inputSchema.properties.q"
    # the validator never fetches either: compiling the schema as it is fails, without a request
    with pytest.raises(ConfigurationError):
        compile_schema(schema).is_valid({"q": 1})
