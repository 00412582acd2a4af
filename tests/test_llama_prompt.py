"""The llama.cpp prompt builder: chat-template messages for every role, template rendering, and
exactly one BOS token (checked by tokenizing with the bundled model's real vocabulary)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from foundation_ai.backends._llama_prompt import (
    CHATML_TEMPLATE,
    IMAGE_PLACEHOLDER,
    ChatTemplateError,
    chat_messages,
    ensure_single_bos,
    render_prompt,
    supports_native_tools,
)
from foundation_ai.types import (
    AssistantMessage,
    FunctionSpec,
    ImageContent,
    MessageRole,
    Messages,
    ModelId,
    ModelInteraction,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

MODEL = ModelId.Name("m")
ADD = FunctionSpec(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)

# A Hermes/Qwen-style template: reads `tools`, renders tool calls and tool results natively.
NATIVE_TEMPLATE = """{%- if tools %}<|im_start|>system
{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}

{% endif %}# Tools
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools><|im_end|>
{% elif messages[0]['role'] == 'system' %}<|im_start|>system
{{ messages[0]['content'] }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'system' and loop.first %}{% continue %}{% endif %}
<|im_start|>{{ message.role }}
{%- if message.content %}
{{ message.content }}{% endif %}
{%- for call in message.tool_calls or [] %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>{% endfor %}
{%- if message.role == 'tool' %} [for {{ message.tool_call_id }}]{% endif %}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def _assistant(content: Any, **kw: Any) -> AssistantMessage:
    return AssistantMessage(model=MODEL, content=content, **kw)


def _history() -> list[Any]:
    return [
        Messages.user("What is 1+2 and 3+4?"),
        _assistant(ThinkingContent("I should call add twice.")),
        _assistant(TextContent("Let me add.")),
        _assistant(ToolCall(id="call_a", name="add", arguments={"a": 1, "b": 2})),
        _assistant(ToolCall(id="call_b", name="add", arguments={"a": 3, "b": 4})),
        ToolResultMessage(tool_call_id="call_a", name="add", content=TextContent("3")),
        ToolResultMessage(
            tool_call_id="call_b", name="add", content=TextContent("boom"), error_detail="boom"
        ),
        _assistant(TextContent(""), stop_reason=StopReason.Error(), error_detail="server fell over"),
        Messages.user("Thanks."),
    ]


def test_system_prompt_and_soul_then_text_protocol() -> None:
    inter = ModelInteraction(system_prompt="Be brief.", soul="You are Ada.", messages=[Messages.user("hi")])
    msgs = chat_messages(inter, functions=[ADD], native_tools=False)
    assert msgs[0]["role"] == "system"
    assert msgs[0]["content"].startswith("Be brief.\n\nYou are Ada.\n\n# Tools")
    assert '{"name": "add"' in msgs[0]["content"]
    assert msgs[1] == {"role": "user", "content": "hi"}
    # native templates get the tools through `tools`, not the system prompt
    native = chat_messages(inter, functions=[ADD], native_tools=True)
    assert native[0] == {"role": "system", "content": "Be brief.\n\nYou are Ada."}
    # no system prompt, no tools: no system message at all
    assert chat_messages(
        ModelInteraction(messages=[Messages.user("x")]), functions=[], native_tools=False
    ) == [{"role": "user", "content": "x"}]


def test_every_user_role_keeps_its_meaning() -> None:
    inter = ModelInteraction(
        messages=[
            Messages.user("human"),
            Messages.agent("peer says hi"),
            Messages.system("Stop and summarise."),
            UserMessage(role=MessageRole.Tool, content=TextContent("ctx")),
            UserMessage(role=MessageRole.Custom("reviewer"), content=TextContent("lgtm")),
            UserMessage(content=ImageContent(b64="AAAA")),
        ]
    )
    assert chat_messages(inter, functions=[], native_tools=False) == [
        {"role": "user", "content": "human"},
        {"role": "user", "content": "[agent] peer says hi"},
        {"role": "system", "content": "Stop and summarise."},
        {"role": "user", "content": "[tool] ctx"},
        {"role": "user", "content": "[reviewer] lgtm"},
        {"role": "user", "content": IMAGE_PLACEHOLDER},
    ]


def test_text_protocol_history_merges_a_turn_and_its_results() -> None:
    msgs = chat_messages(ModelInteraction(messages=_history()), functions=[ADD], native_tools=False)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "user"]
    turn = msgs[2]["content"].split("\n")
    assert turn[0] == "Let me add."
    assert [json.loads(line[len("<tool_call>") : -len("</tool_call>")]) for line in turn[1:]] == [
        {"name": "add", "arguments": {"a": 1, "b": 2}},
        {"name": "add", "arguments": {"a": 3, "b": 4}},
    ]
    results = msgs[3]["content"]
    assert '<tool_result name="add" id="call_a">\n3\n</tool_result>' in results
    assert '<tool_result name="add" id="call_b" error="true">\nboom\n</tool_result>' in results
    assert msgs[4] == {"role": "user", "content": "Thanks."}
    assert "I should call add twice" not in json.dumps(msgs)  # thinking is not replayed
    assert "server fell over" not in json.dumps(msgs)  # error messages are not replayed


def test_native_history_uses_tool_calls_and_tool_role() -> None:
    msgs = chat_messages(ModelInteraction(messages=_history()), functions=[ADD], native_tools=True)
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool", "user"]
    assert msgs[1]["content"] == "Let me add."
    assert [c["function"] for c in msgs[1]["tool_calls"]] == [
        {"name": "add", "arguments": {"a": 1, "b": 2}},
        {"name": "add", "arguments": {"a": 3, "b": 4}},
    ]
    assert [c["id"] for c in msgs[1]["tool_calls"]] == ["call_a", "call_b"]
    assert msgs[2] == {"role": "tool", "tool_call_id": "call_a", "name": "add", "content": "3"}
    assert msgs[3]["content"] == "Error: boom"


def test_render_native_template_with_tools() -> None:
    assert supports_native_tools(NATIVE_TEMPLATE)
    assert not supports_native_tools(CHATML_TEMPLATE)
    inter = ModelInteraction(system_prompt="Be brief.", messages=_history())
    text = render_prompt(inter, NATIVE_TEMPLATE, functions=[ADD])
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n<tools>\n")
    assert '"name": "add"' in text
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}}\n</tool_call>' in text
    assert "[for call_b]" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_render_chatml_fallback_and_generation_prompt() -> None:
    text = render_prompt(ModelInteraction(messages=[Messages.user("hi")]), CHATML_TEMPLATE)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_template_errors_are_typed() -> None:
    inter = ModelInteraction(messages=[Messages.user("hi")])
    with pytest.raises(ChatTemplateError, match="roles must alternate"):
        render_prompt(inter, "{{ raise_exception('roles must alternate') }}")
    with pytest.raises(ChatTemplateError, match="does not compile"):
        render_prompt(inter, "{% for %}")
    with pytest.raises(ChatTemplateError, match="failed to render"):
        render_prompt(inter, "{{ messages[0]['content'] + 1 }}")


def test_ensure_single_bos_rules() -> None:
    assert ensure_single_bos([5, 6], bos=1, add_bos=True) == [1, 5, 6]
    assert ensure_single_bos([1, 5], bos=1, add_bos=True) == [1, 5]
    assert ensure_single_bos([1, 1, 1, 5], bos=1, add_bos=True) == [1, 5]
    assert ensure_single_bos([1, 1, 5], bos=1, add_bos=False) == [1, 5]
    assert ensure_single_bos([5, 6], bos=1, add_bos=False) == [5, 6]
    assert ensure_single_bos([5], bos=-1, add_bos=True) == [5]


# -- with the bundled model's real vocabulary ----------------------------------------------------


@pytest.fixture(scope="module")
def vocab() -> Iterator[Any]:
    pytest.importorskip("xllamacpp")
    from foundation_ai.backends._llamacpp import llamacpp

    model = llamacpp(None, n_ctx=256)
    yield model
    model.close()


def _bos(vocab: Any) -> int:
    (bos,) = vocab.engine.tokenize(vocab.engine.bos_text)
    return int(bos)


def _tokens(vocab: Any, text: str) -> list[int]:
    return ensure_single_bos(vocab.engine.tokenize(text), _bos(vocab), True)


def test_exactly_one_bos_when_the_template_writes_it(vocab: Any) -> None:
    bos = _bos(vocab)
    bos_text = vocab.engine.bos_text
    inter = ModelInteraction(system_prompt="s", messages=[Messages.user("hi")])
    for template in (
        "{{ bos_token }}" + CHATML_TEMPLATE,
        "{{ bos_token }}{{ bos_token }}" + CHATML_TEMPLATE,
        CHATML_TEMPLATE,
    ):
        tokens = _tokens(vocab, render_prompt(inter, template, bos_token=bos_text))
        assert tokens[0] == bos and tokens[1] != bos, template


def test_bundled_template_renders_with_the_gguf_metadata(vocab: Any) -> None:
    template = vocab.engine.props["chat_template"]
    assert not supports_native_tools(template)  # SmolLM2 uses the text protocol
    text = render_prompt(ModelInteraction(messages=[Messages.user("hi")]), template)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
