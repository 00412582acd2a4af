"""``ModelInteraction`` + ``ModelParams`` -> an Anthropic Messages API request body.

Pure functions, no I/O. Sources: Anthropic Messages API reference (request shape, content
blocks, ``tool_choice``, extended thinking, prompt caching) (https://docs.anthropic.com/en/api/messages).

Rules applied here:

- ``system`` is top-level: ``system_prompt`` and ``soul`` joined by a blank line, plus the JSON
  instruction of ``output_format``, except a strict JSON Schema on a model with structured
  outputs, sent as ``output_config.format`` (:func:`native_output_format`); the answer is
  checked after the stream either way, see :func:`check_output_format`).
- ``max_tokens`` is always sent (the API requires it).
- Adjacent messages of one wire role are merged into ONE wire message with several blocks; in a
  user message ``tool_result`` blocks come first, in the order of the calls they answer.
- Every ``tool_use`` is followed, in the next user message, by exactly its ``tool_result``: a missing result becomes an ``is_error`` result saying so; a result whose call is not in
  the preceding assistant message becomes plain text (the API rejects orphan results).
- Thinking (``thinking`` + ``signature``, ``redacted_thinking`` + ``data``) is replayed
  byte-exact and in order, only when the message came from Anthropic (signatures are only valid
  for their issuer); a thinking block with empty text and a signature is kept; one
  without a signature cannot be replayed and is dropped. Text and tool calls of any provider
  are kept. Models without extended thinking (Claude 2, 3, 3.5) get no thinking blocks, and a
  request continuing a tool loop whose assistant turn has no leading thinking block is sent
  without ``thinking`` (the API requires one there).
- Before all this, the history is sanitized (``docs/sanitation.md``): call ids fitted to
  ``^[a-zA-Z0-9_-]+$`` and made unique (call and result alike; empty ids paired by position),
  malformed arguments sent as ``{}``, blank text left out, no trailing whitespace in a prefill.
- User messages with role System / Agent / Tool / custom keep their meaning: Anthropic has only
  ``user`` and ``assistant`` roles, so their text is wrapped in a tag naming the role
  (``<system_instruction>``, ``<agent_message>``, ``<tool_context>``, ``<message from="...">``).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ..schema.refs import has_refs, self_contained
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
from ._sanitize import ANTHROPIC, anthropic_accepts_thinking, sanitize_history

__all__ = [
    "ANTHROPIC_VERSION",
    "THINKING_BUDGETS",
    "build_request",
    "check_output_format",
    "json_instruction",
    "merge_turns",
    "missing_results",
    "native_output_format",
    "pair_step",
    "pair_tool_results",
    "role_text",
    "strip_prefill",
    "wire_messages",
    "wire_role",
]

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header value sent by default."""

THINKING_BUDGETS: dict[ThinkingLevel, int] = {
    ThinkingLevel.Minimal: 1024,
    ThinkingLevel.Low: 2048,
    ThinkingLevel.Medium: 8192,
    ThinkingLevel.High: 24576,
}
"""``budget_tokens`` (tokens) for a ``thinking_level`` when no ``thinking_budget`` is given."""

_MIN_THINKING_BUDGET = 1024  # Anthropic: budget_tokens >= 1024

_ROLE_TAGS = {
    MessageRole.System: "system_instruction",
    MessageRole.Agent: "agent_message",
    MessageRole.Tool: "tool_context",
}


def role_text(role: str, text: str) -> str:
    """The text of a user-side message as sent under the provider's ``user`` role.

    ``user`` text is unchanged; System / Agent / Tool roles are wrapped in
    ``<system_instruction>``, ``<agent_message>`` and ``<tool_context>`` tags, a custom role in
    ``<message from="role">``, so the model still sees who speaks (roles keep their
    meaning").
    """
    if role == MessageRole.User:
        return text
    tag = _ROLE_TAGS.get(role)
    if tag is not None:
        return f"<{tag}>\n{text}\n</{tag}>"
    return f'<message from="{role}">\n{text}\n</message>'


def _image_block(img: ImageContent) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": img.mime_type.value, "data": img.b64},
    }


def _user_blocks(msg: UserMessage) -> list[dict[str, Any]]:
    c = msg.content
    if isinstance(c, ImageContent):
        if msg.role == MessageRole.User:
            return [_image_block(c)]
        return [{"type": "text", "text": role_text(msg.role, "(image follows)")}, _image_block(c)]
    if not c.content:
        return []
    return [{"type": "text", "text": role_text(msg.role, c.content)}]


def _result_block(msg: ToolResultMessage) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg.tool_call_id}
    c = msg.content
    if isinstance(c, ImageContent):
        block["content"] = [_image_block(c)]  # the image stays inside the tool_result
    else:
        text = c.content or (msg.error_detail or "")
        if text:
            block["content"] = [{"type": "text", "text": text}]
    if msg.error_detail is not None:
        block["is_error"] = True
    return block


def _assistant_blocks(msg: AssistantMessage) -> list[dict[str, Any]]:
    if isinstance(msg.stop_reason, StopReason.Error):
        return []  # an error report is not something the model said
    c = msg.content
    if isinstance(c, TextContent):
        return [{"type": "text", "text": c.content}] if c.content else []
    if isinstance(c, ToolCall):
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": c.id,
            "name": c.name,
            "input": c.arguments if c.arguments is not None else {},
        }
        if c.signature is not None and msg.provider == ModelProviders.Anthropic:
            block["signature"] = c.signature  # echoed to the provider that issued it
        return [block]
    if isinstance(c, ThinkingContent):
        if msg.provider != ModelProviders.Anthropic or c.signature is None:
            return []  # another provider's signature is not valid here
        if c.redacted:
            return [{"type": "redacted_thinking", "data": c.signature}]
        return [{"type": "thinking", "thinking": c.thinking, "signature": c.signature}]
    return []  # images and embeddings cannot be sent back as assistant content


def _orphan_text(block: dict[str, Any]) -> list[dict[str, Any]]:
    head = (
        f"[result of tool call {block['tool_use_id']}" + (" (error)" if block.get("is_error") else "") + "]"
    )
    out: list[dict[str, Any]] = [{"type": "text", "text": head}]
    for part in block.get("content", []):
        out.append(part)
    return out


def pair_step(msg: dict[str, Any], expected: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """One merged wire message with its tool results paired (see the module doc), given the
    ``tool_use`` ids ``expected`` from the message before it: the message(s) to send and the
    ids the next message must answer."""
    if msg["role"] == "assistant":
        out = [msg]
        if expected:  # an assistant turn right after unanswered calls
            out.insert(0, {"role": "user", "content": missing_results(expected, {})})
        return out, [b["id"] for b in msg["content"] if b["type"] == "tool_use"]
    results: dict[str, dict[str, Any]] = {}
    rest: list[dict[str, Any]] = []
    for b in msg["content"]:
        if b["type"] == "tool_result" and b["tool_use_id"] in expected and b["tool_use_id"] not in results:
            results[b["tool_use_id"]] = b
        elif b["type"] == "tool_result":
            rest.extend(_orphan_text(b))
        else:
            rest.append(b)
    return [{"role": "user", "content": missing_results(expected, results) + rest}], []


def pair_tool_results(wire: list[dict[str, Any]], expected: list[str] | None = None) -> list[dict[str, Any]]:
    """Make every tool_use be followed by exactly its tool_result; see the module doc.
    ``expected``: the ``tool_use`` ids of the message before ``wire`` (none by default)."""
    out: list[dict[str, Any]] = []
    expected = expected or []
    for msg in wire:
        sent, expected = pair_step(msg, expected)
        out += sent
    if expected:
        out.append({"role": "user", "content": missing_results(expected, {})})
    return out


def missing_results(expected: list[str], found: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks answering ``expected`` (``tool_use`` ids) in order: the one in
    ``found`` (by id), else an ``is_error`` result saying the call was not run."""
    return [
        found.get(cid)
        or {
            "type": "tool_result",
            "tool_use_id": cid,
            "content": [{"type": "text", "text": "No result: the tool call was not run."}],
            "is_error": True,
        }
        for cid in expected
    ]


def wire_messages(
    messages: list[Messages] | list[Any], *, keep_thinking: bool = True
) -> list[dict[str, Any]]:
    """The ``messages`` array for ``messages`` (oldest first).

    The history first goes through the sanitation step of ``docs/sanitation.md``
    (:func:`~foundation_ai.backends._sanitize.sanitize_history` with the Anthropic rules: ids
    matching ``^[a-zA-Z0-9_-]+$``, unique, results paired by position; no blank text; thinking
    only when ``keep_thinking``). Returns a list of ``{"role": "user" | "assistant", "content":
    [block, ...]}`` with adjacent same-role messages merged and tool results paired with their
    calls (see the module doc).
    """
    history = sanitize_history(messages, ANTHROPIC, keep_thinking=keep_thinking)
    return strip_prefill(pair_tool_results(merge_turns(history)))


def wire_role(m: Any) -> tuple[str, list[dict[str, Any]]]:
    """The wire role (``"user"`` / ``"assistant"``) and content blocks of one sanitized
    message (no blocks: nothing to send)."""
    if isinstance(m, AssistantMessage):
        return "assistant", _assistant_blocks(m)
    if isinstance(m, ToolResultMessage):
        return "user", [_result_block(m)]
    if isinstance(m, UserMessage):
        return "user", _user_blocks(m)
    return "user", []


def merge_turns(history: list[Messages]) -> list[dict[str, Any]]:
    """The wire messages of sanitized messages, adjacent messages of one role merged into one
    (before tool results are paired)."""
    wire: list[dict[str, Any]] = []
    for m in history:
        role, blocks = wire_role(m)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    return wire


def strip_prefill(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request ending in assistant text (a prefill) without its trailing whitespace: the API
    rejects "final assistant content cannot end with trailing whitespace"."""
    if wire and wire[-1]["role"] == "assistant":
        last = wire[-1]["content"][-1]
        if last["type"] == "text" and last["text"] != last["text"].rstrip():
            wire[-1]["content"][-1] = {**last, "text": last["text"].rstrip()}
    return wire


def _thinking_leads_open_turn(messages: list[dict[str, Any]]) -> bool:
    """True unless the request continues a tool loop (it ends with tool results) whose
    assistant turn does not start with a thinking block."""
    if len(messages) < 2 or messages[-1]["role"] != "user":
        return True
    if not any(b["type"] == "tool_result" for b in messages[-1]["content"]):
        return True
    before = messages[-2]
    if isinstance(before, msgspec.Raw):  # sent before, kept encoded (the backend's cache)
        before = msgspec.json.decode(before)
    turn = before["content"]
    return bool(turn) and turn[0]["type"] in ("thinking", "redacted_thinking")


def json_instruction(fmt: Any) -> str | None:
    """The system instruction for a JSON ``output_format``, or ``None`` for text."""
    if isinstance(fmt, OutputFormat.JsonObject):
        return "Answer with one JSON object and nothing else: no prose, no code fences."
    if isinstance(fmt, OutputFormat.JsonSchema):
        schema = msgspec.json.encode(self_contained(fmt.schema)).decode()
        return (
            f"Answer with one JSON object named {fmt.name!r} that matches this JSON Schema, "
            f"and nothing else: no prose, no code fences.\n{schema}"
        )
    return None


_STRUCTURED_MODEL = re.compile(r"claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?!\d)")


def native_output_format(model: str, fmt: Any) -> dict[str, Any] | None:
    """``output_config.format`` (``{"type": "json_schema", "schema": ...}``) for a strict
    ``OutputFormat.JsonSchema`` on a model with structured outputs (Claude 4.5 and later:
    Opus, Sonnet, Haiku) whose schema is not recursive (Anthropic's "JSON Schema limitations"
    list recursive schemas as unsupported), else ``None`` (the format then rides as a system
    instruction and the answer is checked after the stream, and locally). Source:
    https://platform.claude.com/docs/en/build-with-claude/structured-outputs
    """
    if not isinstance(fmt, OutputFormat.JsonSchema) or not fmt.strict:
        return None
    found = _STRUCTURED_MODEL.search(model)
    if found is None:
        return None
    version = (int(found.group(1)), int(found.group(2) or 0))
    if version < (4, 5):
        return None
    schema = self_contained(fmt.schema)
    if has_refs(schema):  # "JSON Schema limitations": recursive schemas are not supported
        return None
    return {"type": "json_schema", "schema": schema}


def check_output_format(text: str, fmt: Any) -> str | None:
    """Check an answer against a JSON ``output_format``; ``None`` when it conforms (or the
    format is text), else a short reason. Surrounding whitespace and a Markdown code fence are
    tolerated. Uses the project's JSON Schema validator (jsonschema-rs)."""
    if not isinstance(fmt, OutputFormat.JsonObject | OutputFormat.JsonSchema):
        return None
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0].strip()
    try:
        value = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        return f"the answer is not valid JSON ({exc})"
    if not isinstance(value, dict):
        return "the answer is JSON but not an object"
    if isinstance(fmt, OutputFormat.JsonSchema):
        from ..schema import compile_schema, violations_of

        found = violations_of(compile_schema(fmt.schema), value)
        if found:
            return "the answer does not match the JSON Schema: " + "; ".join(str(v) for v in found)
    return None


def _cache_control(retention: CacheRetention | None) -> dict[str, str] | None:
    if retention is None or retention is CacheRetention.None_:
        return None
    if retention is CacheRetention.Long:
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def _tool_choice(choice: Any) -> dict[str, Any] | None:
    if choice is None:
        return None
    if isinstance(choice, ToolChoice.Auto):
        return {"type": "auto"}
    if isinstance(choice, ToolChoice.Required):
        return {"type": "any"}
    if isinstance(choice, ToolChoice.Function):
        return {"type": "tool", "name": choice.name}
    return {"type": "none"}


def build_request(
    interaction: ModelInteraction,
    params: ModelParams,
    model: str,
    *,
    stream: bool,
    messages: list[Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of ``POST /v1/messages``.

    ``ModelParams`` mapping: ``max_tokens`` (always: the API requires it; 2048 when the caller set
    none), ``temperature``, ``top_p`` and ``top_k`` (each only when the caller set it,
    :func:`~foundation_ai.types.is_set`; recent Claude models
    reject ``temperature`` and ``top_p`` together), ``stop_tokens`` -> ``stop_sequences``,
    ``thinking_budget`` / ``thinking_level`` -> ``thinking: {type: enabled, budget_tokens}``
    (at least 1024; ``max_tokens`` is raised to budget + ``max_tokens`` when not above the
    budget; with thinking on, ``temperature`` and ``top_k`` are not sent and ``top_p`` only when
    >= 0.95, as the API requires; a forced tool (``tool_choice`` any / tool) turns thinking off,
    since the API rejects the two together), ``cache_retention`` -> ``cache_control`` on the system block
    and on the last block of the last message, ``output_format`` -> ``output_config.format``
    on models with structured outputs (:func:`native_output_format`), else a system instruction.
    ``seed``, penalties, ``logit_bias`` and ``repeat_penalty`` are not supported and ignored.

    ``messages``: the ``messages`` array already mapped (:func:`wire_messages` of the history
    with ``keep_thinking=anthropic_accepts_thinking(model)``), where the part sent before may be
    ``msgspec.Raw`` items (the backend's per-session cache); the last item must be a dict.
    Default: mapped here.
    """
    body: dict[str, Any] = {"model": model}
    max_tokens = params.max_tokens
    budget: int | None = None
    if params.thinking_budget is not None and params.thinking_level is not ThinkingLevel.Off:
        budget = max(_MIN_THINKING_BUDGET, params.thinking_budget)
    elif params.thinking_level is not None and params.thinking_level is not ThinkingLevel.Off:
        budget = THINKING_BUDGETS[params.thinking_level]
    functions = interaction.tools_shed.functions()
    choice = _tool_choice(interaction.tool_choice) if functions else None
    if budget is not None and choice is not None and choice["type"] in ("any", "tool"):
        budget = None  # the API rejects thinking together with a forced tool: the tool wins
    if budget is not None and max_tokens <= budget:
        max_tokens = budget + params.max_tokens
    body["max_tokens"] = max_tokens

    cache = _cache_control(params.cache_retention)
    native = native_output_format(model, params.output_format)
    instruction = None if native is not None else json_instruction(params.output_format)
    system_parts = [p for p in (interaction.full_system_prompt(), instruction) if p]
    if system_parts:
        system_text = "\n\n".join(system_parts)
        if cache is not None:
            body["system"] = [{"type": "text", "text": system_text, "cache_control": cache}]
        else:
            body["system"] = system_text

    if messages is None:
        messages = wire_messages(interaction.messages, keep_thinking=anthropic_accepts_thinking(model))
    if budget is not None and not _thinking_leads_open_turn(messages):
        # A tool loop in progress must continue from a turn that began with thinking
        # (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking): a turn from
        # another provider (a fallback) has none, so this request runs without thinking.
        budget = None
        body["max_tokens"] = params.max_tokens
    if cache is not None and messages:
        last = messages[-1]["content"]
        if last and last[-1]["type"] in ("text", "image", "tool_result", "tool_use"):
            last[-1] = {**last[-1], "cache_control": cache}
    body["messages"] = messages

    if functions:
        tools: list[dict[str, Any]] = []
        for f in functions:
            t: dict[str, Any] = {"name": f.name}
            if f.description:
                t["description"] = f.description
            t["input_schema"] = self_contained(f.parameters)
            tools.append(t)
        body["tools"] = tools
        if choice is not None:
            body["tool_choice"] = choice

    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if is_set(params, "top_p") and params.top_p >= 0.95:
            body["top_p"] = params.top_p
    else:  # only what the caller set: the API's own defaults apply to the rest
        if is_set(params, "temperature"):
            body["temperature"] = params.temperature
        if is_set(params, "top_p"):
            body["top_p"] = params.top_p
        if is_set(params, "top_k"):
            body["top_k"] = int(params.top_k)
    if params.stop_tokens:
        body["stop_sequences"] = list(params.stop_tokens)
    if native is not None:
        body["output_config"] = {"format": native}
    body["stream"] = stream
    return body
