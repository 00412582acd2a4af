"""Structured output, round 3: an open mapping is the same typed error whatever the type source,
``strict=False`` (per call and on the builder) sends a non-strict schema and still validates
locally, recursive types go through root ``$defs`` on every backend (self-contained, closed) and
a three-level answer decodes, and keywords a grammar or strict mode cannot enforce are moved into
the description, documented per keyword, and checked locally."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any, TypedDict

import msgspec
import pydantic
import pytest

from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel, say
from foundation_ai.agentic.output import OutputSpec
from foundation_ai.errors import ConfigurationError, OutputValidationError, TurnFailedError
from foundation_ai.schema import compile_schema, violations_of
from foundation_ai.schema.strict import strict_violations
from foundation_ai.types import Messages, ModelInteraction, ModelParams

from ._schema_checks import dangling_refs, nested_defs, open_objects, sent_schemas

DOCS = Path(__file__).resolve().parent.parent / "docs" / "structured-output.md"


class PydanticOpen(pydantic.BaseModel):
    name: str
    payload: dict[str, Any]


class TypedDictOpen(TypedDict):
    name: str
    payload: dict[str, Any]


@dataclasses.dataclass
class DataclassOpen:
    name: str
    payload: dict  # type: ignore[type-arg]


class StructOpen(msgspec.Struct):
    name: str
    payload: dict  # type: ignore[type-arg]


class StructOpenTyped(msgspec.Struct):
    name: str
    payload: dict[str, int]


@pytest.mark.parametrize("tp", [PydanticOpen, TypedDictOpen, DataclassOpen, StructOpen, StructOpenTyped])
def test_an_open_mapping_is_a_typed_error_naming_the_field_for_every_type_source(tp: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"\$\.payload: an open mapping") as caught:
        OutputSpec(tp)
    assert "strict=False" in str(caught.value)  # the documented way out is named
    with pytest.raises(ConfigurationError, match=r"\$\.payload"):
        AgentSession.builder(ScriptedModel([])).with_output_type(tp)


def _agent(model: ScriptedModel, **output: Any) -> AgentSession:
    b = AgentSession.builder(model).with_store(InMemorySessionStore())
    if output:
        b = b.with_output_type(output.pop("tp"), **output)
    return b.build()


def test_strict_false_sends_a_non_strict_schema_and_still_validates_locally() -> None:
    good = '{"name": "n", "payload": {"a": 1, "b": [true]}}'
    # on the builder
    model = ScriptedModel([say('{"name": "n", "payload": 3}'), say(good)])
    agent = _agent(model, tp=DataclassOpen, strict=False)
    got = agent.ask("go")
    assert got == DataclassOpen("n", {"a": 1, "b": [True]})
    fmt = model.params[0].output_format  # type: ignore[union-attr]
    assert fmt.strict is False and fmt.schema["properties"]["payload"] == {"type": "object"}
    # the first answer broke the type: sent back with the error, as in strict mode
    retry = model.interactions[1].messages[-1]
    assert "$.payload" in retry.content.content  # type: ignore[union-attr]
    # per call: an OutputSpec with strict=False, over a session without an output type
    model = ScriptedModel([say(good)])
    assert _agent(model).ask("go", output_type=OutputSpec(StructOpen, strict=False)) == StructOpen(
        "n", {"a": 1, "b": [True]}
    )
    assert model.params[0].output_format.strict is False  # type: ignore[union-attr]
    # local validation still ends the turn after the retries
    model = ScriptedModel([say('{"name": 1, "payload": {}}')] * 3)
    with pytest.raises(TurnFailedError) as caught:
        _agent(model).ask("go", output_type=OutputSpec(PydanticOpen, strict=False, retries=1))
    assert isinstance(caught.value, OutputValidationError)


class Node(msgspec.Struct):
    name: str
    children: list[Node] = []


@dataclasses.dataclass
class A:
    label: str
    bs: list[B]


@dataclasses.dataclass
class B:
    weight: int
    a: A | None = None


class PNode(pydantic.BaseModel):
    name: str
    children: list[PNode] = []


THREE = {"name": "root", "children": [{"name": "mid", "children": [{"name": "leaf", "children": []}]}]}


def _bodies(spec: OutputSpec) -> list[tuple[str, dict[str, Any]]]:
    from foundation_ai.backends import _anthropic_request, _openai_chat, _responses_request

    interaction = ModelInteraction(messages=[Messages.user("tree")])
    params = ModelParams(output_format=spec.output_format())
    return [
        ("openai_chat", _openai_chat.build_request(interaction, params, "gpt-4o-mini")),
        ("openai_responses", _responses_request.build_request(interaction, params, "gpt-4.1", stream=True)),
        (
            "anthropic",
            _anthropic_request.build_request(interaction, params, "claude-sonnet-4-5", stream=True),
        ),
    ]


@pytest.mark.parametrize("tp", [Node, A, PNode])
def test_recursive_output_types_go_through_defs_on_every_backend_and_a_three_level_answer_decodes(
    tp: Any,
) -> None:
    spec = OutputSpec(tp)
    schema = spec.schema
    assert schema["type"] == "object" and "$defs" in schema  # the root is the object, not a $ref
    assert strict_violations(schema, "openai") == []  # OpenAI strict mode: recursion via $defs is allowed
    assert dangling_refs(schema) == [] and nested_defs(schema) == [] and open_objects(schema) == []
    for backend, body in _bodies(spec):
        sent = dict(sent_schemas(body))
        if backend == "anthropic":
            # Anthropic's structured outputs refuse recursive schemas: an instruction instead
            assert "output_config" not in body and '"$defs"' in body["system"]
            continue
        doc = sent["response_format" if backend == "openai_chat" else "text.format"]
        assert doc == schema
        assert dangling_refs(doc) == [] and nested_defs(doc) == [] and open_objects(doc) == []
    # the llama.cpp grammar (in process) and llama-server (response_format above) read the refs
    xllamacpp = pytest.importorskip("xllamacpp")
    assert "%json" in xllamacpp.json_schema_to_grammar(schema)
    answer = (
        THREE
        if tp is not A
        else {"label": "x", "bs": [{"weight": 1, "a": {"label": "y", "bs": [{"weight": 2, "a": None}]}}]}
    )
    assert violations_of(compile_schema(schema), answer) == []
    model = ScriptedModel([say(json.dumps(answer))])
    got = _agent(model).ask("tree", output_type=tp)
    if tp is Node:
        assert got == Node("root", [Node("mid", [Node("leaf")])])
    elif tp is PNode:
        assert got.children[0].children[0].name == "leaf"
    else:
        assert got == A("x", [B(1, A("y", [B(2)]))])


class Coded(msgspec.Struct):
    code: Annotated[str, msgspec.Meta(pattern="^[A-Z]{3}-[0-9]{4}$", max_length=8)]
    count: Annotated[int, msgspec.Meta(ge=1, le=9)]


def test_a_pattern_is_moved_into_the_description_not_enforced_by_a_grammar_and_validated_locally() -> None:
    spec = OutputSpec(Coded)
    code = spec.schema["properties"]["code"]
    assert "pattern" not in code and "maxLength" not in code
    assert "pattern" in code["description"] and "^[A-Z]{3}-[0-9]{4}$" in code["description"]
    with pytest.raises(ValueError, match=r"\$\.code"):
        spec.parse('{"code": "abc-1", "count": 3}')  # what a grammar let through is caught here
    assert spec.parse('{"code": "ABC-1234", "count": 3}') == Coded("ABC-1234", 3)
    # documented per keyword, not only in a docstring
    text = DOCS.read_text()
    for keyword in ("pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
                    "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems",
                    "minProperties", "maxProperties", "format"):  # fmt: skip
        assert f"| `{keyword}` |" in text, keyword
