"""OpenAI Chat Completions: the stream parser (:class:`ChatStreamParser`).

Stream mapping: snapshot chunks (the whole text so far) for text and reasoning (read under
every spelling servers use, :data:`REASONING_FIELDS`); tool calls assembled by ``index`` / ``id`` and emitted once, complete, at the end of the
stream with the final stop reason and usage; usage (with
``prompt_tokens_details.cached_tokens`` as cache reads, reasoning tokens counted once, see
:func:`billed_output`) is cumulative on every chunk once known; the final chunk(s) carry
``SystemFingerprint``, ``Timing`` and, for refusals (``StopReason.REFUSAL``) or
``content_filter``, ``RefusalReason`` metadata, and the message's continuation fields in
``Messages.Assistant.signature``. Text survives a surrogate pair split over two events. Errors
follow the contract in ``base.py``: nothing a server sends makes ``stream`` raise, and a stream
of only ``data: [DONE]`` is an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ..ids import new_call_id, new_scru128
from ..pricing import priced
from ..types import (
    AssistantMessage,
    GenerationMetadata,
    ModelId,
    ModelProviders,
    ModelState,
    StopReason,
    Stream,
    TextContent,
    ThinkingContent,
    ToolCall,
    UsageReport,
)
from ._http import (
    SseEvent,
    Timer,
    WireError,
    error_items,
    error_text,
)
from ._reasoning_tokens import billed_output
from ._wire_clock import ChunkClock
from ._wire_text import as_name, decode_event, final, has_surrogate_escape, join, join_all, visible
from .base import ModelStream

__all__ = ["ChatStreamParser", "split_json_objects"]


class _Fn(msgspec.Struct, gc=False):
    name: str | None = None
    arguments: Any = None


class _ToolDelta(msgspec.Struct, gc=False):
    index: Any = None
    id: str | None = None
    function: _Fn | None = None
    extra_content: Any = None


class _Delta(msgspec.Struct, gc=False):
    content: Any = None
    refusal: Any = None
    reasoning_content: Any = None
    reasoning: Any = None
    thinking: Any = None
    reasoning_details: Any = None
    extra_content: Any = None
    tool_calls: list[_ToolDelta] | None = None


class _Choice(msgspec.Struct, gc=False):
    index: int = 0
    delta: _Delta | None = None
    message: _Delta | None = None
    finish_reason: str | None = None


class _Details(msgspec.Struct, gc=False):
    cached_tokens: float | None = None


class _OutDetails(msgspec.Struct, gc=False):
    reasoning_tokens: float | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: float | None = None
    completion_tokens: float | None = None
    total_tokens: float | None = None
    prompt_tokens_details: _Details | None = None
    completion_tokens_details: _OutDetails | None = None


class _Chunk(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    system_fingerprint: str | None = None
    error: Any = None


_CHUNK = msgspec.json.Decoder(_Chunk)
_DECODE_CHUNK = _CHUNK.decode


def _decode_chunk(data: str, what: str) -> _Chunk:
    """``data`` decoded as a ``chat.completion(.chunk)`` (a JSON string escape holding half of a
    surrogate pair is accepted, see ``_wire_text``).

    Raises:
        WireError: malformed JSON or a field of the wrong type (the text names ``what`` and
            quotes the first 200 characters), or an in-band ``error`` object (its provider text).
    """
    try:
        try:
            chunk = _CHUNK.decode(data)
        except msgspec.DecodeError:
            if not has_surrogate_escape(data):
                raise
            chunk = msgspec.convert(decode_event(data), _Chunk)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        raise WireError(f"malformed {what} ({exc}): {data[:200]!r}") from None
    if chunk.error is not None:
        _in_band_error(chunk.error)
    return chunk


def _in_band_error(error: Any) -> None:
    """Raises: WireError: always, with the provider text of an in-band ``error`` object."""
    raise WireError(error_text(200, msgspec.json.encode({"error": error})).replace(" (HTTP 200)", ""))


class _Call:
    __slots__ = ("args_obj", "id", "name", "parts", "signature")

    def __init__(self, call_id: str | None, name: str) -> None:
        self.id = call_id or None
        self.name = name
        self.parts: list[str] = []
        self.args_obj: dict[str, Any] | None = None
        self.signature: str | None = None


def _index_key(value: Any) -> Any:
    if isinstance(value, str):
        s = value.strip()
        return int(s) if s.lstrip("-").isdigit() else s
    if isinstance(value, int | float | bool) or value is None:
        return value
    return msgspec.json.encode(value).decode()  # unhashable (a list, an object): its JSON text


REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
"""The spellings of a message's or delta's reasoning text, in the order they are read (the first
non-empty string wins, as some servers send the same text under two names): ``reasoning_content``
(DeepSeek, vLLM before 0.10, llama.cpp server, Qwen, xAI, Moonshot), ``reasoning`` (OpenRouter,
vLLM 0.10+, Groq, Cerebras, Ollama's OpenAI endpoint), ``thinking`` (some proxies). Content parts
of type ``"thinking"`` / ``"reasoning"`` (Mistral's Magistral) are read too. Sources:
https://api-docs.deepseek.com/guides/reasoning_model,
https://openrouter.ai/docs/use-cases/reasoning-tokens,
https://docs.vllm.ai/en/latest/features/reasoning_outputs.html,
https://console.groq.com/docs/reasoning, https://docs.mistral.ai/capabilities/reasoning/."""


def _reasoning_of(d: _Delta) -> str:
    for name in REASONING_FIELDS:
        value = getattr(d, name)
        if isinstance(value, str) and value:
            return value
    return ""


def _part_text(part: Any) -> tuple[str, str]:
    """(text, reasoning) of one content part of a list-valued ``content``."""
    if isinstance(part, str):
        return part, ""
    if not isinstance(part, dict):
        return "", ""
    kind = part.get("type")
    if kind in ("thinking", "reasoning"):
        inner = part.get("thinking", part.get("reasoning", part.get("text")))
        if isinstance(inner, list):  # Magistral: a list of text chunks
            inner = "".join(
                x.get("text", "") for x in inner if isinstance(x, dict) and isinstance(x.get("text"), str)
            )
        return "", inner if isinstance(inner, str) else ""
    text = part.get("text")
    return (text if isinstance(text, str) else ""), ""


def _merge_details(into: list[dict[str, Any]], pieces: Any) -> bool:
    """Merge streamed OpenRouter ``reasoning_details`` pieces into ``into``: a piece with the
    ``index`` of an earlier one extends it (``text``, ``summary``, ``data``, ``signature``
    concatenated; other fields kept from the first piece that had them), another is appended.
    True when something changed. Source: https://openrouter.ai/docs/use-cases/reasoning-tokens
    ("Preserving reasoning blocks")."""
    if not isinstance(pieces, list):
        return False
    changed = False
    for piece in pieces:
        if not isinstance(piece, dict):
            continue
        idx = piece.get("index")
        cur = next((d for d in into if idx is not None and d.get("index") == idx), None)
        if cur is None:
            into.append(dict(piece))
            changed = True
            continue
        for k, v in piece.items():
            if k in ("text", "summary", "data", "signature") and isinstance(v, str):
                if v:
                    cur[k] = (
                        (cur.get(k) or "") + v if isinstance(cur.get(k), str) or cur.get(k) is None else v
                    )
                    changed = True
            elif v is not None and cur.get(k) in (None, ""):
                cur[k] = v
                changed = True
    return changed


def _merge_extra(into: dict[str, Any], extra: Any) -> None:
    """Merge a (streamed) ``extra_content`` object into ``into``, one level deep."""
    if not isinstance(extra, dict):
        return
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            into[k] = {**into[k], **v}
        else:
            into[k] = v


def _google_signature(extra: Any) -> str | None:
    google = extra.get("google") if isinstance(extra, dict) else None
    sig = as_name(google.get("thought_signature")) if isinstance(google, dict) else ""
    return sig or None


def split_json_objects(text: str) -> list[Any] | None:
    """Split ``'{"q":"a"}{"q":"b"}'`` into its top-level JSON values; ``None`` when the
    text is not a sequence of complete JSON values."""
    dec = msgspec.json.Decoder()
    out: list[Any] = []
    depth = 0
    start = None
    in_str = esc = False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            if depth == 0:
                start = i
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0 and start is not None:
                try:
                    out.append(dec.decode(text[start : i + 1]))
                except msgspec.DecodeError:
                    return None
                start = None
        elif depth == 0 and not ch.isspace():
            return None
    return out if depth == 0 and not in_str and out else None


def _split_names(name: str, known: Sequence[str], n: int | None = None) -> list[str] | None:
    """Split a concatenation of known tool names (``"searchsearch"``), longest match first;
    ``None`` unless every piece is a known name (and there are ``n`` of them, when given)."""
    names = sorted(set(known), key=len, reverse=True)
    out: list[str] = []
    rest = name
    while rest:
        for k in names:
            if k and rest.startswith(k):
                out.append(k)
                rest = rest[len(k) :]
                break
        else:
            return None
    return out if out and (n is None or len(out) == n) else None


def _parse_args(text: str) -> tuple[dict[str, Any] | None, str | None, list[Any] | None]:
    """(arguments, raw_arguments, several objects) for the argument text of one call."""
    if not text.strip():
        return {}, None, None
    try:
        value = msgspec.json.decode(text)
    except RecursionError:  # nested past msgspec's depth limit (~1,000): kept as text, never run
        return None, text, None
    except msgspec.DecodeError:
        many = split_json_objects(text)
        if many and len(many) > 1 and all(isinstance(v, dict) for v in many):
            return None, text, many
        return None, text, None
    if isinstance(value, dict):
        return value, None, None
    if isinstance(value, str):  # double-encoded arguments: a JSON string holding the object
        try:
            inner = msgspec.json.decode(value)
            if isinstance(inner, dict):
                return inner, None, None
        except (msgspec.DecodeError, RecursionError):
            pass
    return None, text, None


_FINISH = {
    "stop": StopReason.STOP,
    "length": StopReason.LENGTH,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
}


_NEXT = Stream.Next
_STOP = StopReason.STOP
_OPENAI = ModelProviders.OpenAI


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


class ChatStreamParser(msgspec.Struct, gc=False):
    """Turns Chat Completions stream events (or one whole ``chat.completion`` JSON answer) into
    ``Stream`` items. ``feed`` per event, then ``finish`` (or ``fail`` with an error text).
    Made as ``ChatStreamParser(model_id, price_key, tool_names, emulated_call=..., origin=...)``;
    the other fields are its running state.

    ``origin`` names the server (its host) for continuation tokens: a message that carries one
    (a Gemini ``thought_signature``, OpenRouter ``reasoning_details``) gets
    ``Messages.Assistant.origin = origin`` (docs/providers.md).

    The parser holds only the stream's data and nothing that refers back to it, so it is not
    tracked by the cycle collector (msgspec ``gc=False``; the lists and dicts it holds still
    are): a process with thousands of streams in flight scans fewer objects.
    """

    model_id: ModelId
    price_key: tuple[str | None, str | None] | None
    tool_names: Sequence[str]
    emulated_call: bool = False
    """True when the text answer is a JSON tool call (``forced_tool_mode``): not streamed
    as text, parsed into one ``ToolCall`` at the end."""
    origin: str | None = None
    timer: Timer = msgspec.field(default_factory=Timer)
    clock: ChunkClock = msgspec.field(default_factory=ChunkClock)
    """The chunks' timestamps (:class:`~._wire_clock.ChunkClock`)."""
    text: str = ""
    text_id: str | None = None
    thinking: str = ""
    thinking_id: str | None = None
    last: str | None = None
    """``"text"`` or ``"thinking"``: the output streamed last."""
    calls: tuple[_Call, ...] = ()
    """The streamed tool calls (a tuple, grown per new call: most answers have none)."""
    by_index: dict[Any, _Call] = msgspec.field(default_factory=dict)
    usage: UsageReport = msgspec.field(default_factory=UsageReport)
    finish_reason: str | None = None
    refusal: str = ""
    fingerprint: str | None = None
    details: list[dict[str, Any]] | None = None
    """OpenRouter ``reasoning_details``, merged across deltas (``None`` until the first)."""
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    """The message's ``extra_content`` (Gemini: ``{"google": {"thought_signature"}}``)."""
    reasoning_content: str = ""
    """The reasoning text when sent as ``reasoning_content``, for replay (see
    :meth:`message_fields`)."""
    done: bool = False
    events: int = 0

    # -- events ----------------------------------------------------------------------------

    def feed(self, ev: SseEvent) -> list[ModelStream] | None:
        """Items for one event. Raises ``WireError`` for malformed data (never another
        exception: anything a server sends ends, at worst, in the contract's error tail)."""
        try:
            data = ev.data
            if ev.event == "json":
                return self._whole(data)
            if data == "[DONE]":
                self.done = True
                return None
            if not data:
                return None
            try:
                chunk = _DECODE_CHUNK(data)
            except msgspec.DecodeError:  # malformed, or half a surrogate pair: the general decoding
                chunk = _decode_chunk(data, "stream event")
            if chunk.error is not None:
                _in_band_error(chunk.error)
            self.events += 1
            fp = chunk.system_fingerprint
            if fp and fp != self.fingerprint:  # the same on every chunk: read once
                self.fingerprint = as_name(fp)
            choices = chunk.choices
            if chunk.usage is None and choices is not None and len(choices) == 1:
                # the common chunks: one choice holding only a text delta or only a fragment of a
                # call's arguments (what _delta and _tool_fragment do for them, fewer checks)
                c = choices[0]
                d = c.delta
                if (
                    d is not None
                    and c.index == 0
                    and c.finish_reason is None
                    and d.reasoning_content is None
                    and d.reasoning is None
                    and d.thinking is None
                    and d.reasoning_details is None
                    and d.extra_content is None
                    and d.refusal is None
                ):
                    content = d.content
                    calls = d.tool_calls
                    if calls is None:
                        if type(content) is str:
                            return self._text_delta(content) or None
                    elif content is None and len(calls) == 1 and self._arguments_fragment(calls[0]):
                        return None
            out: list[ModelStream] | None = None
            if chunk.usage is not None:
                self._set_usage(chunk.usage)
                out = [Stream.Pending(ModelState.GeneratingTokens(self.usage))]
            if chunk.choices:
                for choice in chunk.choices:
                    if choice.index != 0:
                        continue  # n > 1 is not requested; only the first choice is read
                    if choice.finish_reason:
                        self.finish_reason = as_name(choice.finish_reason)
                    d = choice.delta or choice.message
                    if d is None:
                        continue
                    items = self._delta(d)
                    if items:
                        out = items if out is None else out + items
            return out
        except WireError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
            raise WireError(
                f"malformed stream event ({type(exc).__name__}: {exc}): {ev.data[:200]!r}"
            ) from None

    def _msg(
        self,
        content: Any,
        msg_id: str,
        stop: StopReason = StopReason.STOP,
        meta: Any = None,
        signature: str | None = None,
    ) -> ModelStream:
        token = (
            signature is not None
            or getattr(content, "signature", None) is not None
            or isinstance(content, ThinkingContent)
        )
        return Stream.Next(
            AssistantMessage(
                id=msg_id,
                model=self.model_id,
                content=content,
                usage=self.usage,
                stop_reason=stop,
                provider=ModelProviders.OpenAI,
                metadata=meta,
                signature=signature,
                origin=self.origin if token else None,
                timestamp=self.clock.now(),
            )
        )

    def _thinking_item(self) -> ModelStream:
        if self.thinking_id is None:
            self.thinking_id = new_scru128()
        self.last = "thinking"
        return self._msg(ThinkingContent(visible(self.thinking)), self.thinking_id)

    def _delta(self, d: _Delta) -> list[ModelStream]:
        content = d.content
        if (
            type(content) is str
            and d.reasoning_content is None
            and d.reasoning is None
            and d.thinking is None
            and d.reasoning_details is None
            and d.extra_content is None
            and d.refusal is None
            and d.tool_calls is None
        ):
            return self._text_delta(content)  # the common chunk: text only
        items: list[ModelStream] = []
        reasoning = _reasoning_of(d)
        if reasoning and reasoning is d.reasoning_content:
            self.reasoning_content = join(self.reasoning_content, reasoning)
        content = d.content
        text = ""
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):  # a list of parts (some compatible servers)
            for part in content:
                t, r = _part_text(part)
                text += t
                reasoning += r
        if d.reasoning_details is not None:
            if self.details is None:
                self.details = []
            if _merge_details(self.details, d.reasoning_details):
                self.timer.first()
        _merge_extra(self.extra, d.extra_content)
        if reasoning:
            self.timer.first()
            if self.last == "text":  # reasoning again after text: a new output (ids never return)
                self.thinking, self.thinking_id = "", None
            self.thinking = join(self.thinking, reasoning)
            items.append(self._thinking_item())
        if text:
            self.timer.first()
            if self.last == "thinking" and self.text_id is not None:  # text again after reasoning
                self.text, self.text_id = "", None
            self.text = join(self.text, text)
            if not self.emulated_call:
                if self.text_id is None:
                    self.text_id = new_scru128()
                self.last = "text"
                items.append(self._msg(TextContent(visible(self.text)), self.text_id))
        if isinstance(d.refusal, str) and d.refusal:
            self.timer.first()
            self.refusal = join(self.refusal, d.refusal)
        if d.tool_calls:
            self.timer.first()
            for tc in d.tool_calls:
                self._tool_fragment(tc)
        return items

    def _text_delta(self, text: str) -> list[ModelStream]:
        """:meth:`_delta` of a chunk holding only ``content`` text (same items, fewer checks:
        this runs once per streamed token)."""
        if not text:
            return []
        if self.timer.t_first is None:
            self.timer.first()
        if self.last == "thinking" and self.text_id is not None:  # text again after reasoning
            self.text, self.text_id = "", None
        before = self.text
        if text.isascii() and not (before and "\ud800" <= before[-1] <= "\udbff"):
            self.text = text = before + text  # join(before, text) of an ASCII piece, inlined
        else:
            self.text = text = join(before, text)
        if self.emulated_call:
            return []
        mid = self.text_id
        if mid is None:
            mid = self.text_id = new_scru128()
        self.last = "text"
        # visible(text), inlined (text is not empty here)
        shown = text[:-1] if "\ud800" <= text[-1] <= "\udbff" else text
        return [
            _NEXT(
                AssistantMessage(
                    id=mid,
                    model=self.model_id,
                    content=TextContent(shown),
                    usage=self.usage,
                    stop_reason=_STOP,
                    provider=_OPENAI,
                    timestamp=self.clock.now(),
                )
            )
        ]

    def _arguments_fragment(self, tc: _ToolDelta) -> bool:
        """:meth:`_tool_fragment` of a delta holding only the next piece of an open call's
        arguments text (no id, name or ``extra_content``; an integer ``index`` already seen):
        the piece is kept, True. False (nothing done) for any other delta."""
        fn = tc.function
        if fn is None or fn.name is not None or tc.id is not None or tc.extra_content is not None:
            return False
        args = fn.arguments
        index = tc.index
        if type(args) is not str or type(index) is not int:
            return False
        cur = self.by_index.get(index)
        if cur is None:
            return False
        if self.timer.t_first is None:
            self.timer.first()
        if args:
            cur.parts.append(args)
        return True

    def _tool_fragment(self, tc: _ToolDelta) -> None:
        fn = tc.function
        name = as_name(fn.name) if fn is not None else ""
        call_id = as_name(tc.id) or None
        args = fn.arguments if fn is not None else None
        key = _index_key(tc.index)
        cur = self.by_index.get(key) if key is not None else (self.calls[-1] if self.calls else None)
        new = cur is None
        if not new and call_id and cur is not None and cur.id and call_id != cur.id:
            new = True  # a new id at a used index starts a new call
        if (
            not new
            and isinstance(args, dict)
            and args
            and cur is not None
            and (cur.args_obj is not None or cur.parts)
        ):
            new = True  # a complete object after the current call's arguments: another call
        if new:
            cur = _Call(call_id, name)
            self.calls += (cur,)
            if key is not None:
                self.by_index[key] = cur
        else:
            assert cur is not None
            if call_id and not cur.id:
                cur.id = call_id
            if name and name != cur.name:
                cur.name += name  # streamed in pieces; concatenated repeats are split in _calls()
        sig = _google_signature(tc.extra_content)
        if sig is not None:
            cur.signature = sig
        if isinstance(args, dict):
            if args or (cur.args_obj is None and not cur.parts):  # an empty final {} erases nothing
                cur.args_obj = args
        elif isinstance(args, str):
            if args:
                cur.parts.append(args)
        elif args is not None:
            cur.parts.append(msgspec.json.encode(args).decode())

    def _set_usage(self, u: _Usage) -> None:
        prompt = _num(u.prompt_tokens)
        cached = _num(u.prompt_tokens_details.cached_tokens) if u.prompt_tokens_details else 0.0
        reasoning = _num(u.completion_tokens_details.reasoning_tokens) if u.completion_tokens_details else 0.0
        total = _num(u.total_tokens) if u.total_tokens is not None else None
        output = billed_output(_num(u.completion_tokens), reasoning, prompt, total)
        if total is None or output != _num(u.completion_tokens):
            total = prompt + output
        report = UsageReport(
            input=max(prompt - cached, 0.0), output=output, cache_read=cached, total_tokens=total
        )
        self.usage = priced(self.model_id.name(), report, self.price_key)

    def _whole(self, data: str) -> list[ModelStream] | None:
        """A non-streamed ``chat.completion`` answer (a server that ignored ``stream``): the
        whole answer arrived at once, so that is its time to first token."""
        chunk = _decode_chunk(data, "response")
        for choice in chunk.choices or []:
            if choice.index == 0 and choice.message is not None and choice.message.tool_calls:
                for i, tc in enumerate(choice.message.tool_calls):
                    if tc.index is None:
                        tc.index = i
        out = self.feed(SseEvent("message", data))
        if chunk.choices:
            self.timer.first()
        self.done = True
        return out

    # -- the end ---------------------------------------------------------------------------

    def _stop(self, has_calls: bool) -> tuple[StopReason, list[Any]]:
        meta: list[Any] = []
        fr = self.finish_reason
        if fr is None:
            stop = StopReason.TOOL_USE if has_calls else StopReason.STOP
        else:
            stop = _FINISH.get(fr) or StopReason.parse(fr)
            if has_calls and stop == StopReason.STOP:
                stop = StopReason.TOOL_USE  # "stop" although tools were called
        refusal = final(self.refusal)
        if refusal and not has_calls and stop == StopReason.STOP:
            stop = StopReason.REFUSAL  # the model declined: a typed outcome (docs/providers.md)
        if fr == "content_filter":
            meta.append(GenerationMetadata.RefusalReason(reason="content_filter"))
        if refusal:
            meta.append(GenerationMetadata.RefusalReason(reason=refusal))
        if self.fingerprint:
            meta.append(GenerationMetadata.SystemFingerprint(value=self.fingerprint))
        meta.append(self.timer.metadata(self.usage.output or None))
        return stop, meta

    def message_fields(self) -> str | None:
        """The continuation fields of the answer's message, as the JSON text of an object
        (``reasoning_details``, ``extra_content``), ``None`` when there are none. Kept in the
        final output's ``Messages.Assistant.signature`` and sent back on that assistant
        message to the same server (docs/providers.md)."""
        fields: dict[str, Any] = {}
        if self.reasoning_content and self.calls:  # DeepSeek / Moonshot: needed on tool-call turns
            fields["reasoning_content"] = final(self.reasoning_content)
        if self.details:
            fields["reasoning_details"] = self.details
        if self.extra:
            fields["extra_content"] = self.extra
        if not fields:
            return None
        try:
            return msgspec.json.encode(fields).decode()
        except UnicodeEncodeError:  # a lone surrogate inside: not a token any server issued
            return None

    def _tool_calls(self) -> list[ToolCall]:
        out: list[ToolCall] = []
        seen: set[str] = set()
        for c in self.calls:
            if c.args_obj is not None:
                parsed: list[tuple[dict[str, Any] | None, str | None]] = [(c.args_obj, None)]
                if c.parts:  # an object plus string fragments: keep the text as received
                    parsed = [(None, msgspec.json.encode(c.args_obj).decode() + join_all(c.parts))]
                names = [c.name]
            else:
                args, raw, many = _parse_args(join_all(c.parts))
                if many is not None:  # several calls glued together at one index
                    split = _split_names(c.name, self.tool_names, len(many))
                    if split is None:
                        one = _split_names(c.name, self.tool_names, 1)
                        base = one[0] if one else c.name
                        split = [base] * len(many)
                    parsed = [(v, None) for v in many]
                    names = split
                else:
                    parsed = [(args, raw)]
                    names = [c.name]
            if len(names) == 1 and names[0] not in self.tool_names and self.tool_names:
                # a name repeated by a server that re-sends it on every fragment
                rep = _split_names(names[0], self.tool_names)
                if rep and len(set(rep)) == 1:
                    names = [rep[0]]
            for i, (args, raw) in enumerate(parsed):
                cid = (
                    c.id if (i == 0 and c.id and c.id not in seen) else new_call_id()
                )  # empty or repeated ids
                seen.add(cid)
                sig = c.signature if i == 0 else None
                out.append(ToolCall(id=cid, name=names[i], arguments=args, raw_arguments=raw, signature=sig))
        return out

    def _emulated_call(self) -> ToolCall:
        """The JSON answer of ``forced_tool_mode="json_schema"`` as one call (arguments ``None``
        and the text in ``raw_arguments`` when it is not the expected object)."""
        text = final(self.text)
        try:
            doc = msgspec.json.decode(text)
        except (msgspec.DecodeError, RecursionError):
            doc = None
        name = doc.get("name") if isinstance(doc, dict) else None
        args = doc.get("arguments") if isinstance(doc, dict) else None
        if not isinstance(name, str):
            name = self.tool_names[0] if len(self.tool_names) == 1 else ""
        if isinstance(args, dict):
            return ToolCall(id=new_call_id(), name=name, arguments=args)
        return ToolCall(id=new_call_id(), name=name, arguments=None, raw_arguments=text)

    def finish(self) -> list[ModelStream]:
        """The final items of a stream that ended normally (or an error if it ended early, or
        when it held no chunk at all: a bare ``data: [DONE]`` is not an answer)."""
        try:
            return self._finish()
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
            return self.fail(f"malformed stream ({type(exc).__name__}: {exc})")

    def _finish(self) -> list[ModelStream]:
        if self.finish_reason is None and not self.done:
            return self.fail("stream ended before completion (no finish_reason and no [DONE])")
        if self.events == 0:
            return self.fail("the stream held no completion chunk (only [DONE])")
        calls = self._tool_calls()
        if self.emulated_call and not calls:
            calls = [self._emulated_call()]
        stop, meta = self._stop(bool(calls))
        fields = self.message_fields()
        if fields is not None:
            self.timer.first()
        out: list[ModelStream] = []
        if calls:
            for i, tc in enumerate(calls):
                last = i == len(calls) - 1
                out.append(self._msg(tc, new_scru128(), stop, meta, fields if last else None))
        elif self.last == "thinking" and self.thinking_id is not None:
            thinking = ThinkingContent(final(self.thinking))
            out.append(self._msg(thinking, self.thinking_id, stop, meta, fields))
        else:
            text = TextContent(final(self.text))
            out.append(self._msg(text, self.text_id or new_scru128(), stop, meta, fields))
        out.append(Stream.Pending(ModelState.Finished()))
        return out

    def fail(self, detail: str) -> list[ModelStream]:
        """The error tail (partial output already streamed stays valid)."""
        return error_items(detail, self.model_id, ModelProviders.OpenAI, self.usage)
