"""Seed 000 section 4: ``StopReason`` and ``StopReason.parse`` from provider strings."""

from __future__ import annotations

import pytest

from foundation_ai.types import StopReason, from_json, to_json


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("stop", StopReason.Stop()),  # OpenAI finish_reason
        ("end_turn", StopReason.Stop()),  # Anthropic stop_reason
        ("stop_sequence", StopReason.Stop()),
        ("completed", StopReason.Stop()),  # OpenAI Responses status
        ("length", StopReason.Length()),
        ("max_tokens", StopReason.Length()),
        ("max_output_tokens", StopReason.Length()),  # Responses incomplete_details.reason
        ("tool_calls", StopReason.ToolUse()),
        ("tool_use", StopReason.ToolUse()),
        ("function_call", StopReason.ToolUse()),
        ("error", StopReason.Error()),
        ("aborted", StopReason.Aborted()),
        ("cancelled", StopReason.Aborted()),
        ("TOOL_CALLS", StopReason.ToolUse()),
        (" length ", StopReason.Length()),
    ],
)
def test_parse_known_strings(wire: str, expected: StopReason) -> None:
    assert StopReason.parse(wire) == expected


@pytest.mark.parametrize("wire", ["content_filter", "refusal", "pause_turn", "Something New"])
def test_parse_unknown_is_message_with_original(wire: str) -> None:
    got = StopReason.parse(wire)
    assert got == StopReason.Message(wire)
    assert isinstance(got, StopReason.Message) and got.value == wire
    assert got.as_str() == wire


def test_dataless_variants_compare_equal_and_constants_are_shared() -> None:
    assert StopReason.Stop() == StopReason.STOP
    assert StopReason.parse("stop") is StopReason.STOP
    assert StopReason.Stop() != StopReason.Length()
    assert StopReason.TOOL_USE.as_str() == "tool_use"


@pytest.mark.parametrize(
    "reason",
    [
        StopReason.STOP,
        StopReason.LENGTH,
        StopReason.TOOL_USE,
        StopReason.ERROR,
        StopReason.ABORTED,
        StopReason.Message("x"),
    ],
)
def test_round_trip(reason: StopReason) -> None:
    assert from_json(to_json(reason), StopReason) == reason


def test_json_shape() -> None:
    assert to_json(StopReason.TOOL_USE) == b'{"type":"tool_use"}'
    assert to_json(StopReason.Message("content_filter")) == b'{"type":"message","value":"content_filter"}'


def test_match() -> None:
    def f(r: StopReason) -> str:
        match r:
            case StopReason.ToolUse():
                return "tools"
            case StopReason.Message(value=v):
                return v
            case _:
                return "other"

    assert f(StopReason.parse("tool_calls")) == "tools"
    assert f(StopReason.parse("pause_turn")) == "pause_turn"
    assert f(StopReason.STOP) == "other"


@pytest.mark.parametrize("bad", [None, 5, b"stop"])
def test_parse_rejects_non_str_with_a_type_error(bad: object) -> None:
    """Tester defect 7: ``StopReason.parse(None)`` raised AttributeError."""
    with pytest.raises(TypeError, match=r"StopReason\.parse\(\) takes a str"):
        StopReason.parse(bad)  # type: ignore[arg-type]
