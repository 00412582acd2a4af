"""One generation of the llama.cpp backend: the request llama.cpp gets, and its chunks turned
into the ``Model`` stream (``backends/_llamacpp.py`` has the contract).

**The request** (:func:`build_request`), llama.cpp server's fields (``tools/server/README.md``
of llama.cpp, "POST /v1/chat/completions"): the messages of ``_llama_prompt.chat_messages``
rendered by llama.cpp with the model's chat template, or -- when ``ModelInteraction.chat_template``
overrides it for one call -- our rendering of that template, sent as token ids to
``/v1/completions``; sampling (``temperature``, ``top_p``, ``top_k``, ``min_p`` 0.05,
``repeat_penalty`` over ``repeat_last_n`` 64, ``frequency_penalty``, ``presence_penalty``,
``seed``, ``stop``, ``max_tokens``, ``logit_bias``); ``json_schema`` for
``OutputFormat.JsonObject`` / ``JsonSchema`` (llama.cpp builds the grammar); tools natively
(``tools`` + ``tool_choice``) when llama.cpp reports that the template renders them, else the
``<tool_call>`` text protocol (``_llama_tools``), whose forced calls are one JSON object held to
:func:`~foundation_ai.backends._llama_tools.tool_call_schema` by a ``json_schema`` grammar. A
seeded call turns ``cache_prompt`` off: the whole prompt is evaluated, so the same seed gives the
same answer (logits are not bit-identical across batch shapes).

**The chunks** (:class:`ChunkReader`): ``delta.content`` / ``text`` through the text-protocol
parser (text, ``<think>`` thinking, ``<tool_call>`` calls), ``delta.reasoning_content`` as
thinking, ``delta.tool_calls`` assembled by index into one ``ToolCall`` each; per-token
``timings`` give the cumulative counts (``prompt_n + cache_n`` input, ``predicted_n`` output).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ids import new_call_id, new_scru128
from ..schema.refs import self_contained
from ..types import (
    AssistantMessage,
    FunctionSpec,
    Messages,
    ModelInteraction,
    ModelParams,
    ModelProviders,
    OutputFormat,
    Stream,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolChoice,
    UsageReport,
)
from ..types.content import StopReason, StopReasonT
from ._llama_prompt import chat_messages, openai_tools
from ._llama_tools import ParseEvent, ToolCallStreamParser, parse_tool_calls, tool_call_schema
from .base import ModelStream

__all__ = [
    "ChunkReader",
    "Emitter",
    "Failure",
    "Request",
    "build_request",
    "offered",
    "sampling",
    "stop_reason",
    "wire_messages",
]

_PROVIDER = ModelProviders.LlamaCpp
_NAME_IN_TEXT = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)+)"')


class Failure(Exception):
    """A failure to report in the stream (its message becomes ``error_detail``)."""


@dataclass(slots=True)
class Request:
    """What one generation sends: ``body`` to ``/v1/chat/completions`` (``chat``) or
    ``/v1/completions``; ``functions`` offered; ``forced_json``: the output is one forced call
    written as JSON (text protocol); ``native``: llama.cpp parses tool calls."""

    body: dict[str, Any]
    chat: bool
    functions: list[FunctionSpec] = field(default_factory=list)
    forced_json: bool = False
    native: bool = False
    prompt_tokens: int | None = None


def offered(interaction: ModelInteraction) -> list[FunctionSpec]:
    """The tools a call offers (none with ``ToolChoice.None_``)."""
    if isinstance(interaction.tool_choice, ToolChoice.None_):
        return []
    return interaction.tools_shed.functions()


def wire_messages(
    interaction: ModelInteraction, functions: Sequence[FunctionSpec], *, native: bool
) -> list[dict[str, Any]]:
    """``_llama_prompt.chat_messages`` in the shape llama.cpp reads (OpenAI's: a call's
    ``arguments`` as a JSON string)."""
    messages = chat_messages(interaction, functions=functions, native_tools=native)
    for m in messages:
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            fn["arguments"] = json.dumps(fn["arguments"], ensure_ascii=False)
    return messages


def _forced(interaction: ModelInteraction, functions: list[FunctionSpec]) -> list[FunctionSpec]:
    choice = interaction.tool_choice
    if isinstance(choice, ToolChoice.Function):
        forced = [f for f in functions if f.name == choice.name]
        if not forced:
            raise Failure(f"tool_choice names {choice.name!r}, which is not among the tools offered")
        return forced
    if isinstance(choice, ToolChoice.Required):
        if not functions:
            raise Failure("tool_choice is Required but no tool is offered")
        return functions
    return []


def sampling(params: ModelParams, default_seed: int | None) -> dict[str, Any]:
    """``params`` as llama.cpp request fields (module docstring).

    Raises:
        ValueError: a ``logit_bias`` key is not a token id.
    """
    seed = params.seed if params.seed is not None else default_seed
    body: dict[str, Any] = {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": int(params.top_k),
        "min_p": 0.05,
        "repeat_penalty": params.repeat_penalty,
        "repeat_last_n": 64,
        "frequency_penalty": params.frequency_penalty or 0.0,
        "presence_penalty": params.presence_penalty or 0.0,
        "max_tokens": params.max_tokens if params.max_tokens > 0 else -1,
        "seed": seed if seed is not None else random.getrandbits(31),
        "cache_prompt": seed is None,
        "timings_per_token": True,
        "stream_options": {"include_usage": True},
    }
    if params.stop_tokens:
        body["stop"] = [s for s in params.stop_tokens if s]
    if params.logit_bias:
        body["logit_bias"] = [[int(k), float(v)] for k, v in params.logit_bias.items()]
    if isinstance(params.output_format, OutputFormat.JsonObject):
        body["json_schema"] = {"type": "object"}
    elif isinstance(params.output_format, OutputFormat.JsonSchema):
        body["json_schema"] = self_contained(params.output_format.schema)  # $refs inlined
    return body


def build_request(
    interaction: ModelInteraction, params: ModelParams, *, native_tools: bool, default_seed: int | None
) -> Request:
    """The request for one generation (module docstring); ``native_tools``: llama.cpp renders
    and parses tools for the model's own template.

    Raises:
        Failure: an unknown forced tool, or Required with no tool.
        ValueError: a ``logit_bias`` key is not a token id.
    """
    functions = offered(interaction)
    forced = _forced(interaction, functions)
    body = sampling(params, default_seed)
    chat = interaction.chat_template is None
    native = chat and native_tools and bool(functions)
    request = Request(body=body, chat=chat, functions=functions, native=native)
    if chat:
        body["messages"] = wire_messages(interaction, functions, native=native)
    if native:
        body["tools"] = openai_tools(functions)
        choice = interaction.tool_choice
        if isinstance(choice, ToolChoice.Function):
            body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
        elif isinstance(choice, ToolChoice.Required):
            body["tool_choice"] = "required"
    elif forced:
        body.pop("json_schema", None)
        body["json_schema"] = tool_call_schema(forced)
        request.forced_json = True
    return request


# --------------------------------------------------------------------------------------------
# Chunks -> stream items


class Emitter:
    """Builds the Assistant chunks of one generation (ids, deltas, held tool calls)."""

    def __init__(self, model_id: Any) -> None:
        self.model_id = model_id
        self.kind: str | None = None  # "text" / "thinking": the open output
        self.out_id = ""
        self.held_ws = ""  # whitespace that may start an output: emitted with the next real text
        self.pending: tuple[str, ToolCall] | None = None  # emitted when the next output starts or at the end
        self.calls = 0

    def _chunk(self, msg_id: str, content: Any, usage: UsageReport, **extra: Any) -> Stream[Messages, Any]:
        return Stream.Next(
            AssistantMessage(
                id=msg_id, model=self.model_id, content=content, usage=usage, provider=_PROVIDER, **extra
            )
        )

    def flush_pending(self, out: list[ModelStream], usage: UsageReport) -> None:
        if self.pending is not None:
            msg_id, call = self.pending
            self.pending = None
            out.append(self._chunk(msg_id, call, usage, stop_reason=StopReason.ToolUse()))

    def feed(self, events: Sequence[ParseEvent], usage: UsageReport, out: list[ModelStream]) -> None:
        for ev in events:
            if ev.kind == "call":
                assert ev.call is not None
                self.flush_pending(out, usage)
                self.kind, self.held_ws = None, ""
                self.pending = (new_scru128(), ev.call)
                self.calls += 1
                continue
            if ev.kind == self.kind:
                out.append(self._chunk(self.out_id, _content(ev.kind, ev.text), usage))
                continue
            piece = self.held_ws + ev.text
            if not piece.strip():
                self.held_ws = piece
                continue
            self.held_ws = ""
            self.flush_pending(out, usage)
            self.kind, self.out_id = ev.kind, new_scru128()
            out.append(self._chunk(self.out_id, _content(ev.kind, piece), usage))

    def finish(self, stop: StopReasonT, usage: UsageReport, timing: Any, out: list[ModelStream]) -> None:
        meta = [timing]
        if self.pending is not None:
            msg_id, call = self.pending
            self.pending = None
            out.append(self._chunk(msg_id, call, usage, stop_reason=stop, metadata=meta))
        elif self.kind is not None:
            out.append(
                self._chunk(self.out_id, _content(self.kind, ""), usage, stop_reason=stop, metadata=meta)
            )
        else:
            out.append(self._chunk(new_scru128(), TextContent(""), usage, stop_reason=stop, metadata=meta))


def _content(kind: str, text: str) -> Any:
    return ThinkingContent(text) if kind == "thinking" else TextContent(text)


class ChunkReader:
    """Reads llama.cpp's stream chunks for one :class:`Request` into parse events and counts."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.parser = ToolCallStreamParser(parse_calls=bool(request.functions) and not request.native)
        self.input = request.prompt_tokens or 0
        self.output = 0
        self.cached = 0
        self.finish_reason: str | None = None
        self.error: dict[str, Any] | None = None
        self._forced_text: list[str] = []
        self._native: dict[int, dict[str, str]] = {}

    def read(self, chunk: dict[str, Any]) -> list[ParseEvent]:
        """The events of one chunk (counts updated)."""
        if "error" in chunk and not chunk.get("choices"):
            self.error = (
                chunk["error"] if isinstance(chunk["error"], dict) else {"message": str(chunk["error"])}
            )
            return []
        timings = chunk.get("timings")
        if isinstance(timings, dict):
            if "prompt_n" in timings:
                self.cached = int(timings.get("cache_n", 0))
                self.input = int(timings.get("prompt_n", 0)) + self.cached
            self.output = max(self.output, int(timings.get("predicted_n", 0)))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.input = int(usage.get("prompt_tokens", self.input))
            self.output = int(usage.get("completion_tokens", self.output))
        events: list[ParseEvent] = []
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
            delta = choice.get("delta") or {}
            thinking = delta.get("reasoning_content")
            if thinking:
                events.append(ParseEvent("thinking", str(thinking)))
            text = delta.get("content") if "delta" in choice else choice.get("text")
            if text:
                events.extend(self._text(str(text)))
            for call in delta.get("tool_calls") or ():
                slot = self._native.setdefault(int(call.get("index", 0)), {"name": "", "arguments": ""})
                fn = call.get("function") or {}
                slot["name"] += str(fn.get("name") or "")
                slot["arguments"] += str(fn.get("arguments") or "")
        return events

    def _text(self, text: str) -> list[ParseEvent]:
        if self.request.forced_json:
            self._forced_text.append(text)
            return []
        return self.parser.feed(text)

    def finish(self, truncated: bool) -> list[ParseEvent]:
        """The events held back until the end (the forced call, native calls, a partial tag)."""
        if self.request.forced_json:
            raw = "".join(self._forced_text)
            try:
                calls = parse_tool_calls(raw)
            except ValueError as exc:
                name = _NAME_IN_TEXT.search(raw)
                if truncated and name is not None:  # as the text protocol does (``_llama_tools``)
                    self.parser.problems.append(f"tool call {name.group(1)!r} cut off by max_tokens")
                    args = raw.split('"arguments"', 1)[-1].lstrip(" \n\t:")
                    cut = ToolCall(id=new_call_id(), name=name.group(1), arguments=None, raw_arguments=args)
                    return [ParseEvent("call", call=cut)]
                self.parser.problems.append(f"forced tool call is not valid JSON ({exc}): {raw[:200]}")
                return [ParseEvent("text", raw)] if raw else []
            return [ParseEvent("call", call=c) for c in calls]
        events = self.parser.finish(truncated=truncated)
        for _, slot in sorted(self._native.items()):
            events.append(ParseEvent("call", call=_native_call(slot)))
        return events


def _native_call(slot: dict[str, str]) -> ToolCall:
    raw = slot["arguments"]
    try:
        args = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return ToolCall(id=new_call_id(), name=slot["name"], arguments=None, raw_arguments=raw)
    if isinstance(args, dict):
        return ToolCall(id=new_call_id(), name=slot["name"], arguments=args)
    return ToolCall(id=new_call_id(), name=slot["name"], arguments=None, raw_arguments=raw)


def stop_reason(reader: ChunkReader, calls: int) -> StopReasonT:
    """``Length`` (max_tokens or the context full), ``ToolUse`` (a call), else ``Stop``."""
    if reader.finish_reason == "length":
        return StopReason.Length()
    if calls:
        return StopReason.ToolUse()
    return StopReason.Stop()
