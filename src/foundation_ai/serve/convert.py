"""OpenAI request bodies to foundation-ai messages.

Chat Completions messages (https://platform.openai.com/docs/api-reference/chat/create):
``system``/``developer`` become ``Messages.system``, ``user`` ``Messages.user``, ``assistant``
text and ``tool_calls`` Assistant outputs, ``tool`` a ``ToolResult``. Responses input
(https://platform.openai.com/docs/api-reference/responses/create): a string, or a list of
``message`` / ``function_call`` / ``function_call_output`` items. Text parts only: an image
part is refused (400) rather than dropped.
"""

from __future__ import annotations

import json
from typing import Any

from ..types import (
    AssistantMessage,
    Messages,
    ModelId,
    OutputFormat,
    TextContent,
    ToolCall,
    ToolResultMessage,
    from_json,
)
from .errors import ApiError

__all__ = ["chat_messages", "output_format", "responses_input", "sampling", "split_prompt"]

_CLIENT = ModelId.Name("client-history")

MAX_TOKENS = 2**31 - 1
"""The largest token limit a request may ask for (a 32-bit signed count, what llama.cpp's
``n_predict`` holds)."""
MAX_SEED = 2**32 - 1
"""The largest ``seed`` (llama.cpp's seeds are unsigned 32-bit; a negative one, which it reads
as "random", is refused rather than silently unseeded)."""
_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _bad(msg: str, param: str) -> ApiError:
    return ApiError(400, msg, param=param)


def _text_of(content: Any, param: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                raise _bad("a content part must be an object", f"{param}[{i}]")
            kind = part.get("type")
            if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                raise _bad(f"content part type {kind!r} is not supported (text only)", f"{param}[{i}]")
        return "".join(out)
    raise _bad("content must be a string or a list of parts", param)


def _arguments(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value: Any = from_json(raw, Any)  # nesting capped (MAX_NESTING)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None
    return None


def chat_messages(messages: Any) -> list[Messages]:
    """Chat Completions ``messages`` as ``Messages``.

    Raises:
        ApiError: (400) not a list, an unknown role, a non-text part.
    """
    if not isinstance(messages, list):
        raise _bad("messages must be a list", "messages")
    out: list[Messages] = []
    for i, m in enumerate(messages):
        p = f"messages[{i}]"
        if not isinstance(m, dict):
            raise _bad("a message must be an object", p)
        role = m.get("role")
        if role in ("system", "developer"):
            out.append(Messages.system(_text_of(m.get("content"), p + ".content")))
        elif role == "user":
            out.append(Messages.user(_text_of(m.get("content"), p + ".content")))
        elif role == "assistant":
            text = _text_of(m.get("content"), p + ".content")
            if text:
                out.append(AssistantMessage(model=_CLIENT, content=TextContent(text)))
            for j, tc in enumerate(m.get("tool_calls") or []):
                fn = tc.get("function") if isinstance(tc, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise _bad("a tool call needs function.name", f"{p}.tool_calls[{j}]")
                call = ToolCall(
                    id=str(tc.get("id") or f"call_{i}_{j}"),
                    name=fn["name"],
                    arguments=_arguments(fn.get("arguments")),
                )
                out.append(AssistantMessage(model=_CLIENT, content=call))
        elif role == "tool":
            out.append(
                ToolResultMessage(
                    tool_call_id=str(m.get("tool_call_id") or ""),
                    name=str(m.get("name") or "tool"),
                    content=TextContent(_text_of(m.get("content"), p + ".content")),
                )
            )
        else:
            raise _bad(f"unknown role {role!r}", p + ".role")
    return out


def responses_input(value: Any, instructions: Any = None) -> list[Messages]:
    """Responses ``input`` (plus ``instructions``, as a system message first) as ``Messages``.

    Raises:
        ApiError: (400) an unsupported item or part, ``instructions`` not a string.
    """
    out: list[Messages] = []
    if instructions is not None and not isinstance(instructions, str):
        raise _bad("instructions must be a string", "instructions")
    if instructions:
        out.append(Messages.system(instructions))
    if isinstance(value, str):
        out.append(Messages.user(value))
        return out
    if not isinstance(value, list):
        raise _bad("input must be a string or a list of items", "input")
    for i, item in enumerate(value):
        p = f"input[{i}]"
        if not isinstance(item, dict):
            raise _bad("an input item must be an object", p)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            text = _text_of(item.get("content"), p + ".content")
            if role in ("system", "developer"):
                out.append(Messages.system(text))
            elif role == "user":
                out.append(Messages.user(text))
            elif role == "assistant":
                out.append(AssistantMessage(model=_CLIENT, content=TextContent(text)))
            else:
                raise _bad(f"unknown role {role!r}", p + ".role")
        elif kind == "function_call":
            out.append(
                AssistantMessage(
                    model=_CLIENT,
                    content=ToolCall(
                        id=str(item.get("call_id") or ""),
                        name=str(item.get("name") or ""),
                        arguments=_arguments(item.get("arguments")),
                    ),
                )
            )
        elif kind == "function_call_output":
            output = item.get("output")
            out.append(
                ToolResultMessage(
                    tool_call_id=str(item.get("call_id") or ""),
                    name="tool",
                    content=TextContent(output if isinstance(output, str) else json.dumps(output)),
                )
            )
        elif kind == "reasoning":
            continue  # our own replayed reasoning: the session keeps the real one
        else:
            raise _bad(f"input item type {kind!r} is not supported", p + ".type")
    return out


def split_prompt(messages: list[Messages], param: str) -> tuple[list[Messages], list[Messages]]:
    """``(history, prompt)``: the prompt is every message after the last assistant output.

    Raises:
        ApiError: (400) nothing to answer (empty, or the last message is an assistant output).
    """
    cut = len(messages)
    while cut > 0 and not isinstance(messages[cut - 1], AssistantMessage):
        cut -= 1
    prompt = messages[cut:]
    if not any(m for m in prompt if not (isinstance(m, Messages.User) and m.role == "system")):
        raise _bad("the last message must be a user or tool message", param)
    for m in prompt:
        if isinstance(m, Messages.User) and isinstance(m.content, TextContent) and not m.content.content:
            raise _bad("a message has empty content", param)
    return messages[:cut], prompt


def sampling(body: dict[str, Any]) -> dict[str, Any]:
    """``ModelParams`` fields a request sets: ``max_tokens`` / ``max_completion_tokens`` /
    ``max_output_tokens`` (1 to :data:`MAX_TOKENS`), ``temperature`` (0-2), ``top_p`` (0-1),
    ``seed`` (0 to :data:`MAX_SEED`), ``stop`` (a string or up to 4). Fields the request leaves out keep the agent's values.

    Raises:
        ApiError: (400) a value of the wrong type or out of range.
    """
    out: dict[str, Any] = {}
    for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        v = body.get(name)
        if v is not None:
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_TOKENS:
                raise _bad(f"{name} must be an integer from 1 to {MAX_TOKENS}", name)
            out["max_tokens"] = v
    for name, hi in (("temperature", 2.0), ("top_p", 1.0)):
        v = body.get(name)
        if v is not None:
            if not isinstance(v, int | float) or isinstance(v, bool) or not 0 <= v <= hi:
                raise _bad(f"{name} must be a number from 0 to {hi:g}", name)
            out[name] = float(v)
    seed = body.get("seed")
    if seed is not None:
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
            raise _bad(f"seed must be an integer from 0 to {MAX_SEED}", "seed")
        out["seed"] = seed
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if not isinstance(stops, list) or len(stops) > 4 or not all(isinstance(x, str) and x for x in stops):
            raise _bad("stop must be a string or a list of up to 4 strings", "stop")
        out["stop_tokens"] = stops
    return out


def output_format(body: dict[str, Any]) -> dict[str, Any]:
    """The answer's format a request asks for, as a ``ModelParams`` override
    (``{"output_format": OutputFormat...}``; ``{}`` for text or when left out): Chat Completions
    ``response_format`` (https://platform.openai.com/docs/api-reference/chat/create#chat-create-response_format:
    ``{"type": "text" | "json_object"}`` or ``{"type": "json_schema", "json_schema": {"name",
    "schema", "strict"}}``) or Responses ``text.format``
    (https://platform.openai.com/docs/api-reference/responses/create#responses-create-text: the
    same with ``name``/``schema``/``strict`` on the format itself). Each backend applies it in its
    own structured-output mode (llama.cpp: a grammar).

    Raises:
        ApiError: (400) a malformed format, an unknown type, a bad ``name`` (1-64 of a-z, A-Z,
            0-9, ``_``, ``-``) or a ``schema`` that is not a JSON object.
    """
    if "response_format" in body:
        fmt, param = body["response_format"], "response_format"
        inner_key: str | None = "json_schema"
    else:
        text = body.get("text")
        if text is None:
            return {}
        if not isinstance(text, dict) or "format" not in text:
            raise _bad('text must be an object with a "format"', "text")
        unknown = sorted(set(text) - {"format", "verbosity"})
        if unknown:
            raise _bad(f"text has unknown fields {unknown}", "text")
        fmt, param, inner_key = text.get("format"), "text.format", None
    if fmt is None:
        return {}
    if not isinstance(fmt, dict):
        raise _bad(f"{param} must be an object", param)
    kind = fmt.get("type")
    if kind == "text":
        return {}
    if kind == "json_object":
        return {"output_format": OutputFormat.JsonObject()}
    if kind != "json_schema":
        raise _bad(
            f"{param}.type must be 'text', 'json_object' or 'json_schema', not {kind!r}", param + ".type"
        )
    spec = fmt.get(inner_key) if inner_key is not None else fmt
    where = f"{param}.{inner_key}" if inner_key is not None else param
    if not isinstance(spec, dict):
        raise _bad(f"{where} must be an object", where)
    name = spec.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= 64 or not set(name) <= _NAME_OK:
        raise _bad(f"{where}.name must be 1 to 64 letters, digits, '_' or '-'", where + ".name")
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise _bad(f"{where}.schema must be a JSON Schema object", where + ".schema")
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise _bad(f"{where}.strict must be a boolean", where + ".strict")
    return {"output_format": OutputFormat.JsonSchema(name, schema, strict=bool(strict))}
