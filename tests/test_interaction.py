"""Seed 000 section 8: ``ModelInteraction`` and ``ModelParams`` (with the seed's defaults)."""

from __future__ import annotations

import msgspec
import pytest

from foundation_ai.types import (
    CacheRetention,
    Messages,
    ModelInteraction,
    ModelParams,
    OutputFormat,
    ThinkingLevel,
    ToolChoice,
    ToolDeclarations,
    from_json,
    to_json,
)


def test_model_params_seed_defaults() -> None:
    p = ModelParams()
    assert (p.max_tokens, p.temperature, p.top_p, p.top_k, p.repeat_penalty) == (2048, 0.7, 0.9, 40.0, 1.1)
    assert p.seed is None and p.stop_tokens == []
    assert p.thinking_level is None and p.thinking_budget is None and p.cache_retention is None
    assert p.output_format == OutputFormat.Text()
    assert p.frequency_penalty is None and p.presence_penalty is None and p.logit_bias is None
    assert to_json(p) == b"{}"
    assert from_json(b"{}", ModelParams) == p


def test_model_params_with_changes_one_field() -> None:
    p = ModelParams().with_(temperature=0.0, thinking_level=ThinkingLevel.Medium)
    assert p.temperature == 0.0 and p.thinking_level is ThinkingLevel.Medium
    assert p.max_tokens == 2048
    with pytest.raises(AttributeError):
        p.temperature = 1.0  # type: ignore[misc]


def test_model_params_enums_serialize_as_strings() -> None:
    p = ModelParams(thinking_level=ThinkingLevel.High, cache_retention=CacheRetention.None_)
    raw = msgspec.json.decode(to_json(p))
    assert raw == {"thinking_level": "high", "cache_retention": "none"}


def test_output_format_variants() -> None:
    schema = OutputFormat.JsonSchema(name="answer", schema={"type": "object"})
    assert schema.strict is True
    for f in (OutputFormat.Text(), OutputFormat.JsonObject(), schema):
        assert from_json(to_json(f), OutputFormat) == f


def test_model_interaction_defaults() -> None:
    i = ModelInteraction()
    assert i.messages == [] and i.system_prompt is None and i.soul is None
    assert i.tools_shed == ToolDeclarations() and not i.tools_shed
    assert i.chat_template is None and i.tool_choice is None
    assert i.full_system_prompt() is None


@pytest.mark.parametrize(
    ("system", "soul", "expected"),
    [
        ("Be brief.", None, "Be brief."),
        (None, "A calm librarian.", "A calm librarian."),
        ("Be brief.", "A calm librarian.", "Be brief.\n\nA calm librarian."),
        ("", "", None),
    ],
)
def test_full_system_prompt_joins_soul_with_blank_line(
    system: str | None, soul: str | None, expected: str | None
) -> None:
    assert ModelInteraction(system_prompt=system, soul=soul).full_system_prompt() == expected


def test_model_interaction_round_trip() -> None:
    i = ModelInteraction(
        messages=[Messages.user("hi"), Messages.system("be brief")],
        system_prompt="s",
        tool_choice=ToolChoice.None_(),
    )
    assert from_json(to_json(i), ModelInteraction) == i
