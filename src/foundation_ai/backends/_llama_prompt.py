"""Chat messages and prompts of the llama.cpp backend.

1. :func:`chat_messages` turns a ``ModelInteraction`` into chat-template messages (the
   Hugging Face convention: ``{"role", "content"}`` dicts, assistant ``tool_calls``, ``tool``
   results): the system prompt and soul (joined by a blank line, plus the text tool protocol
   when the template has no native tool support) first, then every message oldest-first:

   - ``Messages.User``: role ``user`` / ``system`` as is; ``agent`` and custom roles become
     ``user`` messages marked with the sender (``[agent] …``) so their meaning survives
     (https://platform.openai.com/docs/api-reference/chat); images become a text placeholder (text-only models).
   - ``Messages.Assistant``: consecutive outputs of one turn merge into ONE assistant message;
     tool calls become ``tool_calls`` (native) or protocol ``<tool_call>`` lines (text
     protocol). Thinking, embeddings and error messages are not replayed.
   - ``Messages.ToolResult``: a ``tool`` message with ``tool_call_id`` and ``name`` (native), or
     ``<tool_result>`` blocks in one ``user`` message per run of results (text protocol).

   These messages go to llama.cpp, which renders the model's own chat template (docs/models.md,
   "The in-process llama.cpp engine").

2. :func:`render_prompt` renders a call's own template (``ModelInteraction.chat_template``)
   the way ``transformers`` does it (sandboxed, ``trim_blocks``/``lstrip_blocks``,
   ``raise_exception``, ``strftime_now``, a ``tojson`` that keeps non-ASCII) with
   ``add_generation_prompt=True``, ``bos_token``/``eos_token`` and, for native tool templates,
   ``tools`` in the OpenAI function format; :func:`ensure_single_bos` then makes its tokens start
   with exactly one BOS token (none added when the template already wrote it, duplicates removed).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NoReturn

from ..errors import ConfigurationError
from ..types import (
    AssistantMessage,
    FunctionSpec,
    ImageContent,
    MessageRole,
    ModelInteraction,
    StopReason,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._llama_tools import format_tool_call, format_tool_result, protocol_instructions

__all__ = [
    "CHATML_TEMPLATE",
    "ChatTemplateError",
    "chat_messages",
    "ensure_single_bos",
    "openai_tools",
    "render_prompt",
    "supports_native_tools",
]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""The fallback template (ChatML) for a GGUF without ``tokenizer.chat_template``."""

IMAGE_PLACEHOLDER = "[image omitted: this model reads text only]"

_TOOLS_VAR = re.compile(r"\btools\b")


class ChatTemplateError(ConfigurationError):
    """The chat template failed to render (a Jinja error or the template's ``raise_exception``)."""


def supports_native_tools(template: str) -> bool:
    """True when the Jinja template reads a ``tools`` variable (it renders tool definitions itself)."""
    return _TOOLS_VAR.search(template) is not None


def _text_of(content: Any) -> str:
    if isinstance(content, TextContent):
        return content.content
    if isinstance(content, ImageContent):
        return IMAGE_PLACEHOLDER
    return ""


def openai_tools(functions: Sequence[FunctionSpec]) -> list[dict[str, Any]]:
    """``functions`` in the OpenAI ``tools`` shape (``{"type": "function", "function": {…}}``)."""
    return [
        {
            "type": "function",
            "function": {"name": f.name, "description": f.description, "parameters": f.parameters},
        }
        for f in functions
    ]


def chat_messages(
    interaction: ModelInteraction, *, functions: Sequence[FunctionSpec], native_tools: bool
) -> list[dict[str, Any]]:
    """The chat-template messages for ``interaction`` (see the module docstring).

    ``functions``: the tools offered this turn (the text protocol is described in the system
    prompt when there are some and ``native_tools`` is false).
    """
    out: list[dict[str, Any]] = []
    system_parts = [p for p in (interaction.full_system_prompt(),) if p]
    if functions and not native_tools:
        system_parts.append(protocol_instructions(functions))
    if system_parts:
        out.append({"role": "system", "content": "\n\n".join(system_parts)})

    turn: dict[str, Any] | None = None  # the assistant message being merged
    results: list[str] | None = None  # text-protocol tool results being merged
    for m in interaction.messages:
        if isinstance(m, AssistantMessage):
            results = None
            if isinstance(m.stop_reason, StopReason.Error) and not _text_of(m.content):
                continue
            if not isinstance(m.content, TextContent | ToolCall):
                continue  # thinking, images, embeddings are not replayed to a local model
            if turn is None:
                turn = {"role": "assistant", "content": ""}
                out.append(turn)
            if isinstance(m.content, TextContent):
                _append_text(turn, m.content.content)
            elif native_tools:
                turn.setdefault("tool_calls", []).append(
                    {
                        "id": m.content.id,
                        "type": "function",
                        "function": {"name": m.content.name, "arguments": m.content.arguments or {}},
                    }
                )
            else:
                _append_text(turn, format_tool_call(m.content))
            continue
        turn = None
        if isinstance(m, ToolResultMessage):
            text = _text_of(m.content)
            if m.error_detail is not None and not text:
                text = m.error_detail
            if native_tools:
                results = None
                content = f"Error: {text}" if m.error_detail is not None else text
                out.append(
                    {"role": "tool", "tool_call_id": m.tool_call_id, "name": m.name, "content": content}
                )
            else:
                block = format_tool_result(m.tool_call_id, m.name, text, error=m.error_detail is not None)
                if results is None:
                    results = [block]
                    out.append({"role": "user", "content": block})
                else:
                    results.append(block)
                    out[-1]["content"] = "\n".join(results)
            continue
        results = None
        if isinstance(m, UserMessage):
            out.append(_user_message(m))
    return out


def _append_text(turn: dict[str, Any], text: str) -> None:
    if not text:
        return
    turn["content"] = f"{turn['content']}\n{text}" if turn["content"] else text


def _user_message(m: UserMessage) -> dict[str, Any]:
    text = _text_of(m.content)
    role = m.role
    if role in (MessageRole.User, MessageRole.System):
        return {"role": role, "content": text}
    return {"role": "user", "content": f"[{role}] {text}"}


# --------------------------------------------------------------------------------------------
# Rendering


def _raise(message: str) -> NoReturn:
    raise ChatTemplateError(f"chat template: {message}")


def _tojson(
    value: Any, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False
) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@functools.lru_cache(maxsize=32)
def _compile(template: str) -> Any:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(template)
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(f"chat template does not compile: {exc}") from exc


def render_prompt(
    interaction: ModelInteraction,
    template: str,
    *,
    bos_token: str = "",
    eos_token: str = "",
    functions: Sequence[FunctionSpec] = (),
) -> str:
    """Render ``interaction`` with the Jinja chat ``template`` into the prompt text.

    Native tool support is decided by :func:`supports_native_tools`; ``functions`` are the tools
    offered this turn.

    Raises:
        ChatTemplateError: the template does not compile or fails while rendering.
    """
    native = supports_native_tools(template)
    messages = chat_messages(interaction, functions=functions, native_tools=native)
    variables: dict[str, Any] = {
        "messages": messages,
        "add_generation_prompt": True,
        "bos_token": bos_token,
        "eos_token": eos_token,
    }
    if native and functions:
        variables["tools"] = openai_tools(functions)
    compiled = _compile(template)
    try:
        text: str = compiled.render(**variables)
    except ChatTemplateError:
        raise
    except Exception as exc:  # jinja2.TemplateError, or a template bug (TypeError, KeyError, ...)
        raise ChatTemplateError(f"chat template failed to render: {type(exc).__name__}: {exc}") from exc
    return text


def ensure_single_bos(tokens: Sequence[int], bos: int, add_bos: bool) -> list[int]:
    """``tokens`` starting with exactly one BOS when the model wants one (``add_bos``).

    A BOS the template already wrote is kept (never doubled); repeated leading BOS tokens are
    collapsed to one whatever ``add_bos`` says; ``bos < 0`` (no BOS in the vocabulary) changes
    nothing.
    """
    out = list(tokens)
    if bos < 0:
        return out
    while len(out) >= 2 and out[0] == bos and out[1] == bos:
        del out[0]
    if add_bos and (not out or out[0] != bos):
        out.insert(0, bos)
    return out
