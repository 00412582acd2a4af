"""OpenAI Chat Completions: the request body (:func:`build_request`, :func:`build_messages`).

Request mapping (https://platform.openai.com/docs/api-reference/chat): the system prompt plus ``soul`` is the first ``system``
message; a ``Messages.User`` with role System is a ``system`` message, role Agent (or Tool, or a
custom role) a ``user`` message with ``name`` set to the role; the Assistant outputs of one turn
become ONE assistant message (text in ``content``, every call in ``tool_calls``, ``content:
null`` when tool-only; ``""`` with ``tool_call_content=""``), arguments re-sent as the
JSON text of the original object (``{}`` for arguments that never parsed); the history is
sanitized first (``docs/sanitation.md``: call ids of at most 40 characters, every call answered);
thinking is not replayed as text (Chat Completions has no field for it; signatures of other
providers are invalid here), but the continuation tokens a compatible server documents go back
to that same server only (``Messages.Assistant.origin``): a Gemini ``thought_signature`` on its
tool call, OpenRouter ``reasoning_details``, Gemini's message ``extra_content`` and, on a turn
that called tools, ``reasoning_content`` (docs/providers.md); tool results are ``role: tool`` messages; an image in a user message
is an ``image_url`` data URL, and user messages given together with an image (``ask(["What is
this?", image])``) are one user message with ``text`` and ``image_url`` parts; a tool result holding an image becomes a placeholder text in the
tool message and a user message with the image after the run of tool messages.

Forced tool calls: against a loopback server (llama-server, Ollama, LM Studio on 127.0.0.1) a
``ToolChoice.Required`` / ``Function`` is sent by default as a ``response_format`` JSON Schema
``{"name", "arguments"}`` (grammar-enforced) and the answer parsed into one ``ToolCall``,
because llama-server ignores ``tool_choice`` for models whose chat template has no tool support;
``forced_tool_mode="native"`` turns this off (see :func:`openai_chat`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ..schema.refs import self_contained
from ..types import (
    AssistantMessage,
    ImageContent,
    MessageRole,
    ModelInteraction,
    ModelParams,
    OutputFormat,
    StopReason,
    TextContent,
    ThinkingLevel,
    ToolCall,
    ToolChoice,
    ToolResultMessage,
    UserMessage,
)
from ..types.interaction import CacheRetention, is_set
from ._responses_request import is_reasoning_model
from ._sanitize import OPENAI_CHAT, mergeable_users, sanitize_history

if TYPE_CHECKING:
    from ._openai_chat import WireCache

__all__ = ["IMAGE_PLACEHOLDER", "build_messages", "build_request", "wire_messages"]

IMAGE_PLACEHOLDER = "[The tool returned an image; it follows in the next user message.]"
_NAME_OK = re.compile(r"[^a-zA-Z0-9_-]")


def _role_name(role: str) -> str:
    return _NAME_OK.sub("_", role)[:64] or "user"


def _data_url(img: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{img.mime_type.value};base64,{img.b64}"}}


def _args_text(call: ToolCall) -> str:
    if call.arguments is not None:
        return msgspec.json.encode(call.arguments).decode()
    return call.raw_arguments if call.raw_arguments is not None else "{}"


def _replay_fields(turn: dict[str, Any], m: AssistantMessage, origin: str | None) -> None:
    """Put the continuation fields the server sent on its message (kept as a JSON object in
    ``m.signature``: ``reasoning_details``, ``extra_content``, ``reasoning_content``) back on the
    wire assistant message, when ``m`` came from the server this request goes to."""
    if not m.signature or m.origin is None or m.origin != origin:
        return
    try:
        fields = msgspec.json.decode(m.signature)
    except msgspec.DecodeError:
        return
    if not isinstance(fields, dict):
        return
    for key in ("reasoning_details", "extra_content", "reasoning_content"):
        if key in fields:
            turn[key] = fields[key]


def build_messages(
    interaction: ModelInteraction, *, tool_call_content: str | None = None, origin: str | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` array for ``interaction`` (see the module docstring for the rules).

    The history first goes through the sanitation step of ``docs/sanitation.md``
    (:func:`~foundation_ai.backends._sanitize.sanitize_history` with the OpenAI Chat rules: ids
    of at most 40 characters, malformed arguments as ``{}``); then every
    assistant message with ``tool_calls`` is followed directly by one ``tool`` message per
    call (:func:`pair_tool_messages`). ``tool_call_content`` is the ``content`` of an assistant
    message holding only tool calls: ``None`` (JSON ``null``, the default) or ``""`` for
    servers that reject ``null``.

    ``origin`` is the server the request goes to (:func:`origin_of`): continuation tokens of
    messages from that same server are replayed where it expects them (a Gemini
    ``thought_signature`` in the tool call's ``extra_content``; ``reasoning_details``,
    ``extra_content`` and, on a tool-call turn, ``reasoning_content`` on the assistant message),
    and never to another server (docs/providers.md).
    """
    out: list[dict[str, Any]] = []
    system = interaction.full_system_prompt()
    if system:
        out.append({"role": "system", "content": system})
    sources: list[int] = []
    history = sanitize_history(interaction.messages, OPENAI_CHAT, sources=sources)
    out.extend(wire_messages(history, tool_call_content=tool_call_content, origin=origin, sources=sources))
    return pair_tool_messages(out)


def wire_messages(
    history: Sequence[Any],
    *,
    tool_call_content: str | None = None,
    origin: str | None = None,
    sources: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """The wire messages of an already sanitized slice of a history (no system prompt, before
    :func:`pair_tool_messages`); see :func:`build_messages`. A slice that starts after a user
    message maps exactly as it does inside the whole history. ``sources``: each message's index
    in the history before sanitation (``sanitize_history(sources=...)``; default: none was
    dropped): user messages join into one only where they were next to each other."""
    out: list[dict[str, Any]] = []
    turn: dict[str, Any] | None = None  # the assistant message being built
    images: list[dict[str, Any]] = []  # images from tool results, flushed after the tool run
    last_user: dict[str, Any] | None = None  # the last plain user message mapped

    def flush_images() -> None:
        if images:
            out.extend(images)
            images.clear()

    for j, m in enumerate(history):
        follows = j > 0 and (sources is None or sources[j] == sources[j - 1] + 1)
        joinable, last_user = (last_user if follows else None), None
        if isinstance(m, AssistantMessage):
            flush_images()
            c = m.content
            if isinstance(m.stop_reason, StopReason.Error) and not (isinstance(c, TextContent) and c.content):
                continue  # an error record is not something the model said
            if turn is None:
                turn = {"role": "assistant", "content": None}
                out.append(turn)
            if isinstance(c, TextContent):
                if c.content:
                    turn["content"] = (turn["content"] or "") + c.content
            elif isinstance(c, ToolCall):
                call: dict[str, Any] = {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _args_text(c)},
                }
                if c.signature is not None and m.origin is not None and m.origin == origin:
                    call["extra_content"] = {"google": {"thought_signature": c.signature}}
                turn.setdefault("tool_calls", []).append(call)
            _replay_fields(turn, m, origin)
            # ThinkingContent, ImageContent, Embedding: no Chat Completions field
            continue
        if turn is not None and turn["content"] is None and "tool_calls" not in turn:
            out.pop()  # a turn of thinking only: nothing to send (the turn is always last)
        turn = None
        if isinstance(m, ToolResultMessage):
            c = m.content
            if isinstance(c, ImageContent):
                text = IMAGE_PLACEHOLDER
                images.append({"role": "user", "content": [_data_url(c)]})
            else:
                text = c.content
            if m.error_detail is not None and not text:
                text = m.error_detail
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": text})
            continue
        flush_images()
        assert isinstance(m, UserMessage)
        content: Any = _data_url(m.content) if isinstance(m.content, ImageContent) else m.content.content
        if isinstance(m.content, ImageContent):
            content = [content]
        if (
            m.role == MessageRole.User
            and joinable is not None
            and out[-1] is joinable
            and _merge_parts(joinable, content)
        ):  # text and an image given together: one user message
            last_user = joinable
            continue
        if m.role == MessageRole.System:
            if isinstance(content, list):
                out.append({"role": "user", "name": "system", "content": content})
            else:
                out.append({"role": "system", "content": content})
        elif m.role == MessageRole.User:
            last_user = {"role": "user", "content": content}
            out.append(last_user)
        else:  # agent, tool context, custom roles keep who spoke
            out.append({"role": "user", "name": _role_name(m.role), "content": content})
    if turn is not None and turn["content"] is None and "tool_calls" not in turn:
        out.pop()
    flush_images()
    if tool_call_content is not None:
        for msg in out:
            if msg["role"] == "assistant" and msg["content"] is None:
                msg["content"] = tool_call_content
    return out


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if content else []


def _merge_parts(msg: dict[str, Any], content: Any) -> bool:
    """Adds ``content`` to the user message ``msg`` just before it when either holds an image
    (``ask(["What is this?", image])``: one user message with a text part and an
    ``image_url`` part, https://platform.openai.com/docs/guides/images-vision); two texts
    stay two messages. True when merged."""
    if not isinstance(content, list) and not isinstance(msg["content"], list):
        return False
    if not isinstance(content, list) and not content:
        return True  # an empty text adds nothing to the message with the image
    msg["content"] = _parts(msg["content"]) + _parts(content)
    return True


_NOT_RUN = "No result: the tool call was not run."


def pair_tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every assistant message with ``tool_calls`` directly followed by exactly one ``tool``
    message per call, in call order (OpenAI rejects an unanswered call and a ``tool`` message
    that answers no preceding call): a missing answer becomes a ``tool`` message saying the
    call was not run; an answer to no call of the preceding assistant message (or a second
    answer) becomes ``user`` text naming the call; user messages met before the answers move
    after them."""
    out: list[dict[str, Any]] = []
    i = 0
    n = len(messages)
    while i < n:
        msg = messages[i]
        i += 1
        if msg["role"] == "tool":
            out.append(_orphan_tool(msg))
            continue
        out.append(msg)
        calls = [c["id"] for c in msg.get("tool_calls", ())] if msg["role"] == "assistant" else []
        if not calls:
            continue
        answers: dict[str, dict[str, Any]] = {}
        later: list[dict[str, Any]] = []
        while i < n and messages[i]["role"] != "assistant":
            nxt = messages[i]
            i += 1
            if nxt["role"] == "tool" and nxt["tool_call_id"] in calls and nxt["tool_call_id"] not in answers:
                answers[nxt["tool_call_id"]] = nxt
            elif nxt["role"] == "tool":
                later.append(_orphan_tool(nxt))
            else:
                later.append(nxt)
        for cid in calls:
            out.append(answers.get(cid) or {"role": "tool", "tool_call_id": cid, "content": _NOT_RUN})
        out.extend(later)
    return out


def _orphan_tool(msg: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": f"[result of tool call {msg['tool_call_id']}]\n{msg['content']}"}


def _boundary(messages: Sequence[Any], start: int) -> int:
    """The end of the longest prefix of ``messages`` (at least ``start``) that ends on a user
    message with text or an image: after it, the mapping starts afresh (no assistant message
    being built, no image waiting, no user message joining the one before)."""
    for k in range(len(messages), start, -1):
        m = messages[k - 1]
        if k < len(messages) and mergeable_users(m, messages[k]):
            continue
        if isinstance(m, UserMessage):
            c = m.content
            if not (isinstance(c, TextContent) and not c.content.strip()):
                return k
    return start


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, ToolChoice.Function):
        return {"type": "function", "function": {"name": choice.name}}
    if isinstance(choice, ToolChoice.Required):
        return "required"
    if isinstance(choice, ToolChoice.None_):
        return "none"
    return "auto"


def forced_call_schema(interaction: ModelInteraction) -> tuple[dict[str, Any], str] | None:
    """For a forcing ``tool_choice`` (``Required`` or ``Function``) with tools on offer: the JSON
    Schema of ``{"name": <tool>, "arguments": {...}}`` (one branch per allowed tool) and the
    instruction text; ``None`` otherwise."""
    choice = interaction.tool_choice
    if not isinstance(choice, ToolChoice.Required | ToolChoice.Function):
        return None
    fns = interaction.tools_shed.functions()
    if isinstance(choice, ToolChoice.Function):
        fns = [f for f in fns if f.name == choice.name]
    if not fns:
        return None
    branches = [
        {
            "type": "object",
            "properties": {"name": {"type": "string", "enum": [f.name]}, "arguments": f.parameters},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for f in fns
    ]
    schema = self_contained(branches[0] if len(branches) == 1 else {"anyOf": branches})
    lines = [
        "Call a tool now. Reply with only a JSON object "
        '{"name": "<tool name>", "arguments": {...}} and nothing else. Tools:'
    ]
    lines += [
        f"- {f.name}: {f.description} Arguments schema: {msgspec.json.encode(f.parameters).decode()}"
        for f in fns
    ]
    return schema, "\n".join(lines)


def _add_instruction(messages: list[dict[str, Any]], text: str) -> None:
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        messages[0] = {**messages[0], "content": messages[0]["content"] + "\n\n" + text}
    else:
        messages.insert(0, {"role": "system", "content": text})


def build_request(
    interaction: ModelInteraction,
    params: ModelParams,
    model: str,
    *,
    official: bool = True,
    stream: bool = True,
    emulate_forced_tools: bool = False,
    tool_call_content: str | None = None,
    origin: str | None = None,
    wire_cache: WireCache | None = None,
) -> dict[str, Any]:
    """The Chat Completions request body (a JSON-ready dict).

    With ``wire_cache``, the history's messages already sent are ``msgspec.Raw`` items taken
    from it (the same bytes once encoded with ``msgspec.json.encode``).

    ``messages`` is :func:`build_messages` (the sanitation step of ``docs/sanitation.md``
    included; ``tool_call_content`` as there; ``origin``, the server the request goes to, for
    replaying continuation tokens).

    With ``emulate_forced_tools`` and a forcing ``tool_choice``, the call is requested through
    ``response_format`` instead of ``tools`` (see ``openai_chat(forced_tool_mode=...)``).

    ``ModelParams`` mapping, of the fields the caller set (:func:`~foundation_ai.types.is_set`;
    docs/models.md, "Parameters"): ``max_tokens`` (``max_completion_tokens`` on OpenAI's host),
    ``temperature``, ``top_p`` (both left out when a reasoning effort is set, and for OpenAI
    reasoning models ``o1*``, ``o3*``, ``o4*``, ``gpt-5*``, ``codex*``, which reject them:
    https://platform.openai.com/docs/guides/reasoning), ``seed``,
    ``stop`` (first 4 of ``stop_tokens``), ``frequency_penalty``, ``presence_penalty``,
    ``logit_bias``, ``reasoning_effort`` (from ``thinking_level``), ``prompt_cache_retention``
    (``"24h"`` for ``CacheRetention.Long``, OpenAI's host only), ``response_format`` (from
    ``output_format``). ``top_k`` and ``repeat_penalty`` are not OpenAI fields: ignored (use
    ``extra_body`` for servers that take them).
    """
    forced = forced_call_schema(interaction) if emulate_forced_tools else None
    if wire_cache is not None and forced is None:
        messages = wire_cache.messages(interaction, tool_call_content=tool_call_content, origin=origin)
    else:
        messages = build_messages(interaction, tool_call_content=tool_call_content, origin=origin)
    body: dict[str, Any] = {"model": model, "messages": messages}
    fns = interaction.tools_shed.functions()
    if forced is not None:
        _add_instruction(body["messages"], forced[1])
        fns = []
    if fns:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": f.name,
                    "description": f.description,
                    "parameters": self_contained(f.parameters),
                },
            }
            for f in fns
        ]
        if interaction.tool_choice is not None:
            body["tool_choice"] = _tool_choice(interaction.tool_choice)
    _add_params(body, params, model, official)
    response_format = _response_format(forced, params.output_format)
    if response_format is not None:
        body["response_format"] = response_format
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _add_params(body: dict[str, Any], params: ModelParams, model: str, official: bool) -> None:
    """The ``ModelParams`` fields of a request body (the mapping of :func:`build_request`)."""
    if is_set(params, "max_tokens"):  # only what the caller set: the server's defaults apply
        body["max_completion_tokens" if official else "max_tokens"] = params.max_tokens
    effort = params.thinking_level
    if effort is not None and effort is not ThinkingLevel.Off:
        body["reasoning_effort"] = effort.value
    elif not is_reasoning_model(model):  # o1/o3/o4/gpt-5/codex answer 400 to either
        if is_set(params, "temperature"):
            body["temperature"] = params.temperature
        if is_set(params, "top_p"):
            body["top_p"] = params.top_p
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop_tokens:
        body["stop"] = list(params.stop_tokens[:4])
    if params.frequency_penalty is not None:
        body["frequency_penalty"] = params.frequency_penalty
    if params.presence_penalty is not None:
        body["presence_penalty"] = params.presence_penalty
    if params.logit_bias:
        body["logit_bias"] = dict(params.logit_bias)
    if official and params.cache_retention is CacheRetention.Long:
        body["prompt_cache_retention"] = "24h"


def _response_format(forced: tuple[dict[str, Any], str] | None, fmt: Any) -> dict[str, Any] | None:
    """The ``response_format`` of a request: the emulated forced call's schema, else the
    ``output_format``'s (``None``: plain text)."""
    if forced is not None:
        return {
            "type": "json_schema",
            "json_schema": {"name": "tool_call", "schema": forced[0], "strict": True},
        }
    if isinstance(fmt, OutputFormat.JsonObject):
        return {"type": "json_object"}
    if isinstance(fmt, OutputFormat.JsonSchema):
        return {
            "type": "json_schema",
            "json_schema": {"name": fmt.name, "schema": self_contained(fmt.schema), "strict": fmt.strict},
        }
    return None
