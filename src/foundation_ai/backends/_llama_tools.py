"""Tool calling for local models: the text protocol, its streaming parser, and the call grammar.

**The text protocol** (docs/models.md, "The in-process llama.cpp engine"). A chat template that does not support tools gets
:func:`protocol_instructions` appended to the system prompt; the model calls a tool by writing::

    <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>

one tag per call, several allowed, anywhere in its answer. Results come back in the next user
turn as ``<tool_result name="get_weather" id="call_…">…</tool_result>`` blocks
(:func:`format_tool_result`). The same ``<tool_call>`` tag is what Hermes/Qwen-style native
templates make models emit, so one parser serves both.

**Parsing** (:class:`ToolCallStreamParser`) is incremental: text outside tags streams out at
once, minus a held-back tail that could be the start of a tag; a tag's JSON may span any number
of tokens and lines. Inside one tag: one JSON object, several objects in a row, or a JSON array
of objects; ``"parameters"`` is accepted for ``"arguments"`` (Llama 3 style) and arguments sent
as a JSON *string* holding an object are decoded. Every call gets a fresh id from
:func:`foundation_ai.ids.new_call_id`, unique across turns. A tag whose content is not valid
JSON (or has no ``"name"``) is kept as text, tag included, and reported in
:attr:`ToolCallStreamParser.problems`. A tag cut off by ``max_tokens`` whose tool name can still
be read becomes a call with ``arguments=None`` and the received text in ``raw_arguments`` (wire
reported, never silently ``{}``). ``<think>…</think>`` becomes thinking.

**Forced calls**: :func:`tool_call_schema` is the JSON Schema of exactly one call naming one of
the given functions with ``arguments`` matching that function's schema; llama.cpp enforces it
with a grammar (``json_schema`` in the request), so even a 135M model produces a valid call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..ids import new_call_id
from ..schema.refs import self_contained
from ..types import FunctionSpec, ToolCall

__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "ParseEvent",
    "ToolCallStreamParser",
    "format_tool_call",
    "format_tool_result",
    "parse_tool_calls",
    "partial_suffix",
    "StopFilter",
    "protocol_instructions",
    "tool_call_schema",
]

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


# --------------------------------------------------------------------------------------------
# Prompt side


def protocol_instructions(functions: Sequence[FunctionSpec]) -> str:
    """The system-prompt section that teaches a model without native tool support the protocol.

    Lists every function as one compact JSON line (name, description, JSON Schema parameters).
    """
    lines = [
        "# Tools",
        "",
        "You can call the tools listed below. To call a tool, write a line of exactly this form:",
        f'{CALL_OPEN}{{"name": "<tool name>", "arguments": {{<arguments as a JSON object>}}}}{CALL_CLOSE}',
        "Write one such line per call; you may make several calls. Then stop: the results come "
        "back in <tool_result> blocks. If no tool is needed, answer normally.",
        "",
        "Available tools:",
    ]
    for f in functions:
        spec = {"name": f.name, "description": f.description, "parameters": f.parameters}
        lines.append(json.dumps(spec, ensure_ascii=False, separators=(", ", ": ")))
    return "\n".join(lines)


def format_tool_call(call: ToolCall) -> str:
    """A past call as the model would have written it in the protocol (for the history)."""
    if call.arguments is not None:
        args = json.dumps(call.arguments, ensure_ascii=False)
    elif call.raw_arguments:
        args = call.raw_arguments
    else:
        args = "{}"
    return (
        f'{CALL_OPEN}{{"name": {json.dumps(call.name, ensure_ascii=False)}, "arguments": {args}}}{CALL_CLOSE}'
    )


def format_tool_result(call_id: str, name: str, content: str, *, error: bool = False) -> str:
    """One tool result block of the protocol; ``error=True`` marks a failed tool."""
    flag = ' error="true"' if error else ""
    return f'<tool_result name="{name}" id="{call_id}"{flag}>\n{content}\n</tool_result>'


# --------------------------------------------------------------------------------------------
# Parsing


@dataclass(frozen=True, slots=True)
class ParseEvent:
    """One piece of parsed output: ``kind`` "text" or "thinking" with ``text``, or "call"."""

    kind: Literal["text", "thinking", "call"]
    text: str = ""
    call: ToolCall | None = None


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
_NAME_IN_TEXT = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)+)"')
_ARGS_IN_TEXT = re.compile(r'"(?:arguments|parameters)"\s*:\s*')
_DECODER = json.JSONDecoder()


def _json_values(text: str) -> list[Any]:
    """Decode one or more JSON values written in a row (whitespace or commas between).

    Raises:
        ValueError: some part is not JSON.
    """
    values: list[Any] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= end:
            return values
        value, pos = _DECODER.raw_decode(text, pos)
        values.append(value)


def _to_call(obj: Any, new_id: Callable[[], str]) -> ToolCall:
    """One decoded JSON value as a call.

    Raises:
        ValueError: not an object with a string ``name``.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    if isinstance(obj.get("function"), dict):  # OpenAI-shaped {"function": {"name", "arguments"}}
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError('the call has no "name"')
    args: Any = obj["arguments"] if "arguments" in obj else obj.get("parameters", {})
    if isinstance(args, str):
        try:
            decoded = json.loads(args) if args.strip() else {}
        except (ValueError, RecursionError):
            return ToolCall(id=new_id(), name=name, arguments=None, raw_arguments=args)
        args = decoded
    if args is None:
        args = {}
    if isinstance(args, dict):
        return ToolCall(id=new_id(), name=name, arguments=args)
    return ToolCall(id=new_id(), name=name, arguments=None, raw_arguments=json.dumps(args))


def parse_tool_calls(content: str, new_id: Callable[[], str] = new_call_id) -> list[ToolCall]:
    """The calls inside one ``<tool_call>`` tag's content (the text between the tags).

    Accepts one object, several objects in a row, or an array of objects (see module docstring).

    Raises:
        ValueError: the content is not valid JSON, or a value is not a call; the message says why.
    """
    text = _FENCE.sub("", content.strip())
    try:
        values = _json_values(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past ~1,000 levels
        raise ValueError(f"not valid JSON: {exc}") from None
    flat: list[Any] = []
    for v in values:
        flat.extend(v if isinstance(v, list) else [v])
    if not flat:
        raise ValueError("empty tool call")
    return [_to_call(v, new_id) for v in flat]


def partial_suffix(text: str, tags: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of one of ``tags``."""
    best = 0
    for tag in tags:
        for n in range(min(len(tag) - 1, len(text)), best, -1):
            if text.endswith(tag[:n]):
                best = n
                break
    return best


class StopFilter:
    """Cuts an in-process model's output at the first of ``stops`` (``ModelParams.stop_tokens``);
    holds back a tail that may begin one (used by the ``transformers`` backend: llama.cpp stops
    by itself)."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s for s in stops if s]
        self.held = ""

    def feed(self, piece: str) -> tuple[str, bool]:
        """``(text to emit, True when a stop sequence was met)`` for the next ``piece``."""
        if not self.stops:
            return piece, False
        text = self.held + piece
        hits = [i for s in self.stops if (i := text.find(s)) >= 0]
        if hits:
            self.held = ""
            return text[: min(hits)], True
        keep = partial_suffix(text, self.stops)
        self.held = text[len(text) - keep :]
        return text[: len(text) - keep], False

    def flush(self) -> str:
        """What is held back, at the end of the output."""
        held, self.held = self.held, ""
        return held


class ToolCallStreamParser:
    """Split streamed model text into text, thinking and tool calls (see the module docstring).

    ``feed(piece)`` returns the events that are certain so far; ``finish(truncated=...)`` flushes
    the rest (``truncated``: generation stopped at ``max_tokens``). Problems (malformed or
    cut-off calls) are appended to :attr:`problems` as readable sentences.
    """

    def __init__(
        self,
        *,
        parse_calls: bool = True,
        parse_thinking: bool = True,
        new_id: Callable[[], str] = new_call_id,
    ) -> None:
        self._opens = [t for t, on in ((CALL_OPEN, parse_calls), (THINK_OPEN, parse_thinking)) if on]
        self._new_id = new_id
        self._mode: Literal["out", "call", "think"] = "out"
        self._buf = ""
        self._inside = ""
        self.problems: list[str] = []
        """Readable descriptions of malformed or cut-off calls, in order."""

    def feed(self, piece: str) -> list[ParseEvent]:
        """Consume the next piece of output; return the events it completes."""
        self._buf += piece
        events: list[ParseEvent] = []
        while self._step(events):
            pass
        return events

    def _step(self, events: list[ParseEvent]) -> bool:
        buf = self._buf
        if self._mode == "out":
            hits = [(i, t) for t in self._opens if (i := buf.find(t)) >= 0]
            if hits:
                idx, tag = min(hits)
                self._emit(events, "text", buf[:idx])
                self._buf = buf[idx + len(tag) :]
                self._mode = "call" if tag == CALL_OPEN else "think"
                return True
            keep = partial_suffix(buf, self._opens)
            self._emit(events, "text", buf[: len(buf) - keep])
            self._buf = buf[len(buf) - keep :]
            return False
        close = CALL_CLOSE if self._mode == "call" else THINK_CLOSE
        idx = buf.find(close)
        if idx >= 0:
            if self._mode == "call":
                self._complete(events, self._inside + buf[:idx])
                self._inside = ""
            else:
                self._emit(events, "thinking", buf[:idx])
            self._buf = buf[idx + len(close) :]
            self._mode = "out"
            return True
        keep = partial_suffix(buf, [close])
        if self._mode == "call":
            self._inside += buf[: len(buf) - keep]
        else:
            self._emit(events, "thinking", buf[: len(buf) - keep])
        self._buf = buf[len(buf) - keep :]
        return False

    @staticmethod
    def _emit(events: list[ParseEvent], kind: Literal["text", "thinking"], text: str) -> None:
        if text:
            events.append(ParseEvent(kind, text))

    def _complete(self, events: list[ParseEvent], content: str) -> None:
        try:
            calls = parse_tool_calls(content, self._new_id)
        except ValueError as exc:
            self.problems.append(f"malformed tool call kept as text ({exc}): {content.strip()[:200]}")
            events.append(ParseEvent("text", CALL_OPEN + content + CALL_CLOSE))
            return
        events.extend(ParseEvent("call", call=c) for c in calls)

    def finish(self, *, truncated: bool = False) -> list[ParseEvent]:
        """Flush everything held back. ``truncated``: the output was cut off by ``max_tokens``."""
        events: list[ParseEvent] = []
        if self._mode == "out":
            self._emit(events, "text", self._buf)
        elif self._mode == "think":
            self._emit(events, "thinking", self._buf)
        else:
            self._finish_call(events, self._inside + self._buf, truncated)
        self._buf = self._inside = ""
        self._mode = "out"
        return events

    def _finish_call(self, events: list[ParseEvent], content: str, truncated: bool) -> None:
        try:  # complete JSON, only the closing tag missing
            calls = parse_tool_calls(content, self._new_id)
        except ValueError:
            calls = []
        if calls:
            events.extend(ParseEvent("call", call=c) for c in calls)
            return
        name = _NAME_IN_TEXT.search(content)
        if truncated and name is not None:
            args = _ARGS_IN_TEXT.search(content)
            raw = content[args.end() :] if args is not None else content.strip()
            self.problems.append(f"tool call {name.group(1)!r} cut off by max_tokens: arguments incomplete")
            call = ToolCall(id=self._new_id(), name=name.group(1), arguments=None, raw_arguments=raw)
            events.append(ParseEvent("call", call=call))
            return
        why = "cut off by max_tokens" if truncated else "no closing tag"
        self.problems.append(f"unfinished tool call kept as text ({why}): {content.strip()[:200]}")
        events.append(ParseEvent("text", CALL_OPEN + content))


# --------------------------------------------------------------------------------------------
# The schema of a forced call


def tool_call_schema(functions: Sequence[FunctionSpec]) -> dict[str, Any]:
    """The JSON Schema of exactly one call ``{"name": …, "arguments": {…}}`` to one of ``functions``.

    ``name`` is a constant per function and ``arguments`` that function's JSON Schema; llama.cpp
    turns it into the grammar that holds the output to it (the request's ``json_schema``), so
    even a 135M model produces a valid call.

    Raises:
        ValueError: ``functions`` is empty.
    """
    if not functions:
        raise ValueError("no function to call")
    alternatives: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"name": {"const": f.name}, "arguments": _closed(f.parameters)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for f in functions
    ]
    schema: dict[str, Any] = alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
    return self_contained(schema)


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """An arguments schema fit for the grammar: an object schema without properties becomes ``{}``-only."""
    if (
        schema.get("type") == "object"
        and not schema.get("properties")
        and "additionalProperties" not in schema
    ):
        return {**schema, "properties": {}, "additionalProperties": False}
    return schema
