"""``ModelInteraction`` + ``ModelParams`` -> an OpenAI Responses API request body.

Pure functions, no I/O. Sources: OpenAI Responses API reference (``POST /v1/responses``: input
items, function tools, ``tool_choice``, ``reasoning``, ``text.format``, ``include``) and
https://platform.openai.com/docs/api-reference/responses.

- ``instructions`` carries ``system_prompt`` and ``soul`` (joined by a blank line).
- ``input`` holds one item per message, in order: user messages as ``message`` items
  (``input_text`` / ``input_image``; System role as ``role: system``, Agent / Tool / custom roles
  as ``user`` text wrapped in a tag naming the role; user messages given together with an image
  are one ``message`` item with ``input_text`` and ``input_image`` parts), assistant text as ``message`` items with
  ``output_text``, tool calls as ``function_call`` items (``call_id``, ``name``, ``arguments``:
  the JSON text of the original object), tool results as ``function_call_output`` items whose
  ``output`` is always a string (an image result becomes a text placeholder plus a user
  message holding the image right after).
- Reasoning items (``ThinkingContent`` from this provider with an ``item_id``) are replayed
  unchanged where they were, i.e. directly before the item that followed them:
  ``{"type": "reasoning", "id", "summary", "encrypted_content"}``; a null ``encrypted_content``
  and an empty summary stay as they are. Thinking from another provider is dropped.
- Assistant text and calls from this provider carry their output item's ``id`` (kept in
  ``Messages.Assistant.signature``) and ``status``: the API pairs a reasoning item with the item
  that follows it by these ids ("reasoning was provided without its required following item").
  With ``store=False`` no ids are sent (nothing is stored to look up) and reasoning travels by
  ``encrypted_content`` alone.
- Reasoning goes only to models that accept it (:func:`accepts_reasoning`, or a
  ``thinking_level`` set): after a fallback from ``gpt-5-mini`` to ``gpt-4.1`` the reasoning
  items, and the item ids that refer to them, are left out.
- The history is sanitized first (``docs/sanitation.md``): ``call_id`` of at most 64
  characters from ``[a-zA-Z0-9_-]`` (call and output alike), malformed arguments as ``{}``.
- Every ``function_call`` gets a ``function_call_output`` (an error output saying it was not run
  when the history has none); an output whose call is not in the input becomes user text.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from ..schema.refs import self_contained
from ..types import (
    AssistantMessage,
    CacheRetention,
    ImageContent,
    MessageRole,
    Messages,
    ModelInteraction,
    ModelParams,
    ModelProviders,
    OutputFormat,
    StopReason,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ToolCall,
    ToolChoice,
    ToolResultMessage,
    UserMessage,
)
from ..types.interaction import is_set
from ._anthropic_request import role_text
from ._sanitize import OPENAI_RESPONSES, mergeable_users, sanitize_history

__all__ = [
    "MappedInput",
    "Pairing",
    "UserItem",
    "add_items",
    "accepts_reasoning",
    "build_request",
    "input_items",
    "is_reasoning_model",
    "message_items",
    "pair_outputs",
]

_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5", "codex")
_ENCODE = msgspec.json.encode


_NON_REASONING_PREFIXES = ("gpt-3", "gpt-4", "chatgpt-4o")


def accepts_reasoning(name: str) -> bool:
    """False for OpenAI models known to take no reasoning items (``gpt-3.5*``, ``gpt-4*`` —
    ``gpt-4o``, ``gpt-4.1``... — and ``chatgpt-4o*``): they answer 400 to a replayed reasoning
    item. True for reasoning models and unknown names (a compatible server's own models)."""
    base = name.rsplit("/", 1)[-1].lower()
    return is_reasoning_model(name) or not base.startswith(_NON_REASONING_PREFIXES)


def is_reasoning_model(name: str) -> bool:
    """True for OpenAI reasoning model names (``o1``, ``o3``, ``o4``, ``gpt-5*``, ``codex``…),
    which reject ``temperature`` / ``top_p`` and return reasoning items."""
    base = name.rsplit("/", 1)[-1].lower()
    return base.startswith(_REASONING_PREFIXES)


def _data_url(img: ImageContent) -> str:
    return f"data:{img.mime_type.value};base64,{img.b64}"


def _user_item(msg: UserMessage) -> dict[str, Any] | None:
    c = msg.content
    role = "system" if msg.role == MessageRole.System else "user"
    if isinstance(c, ImageContent):
        parts: list[dict[str, Any]] = []
        if msg.role not in (MessageRole.User, MessageRole.System):
            parts.append({"type": "input_text", "text": role_text(msg.role, "(image follows)")})
        parts.append({"type": "input_image", "image_url": _data_url(c), "detail": "auto"})
        return {"type": "message", "role": "user", "content": parts}
    if not c.content:
        return None
    text = c.content if role == "system" else role_text(msg.role, c.content)
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def _arguments_text(call: ToolCall) -> str:
    if call.arguments is not None:
        return _ENCODE(call.arguments).decode()
    return call.raw_arguments if call.raw_arguments is not None else "{}"


def _assistant_item(
    msg: AssistantMessage, store: bool | None, keep_reasoning: bool = True
) -> dict[str, Any] | None:
    if isinstance(msg.stop_reason, StopReason.Error):
        return None
    c = msg.content
    ours = msg.provider == ModelProviders.OpenAIResponses
    item: dict[str, Any]
    if isinstance(c, TextContent):
        if not c.content:
            return None
        item = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": c.content, "annotations": []}],
        }
    elif isinstance(c, ToolCall):
        item = {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": _arguments_text(c)}
    elif isinstance(c, ThinkingContent):
        if not ours or not c.item_id:
            return None  # reasoning of another provider cannot be replayed here
        summary = _summary(c.thinking, msg.signature)
        if store is False:  # nothing is stored: only encrypted_content can carry it, no id lookup
            if c.signature is None:
                return None
            return {"type": "reasoning", "summary": summary, "encrypted_content": c.signature}
        return {"type": "reasoning", "id": c.item_id, "summary": summary, "encrypted_content": c.signature}
    else:
        return None
    if (
        ours
        and msg.signature
        and store is not False
        and keep_reasoning
        and not isinstance(c, ThinkingContent)
    ):
        # the output item's own id (msg_... / fc_...): pairs it with the reasoning item before it
        item["id"] = msg.signature
        item["status"] = "completed"
    return item


def _summary(thinking: str, parts_json: str | None) -> list[Any]:
    """The ``summary`` array of a reasoning item: the parts as received (kept as JSON in the
    message signature) while they still make up ``thinking``, else one part (none when empty)."""
    if parts_json:
        try:
            parts = msgspec.json.decode(parts_json)
        except msgspec.DecodeError:
            parts = None
        if (
            isinstance(parts, list)
            and "\n\n".join(p.get("text", "") for p in parts if isinstance(p, dict)) == thinking
        ):
            return parts
    return [{"type": "summary_text", "text": thinking}] if thinking else []


def _result_items(msg: ToolResultMessage) -> list[dict[str, Any]]:
    c = msg.content
    if isinstance(c, ImageContent):
        output = "(the tool returned an image: it follows in the next message)"
        image: dict[str, Any] = {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": f"The image returned by tool {msg.name} (call {msg.tool_call_id}):",
                },
                {"type": "input_image", "image_url": _data_url(c), "detail": "auto"},
            ],
        }
        items: list[dict[str, Any]] = [
            {"type": "function_call_output", "call_id": msg.tool_call_id, "output": output},
            image,
        ]
    else:
        text = c.content or (msg.error_detail or "")
        if msg.error_detail is not None and not text.lower().startswith("error"):
            text = f"Error: {text}"
        items = [{"type": "function_call_output", "call_id": msg.tool_call_id, "output": text}]
    return items


def message_items(m: Any, store: bool | None, keep_reasoning: bool) -> list[dict[str, Any]]:
    """The input items of one sanitized message, before calls and outputs are paired."""
    if isinstance(m, AssistantMessage):
        item = _assistant_item(m, store, keep_reasoning)
        return [] if item is None else [item]
    if isinstance(m, ToolResultMessage):
        return _result_items(m)
    if isinstance(m, UserMessage):
        user = _user_item(m)
        return [] if user is None else [user]
    return []


def input_items(
    messages: list[Messages] | list[Any], *, store: bool | None = None, keep_reasoning: bool = True
) -> list[dict[str, Any]]:
    """The ``input`` array for ``messages`` (oldest first); see the module docstring.

    The history first goes through the sanitation step of ``docs/sanitation.md``
    (:func:`~foundation_ai.backends._sanitize.sanitize_history` with the Responses rules:
    ``call_id`` of at most 64 characters, malformed arguments as ``{}``). Without
    ``keep_reasoning`` (a target model that takes none, :func:`accepts_reasoning`) no
    reasoning item is sent, nor the output-item ids that would ask for one.
    """
    items: list[dict[str, Any]] = []
    last: UserItem | None = None
    sources: list[int] = []
    sanitized = sanitize_history(messages, OPENAI_RESPONSES, keep_thinking=keep_reasoning, sources=sources)
    for j, m in enumerate(sanitized):
        if j and sources[j] != sources[j - 1] + 1:
            last = None  # a message sanitation dropped was between them
        last = add_items(items, last, m, message_items(m, store, keep_reasoning))
    return pair_outputs(items)[0]


UserItem = tuple[UserMessage, dict[str, Any]]
"""A user message and the input item it mapped to, the last item of the items built so far."""


def add_items(
    items: list[dict[str, Any]], last: UserItem | None, m: Any, new: list[dict[str, Any]]
) -> UserItem | None:
    """Appends ``new``, the items of message ``m``, to ``items``; returns what ``last`` is for
    the next message. A user message given together with an image (``ask(["What is this?",
    image])``: ``m`` a user message right after the user message ``last``, either holding an
    image) joins ``last``'s item: one input message with an ``input_text`` and an
    ``input_image`` part."""
    if last is not None and len(new) == 1 and mergeable_users(last[0], m):
        before, part = last[1]["content"], new[0]["content"]
        if any(p["type"] == "input_image" for p in (*before, *part)):
            last[1]["content"] = [*before, *part]
            return last
    items += new
    return (m, new[0]) if isinstance(m, UserMessage) and len(new) == 1 else None


_NONE: frozenset[str] = frozenset()


class Pairing:
    """The function calls of an input prefix whose pairing is final: their ``call_id`` s
    (``calls``), those answered in the prefix (``done``) and those given a "not run" output
    (``missing``)."""

    __slots__ = ("calls", "done", "missing")

    def __init__(self) -> None:
        self.calls: set[str] = set()
        self.done: set[str] = set()
        self.missing: set[str] = set()


def pair_outputs(
    items: list[dict[str, Any]], prior: Pairing | None = None, *, into: Pairing | None = None
) -> tuple[list[dict[str, Any]], list[int], bool]:
    """Every ``function_call`` answered by one ``function_call_output`` after it (a missing one
    says the call was not run); an output before or without its call, or a second output of
    one call, becomes user text naming the call.

    ``prior``: the calls of the items before ``items`` (a prefix whose pairing is final: none
    waits for an output). ``into``: a :class:`Pairing` that receives the calls of ``items``
    when their pairing is final at their end (it may be ``prior``).

    Returns the paired items; for each ``i`` in ``0..len(items)``, the number of paired items
    of ``items[:i]`` when the pairing is final there (no call waiting for an output), else -1;
    and whether an output in ``items`` answers a call of ``prior`` that was given a "not run"
    output (then the prefix is no longer final)."""
    before_calls = prior.calls if prior is not None else _NONE
    before_done = prior.done if prior is not None else _NONE
    before_missing = prior.missing if prior is not None else _NONE
    calls: set[str] = set()
    answered: set[str] = set()
    conflict = False
    for it in items:
        if it["type"] == "function_call":
            calls.add(it["call_id"])
        elif it["type"] == "function_call_output":
            answer: str = it["call_id"]
            if answer in calls or answer in before_calls:
                answered.add(answer)
            conflict = conflict or answer in before_missing
    calls = set()
    out: list[dict[str, Any]] = []
    open_calls: list[str] = []
    waiting: set[str] = set()  # calls answered later, not yet
    done: set[str] = set()
    marks = [0]
    for it in items:
        kind = it["type"]
        cid: str = it.get("call_id", "")
        if kind == "function_call":
            calls.add(cid)
        if kind == "function_call_output" and (
            (cid not in calls and cid not in before_calls) or cid in done or cid in before_done
        ):
            # an output of no call, or a second output of one call: user text naming the call
            out.append(
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {
                            "type": "input_text",
                            "text": f"[result of tool call {cid}]\n{it['output']}",
                        }
                    ],
                }
            )
        else:
            if kind not in ("function_call", "reasoning", "function_call_output") and open_calls:
                out += _missing_outputs(open_calls)
                open_calls = []
            if kind == "function_call":
                if cid in answered:
                    waiting.add(cid)
                else:
                    open_calls.append(cid)
            if kind == "function_call_output":
                done.add(cid)
                waiting.discard(cid)
            out.append(it)
        marks.append(-1 if open_calls or waiting else len(out))
    out += _missing_outputs(open_calls)
    if into is not None and marks[-1] >= 0:
        into.calls |= calls
        into.done |= done
        into.missing |= calls - answered
    return out, marks, conflict


def _missing_outputs(call_ids: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function_call_output",
            "call_id": cid,
            "output": "Error: no result: the tool call was not run.",
        }
        for cid in call_ids
    ]


def _tool_choice(choice: Any) -> Any:
    if choice is None:
        return None
    if isinstance(choice, ToolChoice.Function):
        return {"type": "function", "name": choice.name}
    if isinstance(choice, ToolChoice.Required):
        return "required"
    if isinstance(choice, ToolChoice.None_):
        return "none"
    return "auto"


def _text_format(fmt: Any) -> dict[str, Any] | None:
    if isinstance(fmt, OutputFormat.JsonObject):
        return {"type": "json_object"}
    if isinstance(fmt, OutputFormat.JsonSchema):
        return {
            "type": "json_schema",
            "name": fmt.name,
            "schema": self_contained(fmt.schema),
            "strict": fmt.strict,
        }
    return None


class MappedInput(NamedTuple):
    """An ``input`` array already mapped (the backend's per-session cache): its items, the
    part sent before as ``msgspec.Raw``, and whether any of them is a reasoning item."""

    items: list[Any]
    has_reasoning: bool


def build_request(
    interaction: ModelInteraction,
    params: ModelParams,
    model: str,
    *,
    stream: bool,
    store: bool | None = None,
    mapped: MappedInput | None = None,
) -> dict[str, Any]:
    """The JSON body of ``POST /v1/responses``.

    ``ModelParams`` mapping, of the fields the caller set (:func:`~foundation_ai.types.is_set`):
    ``max_tokens`` -> ``max_output_tokens``; ``temperature`` and
    ``top_p`` (not for reasoning models, see :func:`is_reasoning_model`, nor when a
    ``thinking_level`` is set); ``thinking_level`` -> ``reasoning: {effort, summary: "auto"}``
    (``Off`` sends nothing); ``output_format`` -> ``text.format`` (``json_object`` /
    ``json_schema``); ``cache_retention`` ``Long`` -> ``prompt_cache_retention: "24h"``. The
    API has no ``stop``, ``seed``, ``top_k``, penalties or ``logit_bias``: they are ignored.
    ``include: ["reasoning.encrypted_content"]`` is sent when reasoning is in play (a reasoning
    level, a reasoning model, ``store=False`` or reasoning items in the input). Tools are flat
    function tools with ``strict: false`` (the Responses API defaults to strict schemas).
    ``store`` is sent only when given. ``mapped``: the ``input`` array already mapped
    (:func:`input_items` of the history with ``store`` and ``keep_reasoning`` as here);
    default: mapped here.
    """
    body: dict[str, Any] = {"model": model}
    system = interaction.full_system_prompt()
    if system:
        body["instructions"] = system
    level = params.thinking_level
    reasoning_on = level is not None and level is not ThinkingLevel.Off
    keep = reasoning_on or accepts_reasoning(model)
    if mapped is None:
        items: list[Any] = input_items(interaction.messages, store=store, keep_reasoning=keep)
        has_reasoning = any(it["type"] == "reasoning" for it in items)
    else:
        items, has_reasoning = mapped
    body["input"] = items
    if is_set(params, "max_tokens"):  # only what the caller set: the server's defaults apply
        body["max_output_tokens"] = params.max_tokens
    if not reasoning_on and not is_reasoning_model(model):
        if is_set(params, "temperature"):
            body["temperature"] = params.temperature
        if is_set(params, "top_p"):
            body["top_p"] = params.top_p
    if reasoning_on:
        assert level is not None
        body["reasoning"] = {"effort": level.value, "summary": "auto"}

    functions = interaction.tools_shed.functions()
    if functions:
        body["tools"] = [
            {
                "type": "function",
                "name": f.name,
                "description": f.description,
                "parameters": self_contained(f.parameters),
                "strict": False,
            }
            for f in functions
        ]
        choice = _tool_choice(interaction.tool_choice)
        if choice is not None:
            body["tool_choice"] = choice
    fmt = _text_format(params.output_format)
    if fmt is not None:
        body["text"] = {"format": fmt}
    if params.cache_retention is CacheRetention.Long:
        body["prompt_cache_retention"] = "24h"
    if reasoning_on or is_reasoning_model(model) or store is False or has_reasoning:
        body["include"] = ["reasoning.encrypted_content"]
    if store is not None:
        body["store"] = store
    body["stream"] = stream
    return body
