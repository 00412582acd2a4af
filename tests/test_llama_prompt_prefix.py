"""Across the turns of a chat, the llama.cpp prompt of turn n is a prefix of turn n+1's (text
and tokens), so llama.cpp's prompt cache is reused: checked on the bundled model's template."""

from __future__ import annotations

from typing import Any

import pytest

from foundation_ai.schema import scheme
from foundation_ai.types import (
    Args,
    AssistantMessage,
    Messages,
    ModelInteraction,
    TextContent,
    Tool,
    ToolCall,
    ToolDeclarations,
    ToolDefinition,
    ToolResultMessage,
)

pytest.importorskip("xllamacpp")

from foundation_ai.backends import default_model


def answer(text: str) -> AssistantMessage:
    return AssistantMessage(model="smollm2", content=TextContent(text))


def chat_steps() -> list[list[Any]]:
    """What each model call adds to the history before the next call."""
    return [
        [Messages.user("Hi there.")],
        [answer("Hello! How can I help?"), Messages.user("What is 2 + 40?")],
        [
            AssistantMessage(
                model="smollm2", content=ToolCall(id="call_1", name="add", arguments={"a": 2, "b": 40})
            ),
            ToolResultMessage(tool_call_id="call_1", name="add", content=TextContent("42")),
        ],
        [answer("It is 42."), Messages.user("And the weather? Answer in one word.")],
        [answer("Sunny."), Messages.agent("a note from the planner"), Messages.user("Thanks!")],
    ]


ADD = ToolDefinition(
    name="add",
    description="Add two integers.",
    arguments=Args.new(scheme.object().required("a", scheme.integer()).required("b", scheme.integer())),
)


@pytest.mark.parametrize("tools", [False, True], ids=["chat", "with-tools"])
def test_each_turns_prompt_is_a_prefix_of_the_next_turns_prompt(tools: bool) -> None:
    model = default_model()
    shed = ToolDeclarations(tools=[Tool.SingleCommand(ADD)]) if tools else ToolDeclarations()
    history: list[Any] = []
    texts: list[str] = []
    tokens: list[list[int]] = []
    for step in chat_steps():
        history += step
        interaction = ModelInteraction(messages=list(history), system_prompt="Be brief.", tools_shed=shed)
        texts.append(model.render(interaction))
        tokens.append(model.prompt_tokens(interaction))
    for n in range(len(texts) - 1):
        assert texts[n + 1].startswith(texts[n]), (n, texts[n], texts[n + 1])
        assert tokens[n + 1][: len(tokens[n])] == tokens[n], n
    assert len(tokens[-1]) > len(tokens[0])
