"""Choices accept their obvious strings everywhere a choice is taken, and anything unknown
raises a typed error instead of being silently ignored: ``tool_choice`` on the builder, per
call and on ``ModelInteraction``; ``thinking_level``, ``cache_retention`` and ``output_format``
on ``ModelParams``."""

from __future__ import annotations

import pytest

from foundation_ai import ModelInteraction, ModelParams, ToolChoice
from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel, call, say, tool
from foundation_ai.errors import ConfigurationError, InvalidChoiceError, ToolChoiceError
from foundation_ai.types import (
    CacheRetention,
    OutputFormat,
    ThinkingLevel,
    Tool,
    ToolDeclarations,
    ToolDefinition,
)
from foundation_ai.types.choices import tool_choice_of


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _agent(model: ScriptedModel, choice: object = None) -> AgentSession:
    b = AgentSession.builder(model).with_tools(add).with_store(InMemorySessionStore())
    if choice is not None:
        b = b.with_tool_choice(choice)
    return b.build()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("auto", ToolChoice.Auto()),
        ("none", ToolChoice.None_()),
        ("required", ToolChoice.Required()),
        (" Required ", ToolChoice.Required()),
        ("add", ToolChoice.Function("add")),
    ],
)
def test_per_call_string_reaches_the_model_as_the_typed_choice(text: str, expected: ToolChoice) -> None:
    m = ScriptedModel([call("add", {"a": 1, "b": 2}), say("3")])
    _agent(m).run_turn("1+2", tool_choice=text)
    assert m.interactions[0].tool_choice == expected
    assert m.interactions[1].tool_choice is None  # first generation only, as with the typed value


def test_builder_string_applies_to_every_turn() -> None:
    m = ScriptedModel([call("add", {"a": 1, "b": 2}), say("3"), call("add", {"a": 2, "b": 2}), say("4")])
    agent = _agent(m, "required")
    agent.run_turn("1+2")
    agent.run_turn("2+2")
    assert [i.tool_choice for i in m.interactions] == [ToolChoice.Required(), None] * 2


def test_a_list_of_strings_applies_in_order() -> None:
    m = ScriptedModel([call("add", {"a": 1, "b": 2}), say("3")])
    _agent(m).run_turn("1+2", tool_choice=["add", "none"])
    assert [i.tool_choice for i in m.interactions] == [ToolChoice.Function("add"), ToolChoice.None_()]


@pytest.mark.parametrize("bad", ["requried", "subtract", "", 3, {"type": "auto"}])
def test_unknown_choice_raises_before_the_turn_starts(bad: object) -> None:
    m = ScriptedModel([say("never")])
    agent = _agent(m)
    with pytest.raises(ToolChoiceError) as caught:
        agent.run_turn("hi", tool_choice=bad)
    assert caught.value.offered == ["add"] and "add" in str(caught.value)
    assert m.interactions == [] and agent.messages == []  # nothing sent, nothing stored


def test_builder_rejects_unknown_names_including_typed_ones() -> None:
    with pytest.raises(ToolChoiceError):
        _agent(ScriptedModel([]), "subtract")
    with pytest.raises(ToolChoiceError):
        _agent(ScriptedModel([]), ToolChoice.Function("subtract"))
    with pytest.raises(ToolChoiceError):
        _agent(ScriptedModel([]), ["add", "nope"])


def test_tool_choice_error_is_a_configuration_error_and_a_value_error() -> None:
    with pytest.raises(ConfigurationError):
        tool_choice_of("bogus", [])
    with pytest.raises(ValueError):
        tool_choice_of("bogus", [])


def test_model_interaction_accepts_strings_and_checks_names_against_the_tools_offered() -> None:
    decl = ToolDeclarations(tools=[Tool.SingleCommand(ToolDefinition(name="search"))])
    assert ModelInteraction(tool_choice="required").tool_choice == ToolChoice.Required()
    assert ModelInteraction(tools_shed=decl, tool_choice="search").tool_choice == ToolChoice.Function(
        "search"
    )
    with pytest.raises(ToolChoiceError):
        ModelInteraction(tools_shed=decl, tool_choice="serach")
    with pytest.raises(ToolChoiceError):
        ModelInteraction(tool_choice=1)


def test_model_params_choices_accept_strings() -> None:
    p = ModelParams(thinking_level="High", cache_retention="long", output_format="json_object")
    assert p.thinking_level is ThinkingLevel.High and p.cache_retention is CacheRetention.Long
    assert p.output_format == OutputFormat.JsonObject()
    assert ModelParams(cache_retention="none").cache_retention is CacheRetention.None_
    assert ModelParams(output_format="text").output_format == OutputFormat.Text()


@pytest.mark.parametrize(
    "kwargs", [{"thinking_level": "hgh"}, {"cache_retention": "forever"}, {"output_format": "yaml"}]
)
def test_model_params_unknown_choice_raises(kwargs: dict[str, str]) -> None:
    with pytest.raises(InvalidChoiceError) as caught:
        ModelParams(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == next(iter(kwargs))
