"""Typed structured output: schemas every provider's strict mode accepts, generated from msgspec
Structs, dataclasses, TypedDicts, pydantic models, lists, Literals, enums and primitives; answers
decoded and validated into the type; violations sent back for a retry, then a typed error; a
refusal a typed outcome. Checked with a scripted model, the bundled model (llama.cpp grammar)
and the loopback llama.cpp server through ``openai_chat`` (``response_format`` json_schema).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import keyword
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import msgspec
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation_ai.agentic.output import OutputSpec
from foundation_ai.errors import ConfigurationError
from foundation_ai.schema import compile_schema
from foundation_ai.schema.strict import strict_schema, strict_violations
from foundation_ai.schema.typed import inline_refs

# ---------------------------------------------------------------------------------------------
# types used below


class LineItem(msgspec.Struct):
    """One line of an invoice."""

    description: str
    quantity: int
    unit_price: float


class Invoice(msgspec.Struct):
    """An invoice."""

    number: str
    items: list[LineItem]
    total: float
    currency: Literal["EUR", "USD"] = "EUR"
    note: str | None = None


class Address(pydantic.BaseModel):
    street: str
    city: str
    postcode: str | None = None


class Customer(pydantic.BaseModel):
    name: str
    addresses: list[Address]
    vip: bool = False


@dataclasses.dataclass
class Point:
    x: int
    y: int
    label: str = "origin"


class Movie(TypedDict):
    title: str
    year: int
    rating: NotRequired[float]


class Mood(enum.Enum):
    happy = "happy"
    sad = "sad"


# ---------------------------------------------------------------------------------------------
# the checker itself


def test_checker_flags_each_openai_rule() -> None:
    ok = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert strict_violations(ok) == []
    assert strict_violations({"anyOf": [ok]})[0].startswith("$: the root must be an object")
    assert strict_violations({"$ref": "#/$defs/X", "$defs": {"X": ok}})[0].startswith("$: the root")
    open_ = {**ok, "additionalProperties": True}
    assert any("additionalProperties must be false" in v for v in strict_violations(open_))
    partial = {**ok, "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    assert any("every property must be required" in v for v in strict_violations(partial))
    for keyword_ in ("allOf", "oneOf", "not", "if"):
        bad = {**ok, "properties": {"a": {keyword_: [{"type": "string"}]}}}
        assert any(f"{keyword_} is not supported" in v for v in strict_violations(bad)), keyword_
    lengthy = {**ok, "properties": {"a": {"type": "string", "minLength": 2}}}
    assert any("minLength" in v for v in strict_violations(lengthy))
    assert any("format" in v for v in strict_violations({**ok, "properties": {"a": {"format": "uri"}}}))
    assert any(
        "unsupported type" in v for v in strict_violations({**ok, "properties": {"a": {"type": "date"}}})
    )
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(11):
        deep = {"type": "object", "properties": {"n": deep}, "required": ["n"], "additionalProperties": False}
    assert any("10 levels" in v for v in strict_violations(deep))
    many = {
        "type": "object",
        "properties": {"e": {"enum": list(range(1001))}},
        "required": ["e"],
        "additionalProperties": False,
    }
    assert any("enum values" in v for v in strict_violations(many))


def test_checker_adds_anthropic_limits() -> None:
    ranged = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}, "l": {"type": "array", "minItems": 2}},
        "required": ["n", "l"],
        "additionalProperties": False,
    }
    assert strict_violations(ranged, "openai") == []
    found = strict_violations(ranged, "anthropic")
    assert any("minimum" in v for v in found) and any("minItems must be 0 or 1" in v for v in found)


# ---------------------------------------------------------------------------------------------
# schemas of named types


@pytest.mark.parametrize(
    "tp",
    [Invoice, Customer, Point, Movie, list[Invoice], Literal["a", "b"], Mood, int, float, bool, str | None],
)
def test_every_supported_type_gives_a_schema_both_strict_modes_accept(tp: Any) -> None:
    spec = OutputSpec(tp)
    assert strict_violations(spec.schema, "openai") == []
    assert strict_violations(spec.schema, "anthropic") == []
    assert "$ref" not in json.dumps(spec.schema) and "$defs" not in spec.schema
    compile_schema(spec.schema)  # a valid JSON Schema too


def test_object_types_are_sent_as_is_and_others_wrapped_in_result() -> None:
    assert not OutputSpec(Invoice).wrapped and OutputSpec(Invoice).name == "Invoice"
    for tp in (list[Invoice], Literal["a", "b"], Mood, int, str | None):
        spec = OutputSpec(tp)
        assert spec.wrapped and list(spec.schema["properties"]) == ["result"]
    assert OutputSpec(list[Invoice]).name == "result"


def test_optional_fields_become_required_and_nullable_and_null_means_the_default() -> None:
    spec = OutputSpec(Invoice)
    assert spec.schema["required"] == ["number", "items", "total", "currency", "note"]
    assert None in spec.schema["properties"]["currency"]["enum"]
    answer = '{"number": "7", "items": [], "total": 0, "currency": null, "note": null}'
    assert spec.parse(answer) == Invoice(number="7", items=[], total=0.0)


def test_answers_decode_into_each_kind_of_type() -> None:
    assert OutputSpec(Point).parse('{"x": 1, "y": 2, "label": null}') == Point(1, 2)
    assert OutputSpec(Movie).parse('{"title": "Up", "year": 2009, "rating": null}') == {
        "title": "Up",
        "year": 2009,
    }
    c = OutputSpec(Customer).parse(
        '{"name": "Ada", "addresses": [{"street": "1 Main", "city": "X", "postcode": null}], "vip": null}'
    )
    assert isinstance(c, Customer) and isinstance(c.addresses[0], Address) and c.vip is False
    assert OutputSpec(list[Point]).parse('{"result": [{"x": 0, "y": 1, "label": "a"}]}') == [Point(0, 1, "a")]
    assert OutputSpec(Mood).parse('{"result": "sad"}') is Mood.sad
    assert OutputSpec(Literal["a", "b"]).parse('{"result": "b"}') == "b"
    assert OutputSpec(int).parse('```json\n{"result": 42}\n```') == 42


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"number": "7", "items": [], "total": "lots"}', "$.total"),
        ('{"number": "7", "items": [{"description": "x"}], "total": 1}', "quantity"),
        ("The total is 7.", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_a_bad_answer_is_a_value_error_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        OutputSpec(Invoice).parse(text)
    assert problem in str(caught.value)


def test_pydantic_validation_errors_name_the_field() -> None:
    with pytest.raises(ValueError) as caught:
        OutputSpec(Customer).parse('{"name": "Ada", "addresses": [{"street": 3, "city": "X"}], "vip": false}')
    assert "street" in str(caught.value)


@pytest.mark.parametrize("tp", [dict[str, int], Any, tuple[int, str]])
def test_types_no_strict_mode_can_express_are_refused_at_once(tp: Any) -> None:
    with pytest.raises(ConfigurationError):
        OutputSpec(tp)


class Ranged(msgspec.Struct):
    count: Annotated[int, msgspec.Meta(ge=1, le=9)]
    tags: Annotated[list[str], msgspec.Meta(min_length=2)]


def test_constraints_providers_reject_move_into_the_description_and_stay_enforced() -> None:
    spec = OutputSpec(Ranged)
    assert strict_violations(spec.schema, "anthropic") == []
    assert spec.schema["properties"]["count"]["description"] == "Minimum 1; maximum 9"
    with pytest.raises(ValueError, match=r"\$\.count"):
        spec.parse('{"count": 10, "tags": ["a", "b"]}')
    assert spec.parse('{"count": 3, "tags": ["a", "b"]}') == Ranged(3, ["a", "b"])


def test_keyword_named_properties_survive_inlining_and_strictness() -> None:
    raw = {
        "$ref": "#/$defs/T",
        "$defs": {
            "T": {
                "title": "T",
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "$ref": {"type": "string"},
                    "type": {"type": "string"},
                },
                "required": ["title", "$ref", "type"],
            }
        },
    }
    inlined = inline_refs(raw)
    assert (
        set(inlined["properties"]) == {"title", "$ref", "type"}
        and "title" not in inlined.get("required", [])[3:]
    )
    strict = strict_schema(inlined)
    assert strict["required"] == ["title", "$ref", "type"] and "title" not in {
        k for k in strict if k != "properties"
    }


# ---------------------------------------------------------------------------------------------
# property test over generated types

_NAMES = st.sampled_from(
    ["title", "type", "description", "default", "properties", "items", "required", "enum", "format", "const"]
) | st.from_regex(r"\A[a-z][a-z0-9_]{0,8}\Z").filter(
    lambda n: not keyword.iskeyword(n) and not n.startswith("model_")
)

_counter = iter(range(10**9))


def _leaf() -> st.SearchStrategy[Any]:
    def make_enum(values: list[str]) -> Any:
        return enum.Enum(f"E{next(_counter)}", {f"m{i}": v for i, v in enumerate(values)})

    words = st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=3, unique=True)
    return st.one_of(
        st.sampled_from([int, float, str, bool]),
        words.map(lambda vs: Literal[tuple(vs)]),  # type: ignore[misc]
        words.map(make_enum),
    )


def _record(kind: str, fields: list[tuple[str, Any, bool]]) -> Any:
    name = f"R{next(_counter)}"
    seen: dict[str, tuple[Any, bool]] = {}
    for n, t, optional in fields:
        seen.setdefault(n, (t, optional))
    items = sorted(seen.items(), key=lambda kv: kv[1][1])  # required first
    if kind == "struct":
        return msgspec.defstruct(
            name, [(n, t | None, None) if opt else (n, t) for n, (t, opt) in items], kw_only=True
        )
    if kind == "dataclass":
        return dataclasses.make_dataclass(
            name, [(n, t | None, dataclasses.field(default=None)) if opt else (n, t) for n, (t, opt) in items]
        )
    if kind == "typeddict":
        return TypedDict(name, {n: (NotRequired[t] if opt else t) for n, (t, opt) in items})  # type: ignore[misc,operator]
    return pydantic.create_model(
        name, **{n: ((t | None, None) if opt else (t, ...)) for n, (t, opt) in items}
    )


def _types(pydantic_only: bool = False) -> st.SearchStrategy[Any]:
    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        kinds = st.sampled_from(["pydantic"] if pydantic_only else ["struct", "dataclass", "typeddict"])
        fields = st.lists(st.tuples(_NAMES, children, st.booleans()), min_size=1, max_size=4)
        return st.one_of(
            children.map(lambda t: list[t]),  # type: ignore[valid-type]
            children.map(lambda t: t | None),
            st.tuples(kinds, fields).map(lambda kf: _record(*kf)),
        )

    return st.recursive(_leaf(), extend, max_leaves=6)


@st.composite
def _instance(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    if "anyOf" in schema:
        return draw(_instance(draw(st.sampled_from(schema["anyOf"]))))
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    if "const" in schema:
        return schema["const"]
    t = schema.get("type")
    if isinstance(t, list):
        t = draw(st.sampled_from(t))
    if t == "object":
        return {k: draw(_instance(v)) for k, v in schema["properties"].items()}
    if t == "array":
        return draw(st.lists(_instance(schema["items"]), max_size=2))
    return draw(
        {
            "string": st.text(max_size=4),
            "integer": st.integers(-9, 9),
            "number": st.floats(-1e6, 1e6, allow_nan=False),
            "boolean": st.booleans(),
            "null": st.none(),
        }[t]
    )


def _record_types(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["msgspec", "pydantic"]))
    tp = draw(_types(pydantic_only=kind == "pydantic"))
    return tp


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_types_give_strict_schemas_and_strict_answers_decode(data: st.DataObject) -> None:
    """For any generated type (records of every kind with keyword-like field names, lists,
    optionals, Literals, enums): the schema passes OpenAI's and Anthropic's strict-mode rules,
    converts to a llama.cpp grammar, keeps every field name, and any answer valid under it
    decodes into the type."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    tp = _record_types(data.draw)
    spec = OutputSpec(tp)
    assert strict_violations(spec.schema, "openai") == []
    assert strict_violations(spec.schema, "anthropic") == []
    assert json_schema_to_gbnf(json.dumps(spec.schema))
    fields = getattr(tp, "__annotations__", None) or getattr(tp, "model_fields", None) or {}
    if not spec.wrapped:
        assert set(fields) <= set(spec.schema["properties"])
    answer = data.draw(_instance(spec.schema))
    assert compile_schema(spec.schema).is_valid(answer)
    value = spec.parse(json.dumps(answer))
    if isinstance(tp, type) and not spec.wrapped and not hasattr(tp, "__required_keys__"):
        assert isinstance(value, tp)


# ---------------------------------------------------------------------------------------------
# pydantic models as tool parameters


def test_pydantic_models_are_accepted_as_tool_parameters_and_arrive_as_instances() -> None:
    from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel, call, say, tool

    received: list[Any] = []

    @tool
    def register(customer: Customer, tags: list[Address] | None = None) -> str:
        """Register a customer."""
        received.append((customer, tags))
        return f"registered {customer.name}"

    props = register.definition.arguments.schema["properties"]
    assert props["customer"]["properties"]["addresses"]["items"]["required"] == ["street", "city"]
    good = {"customer": {"name": "Ada", "addresses": [{"street": "1 Main", "city": "X"}]}}
    bad = {"customer": {"name": "Bob", "addresses": [{"street": 5, "city": "X"}]}}
    model = ScriptedModel([call("register", good), call("register", bad), say("done")])
    agent = AgentSession.builder(model).with_tools(register).with_store(InMemorySessionStore()).build()
    turn = agent.run_turn("register them")
    customer, tags = received[0]
    assert isinstance(customer, Customer) and isinstance(customer.addresses[0], Address)
    assert customer.vip is False and tags is None
    ok, rejected = turn.tool_results()
    assert ok.error_detail is None and ok.content.content == "registered Ada"
    assert rejected.error_detail is not None and "street" in rejected.error_detail
    assert len(received) == 1  # the invalid call never ran
