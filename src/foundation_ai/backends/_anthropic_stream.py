"""Anthropic Messages stream events (and whole responses) -> ``Stream[Messages, ModelState]``.

Pure, no I/O: :class:`AnthropicStreamParser` is fed decoded SSE ``data`` objects one at a time
and returns the stream items they produce, following the Model contract of ``backends/base.py``
in snapshot mode. Sources: Anthropic "Streaming messages" docs (event order ``message_start``,
``content_block_start`` / ``_delta`` / ``_stop``, ``message_delta``, ``message_stop``, ``ping``,
``error``; delta types ``text_delta``, ``thinking_delta``, ``signature_delta``,
``input_json_delta``; https://docs.anthropic.com/en/docs/build-with-claude/streaming) and
docs/providers.md. Event fields of the wrong type never raise anything but
:class:`AnthropicStreamError`; text survives a surrogate pair split over two events.

- Each content block is one output with its own message id (a fresh SCRU128).
- Text and thinking chunks hold the whole text so far; a thinking chunk is sent again when its
  ``signature_delta`` arrives; a ``redacted_thinking`` block is one chunk
  (``ThinkingContent(redacted=True, signature=data)``).
- A ``tool_use`` block's ``input_json_delta`` fragments are joined by block ``index``; its
  ``content_block_start`` may hold no ``input`` at all and a tool without arguments sends no
  fragment: its input is ``{}``. The call is emitted once, complete, when the next block
  starts or the final ``message_delta`` arrives (so that the last call carries the stop reason).
  Arguments that do not parse as a JSON object (cut off by ``max_tokens``) give
  ``arguments=None`` and the text in ``raw_arguments``.
- ``message_delta`` carries the stop reason and cumulative usage: the last output is repeated
  once more (same id) carrying them and the timing metadata. A refusal (``stop_reason:
  "refusal"``) ends with ``StopReason.REFUSAL`` and a ``RefusalReason`` holding
  ``stop_details.explanation`` and ``category``.
- An ``error`` event raises :class:`AnthropicStreamError` (the backend turns it into the
  contract's error tail); so does a stream that ends before ``message_delta``, a
  ``content_block_*`` event without an integer ``index`` (it cannot be placed: applied to block
  0 it would turn a closed thinking block into visible text) and a ``message_delta`` whose
  ``delta`` is not an object (its stop reason would be lost).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..errors import ProviderError
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
from ._common import SnapshotParser
from ._http import Timer
from ._wire_text import MALFORMED as _MALFORMED
from ._wire_text import as_name as _name
from ._wire_text import as_object as _obj
from ._wire_text import as_str as _str
from ._wire_text import decode_event, final, join, join_all, visible

__all__ = ["AnthropicStreamError", "AnthropicStreamParser", "error_event_text", "map_stop_reason", "usage_of"]

_DECODE = msgspec.json.Decoder().decode
_EMPTY_USAGE = UsageReport()


class AnthropicStreamError(ProviderError):
    """An ``error`` event in the stream, a malformed event, or a stream that ended early;
    ``detail`` is the text."""


def error_event_text(doc: Any) -> str:
    """``"<message> (type: <type>)"`` for an Anthropic ``{"type": "error", "error": {...}}``."""
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        msg = str(err.get("message") or "unknown error")
        kind = err.get("type")
        return f"{msg} (type: {kind})" if kind else msg
    return f"provider error: {str(doc)[:1000]}"


def usage_of(u: Any, prev: UsageReport = _EMPTY_USAGE) -> UsageReport:
    """A :class:`UsageReport` from an Anthropic ``usage`` object; absent fields keep ``prev``.

    ``input_tokens`` -> input (it excludes cache reads and writes), ``output_tokens`` -> output,
    ``cache_read_input_tokens`` -> cache_read, ``cache_creation_input_tokens`` -> cache_write;
    the total is their sum. Units: tokens.
    """
    if not isinstance(u, dict):
        return prev

    def count(name: str, before: float) -> float:
        v = u.get(name)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else before

    i = count("input_tokens", prev.input)
    o = count("output_tokens", prev.output)
    r = count("cache_read_input_tokens", prev.cache_read)
    w = count("cache_creation_input_tokens", prev.cache_write)
    if (i, o, r, w) == (prev.input, prev.output, prev.cache_read, prev.cache_write):
        return prev
    return UsageReport(input=i, output=o, cache_read=r, cache_write=w, total_tokens=i + o + r + w)


def map_stop_reason(value: Any, details: Any = None) -> tuple[StopReason, list[Any] | None]:
    """Anthropic ``stop_reason`` (and ``stop_details``) -> (``StopReason``, extra metadata).

    end_turn / stop_sequence -> Stop, max_tokens and model_context_window_exceeded -> Length,
    tool_use -> ToolUse, refusal -> ``StopReason.REFUSAL`` (``Message("refusal")``) plus
    ``RefusalReason``: its ``reason`` is ``stop_details.explanation`` when the API sent one
    (else ``"refusal"``) and its ``category`` ``stop_details.category``; pause_turn and others ->
    ``Message(value)``. ``None`` (or a value that is not a string) -> Stop. Source:
    https://docs.anthropic.com/en/api/handling-stop-reasons and docs/providers.md.
    """
    if not isinstance(value, str) or not value:
        return StopReason.STOP, None
    if value == "model_context_window_exceeded":  # the output filled the context window
        return StopReason.LENGTH, None
    stop = StopReason.parse(value)
    if value == "refusal":
        d = _obj(details)
        reason = _str(d.get("explanation")) or value
        category = _str(d.get("category")) or None
        return StopReason.REFUSAL, [GenerationMetadata.RefusalReason(reason, category=category)]
    return stop, None


def tool_arguments(raw: str, initial: Any = None) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, raw_arguments) for a tool call's joined argument text.

    No text: ``initial`` when it is an object, else ``{}``. A JSON object: (it, ``None``).
    Anything else (truncated or malformed JSON, a non-object): (``None``, the text).
    """
    if not raw.strip():
        return (initial if isinstance(initial, dict) else {}), None
    try:
        value = _DECODE(raw)
    except (msgspec.DecodeError, RecursionError):  # RecursionError: nested past ~1,000 levels
        return None, raw
    if isinstance(value, dict):
        return value, None
    return None, raw


class _FastDelta(msgspec.Struct, gc=False):
    type: str = ""
    text: str = ""
    partial_json: str = ""


class _FastEvent(msgspec.Struct, gc=False):
    """The fields of a ``content_block_delta`` event that :meth:`AnthropicStreamParser.feed_data`
    reads without building a dict (typed: a field of another type fails the decode and the
    event takes the dict path, which reads it as the module docstring says)."""

    type: str = ""
    index: int = -1
    delta: _FastDelta | None = None


_FAST_DECODE = msgspec.json.Decoder(_FastEvent).decode
_NEXT = Stream.Next
_STOP = StopReason.STOP


def _index(ev: dict[str, Any]) -> int:
    """The ``index`` of a content-block event: every ``content_block_*`` event carries the
    integer position of its block (Anthropic "Streaming messages"). Without one, the event
    cannot be placed (applying it to block 0 would turn a closed thinking block into text).

    Raises:
        AnthropicStreamError: no ``index``, or one that is not a non-negative integer.
    """
    idx = ev.get("index")
    if not isinstance(idx, int) or isinstance(idx, bool) or idx < 0:
        what = "no index" if "index" not in ev else f"index {str(idx)[:40]}"
        raise AnthropicStreamError(f"malformed stream event: {ev.get('type')} with {what}")
    return idx


class _Block:
    __slots__ = ("call_id", "emitted", "initial", "kind", "mid", "name", "parts", "signature", "text")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.mid = new_scru128()
        self.text = ""
        self.signature: str | None = None
        self.call_id = ""
        self.name = ""
        self.initial: Any = None
        self.parts: list[str] = []
        self.emitted = False


class AnthropicStreamParser(SnapshotParser):
    """Turns Anthropic stream events into model stream items (see the module docstring).

    ``AnthropicStreamParser(model, *, provider=ModelProviders.Anthropic, timer=None,
    price_key=None)`` (see :class:`~._common.SnapshotParser`). ``feed(event)`` takes one decoded
    ``data`` object and returns the items to yield; ``finish()`` is called when the stream ends
    and returns the last items (or raises :class:`AnthropicStreamError` when the stream was cut
    short).
    """

    default_provider = ModelProviders.Anthropic

    def _init_state(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.pending: _Block | None = None
        self.last: tuple[str, Any] | None = None  # (message id, content) of the latest output
        self.stopped = False
        self.texts: list[str] = []
        self.stop_reason: StopReason = StopReason.STOP

    def set_usage(self, u: Any) -> None:
        """Update the cumulative usage from an Anthropic ``usage`` object, priced with
        genai-prices when ``price_key`` (provider id, API URL) is set."""
        report = usage_of(u, self.usage)
        if report is self.usage:
            return
        self.usage = priced(self.model.name(), report, self.price_key)

    # -- building chunks ---------------------------------------------------------------------

    def _chunk(
        self, mid: str, content: Any, stop: Any = StopReason.STOP, meta: list[Any] | None = None
    ) -> Stream[Any, Any]:
        self.last = (mid, content)
        return self._next(mid, content, stop, meta)

    def _tool_content(self, b: _Block) -> ToolCall:
        args, raw = tool_arguments(join_all(b.parts), b.initial)
        return ToolCall(
            id=b.call_id or new_call_id("toolu_"),
            name=b.name,
            arguments=args,
            signature=b.signature,
            raw_arguments=raw,
        )

    def _flush_pending(self, out: list[Stream[Any, Any]]) -> None:
        b = self.pending
        if b is not None:
            self.pending = None
            b.emitted = True
            out.append(self._chunk(b.mid, self._tool_content(b)))

    # -- events ------------------------------------------------------------------------------

    def feed(self, ev: Any) -> list[Stream[Any, Any]]:
        """The items produced by one event (a decoded ``data`` object).

        Raises:
            AnthropicStreamError: an ``error`` event, or an event whose fields have the wrong
                types (never another exception, whatever the server sends).
        """
        try:
            return self._feed(ev)
        except _MALFORMED as exc:
            raise AnthropicStreamError(f"malformed stream event ({type(exc).__name__}: {exc})") from None

    def feed_data(self, event: str, data: str) -> list[Stream[Any, Any]]:
        """:meth:`feed` of one event's raw ``data`` text (``event``: its SSE name, for the error
        text): the same items. A text, thinking or JSON-fragment delta is decoded straight into
        a typed struct (built once) and turned into its chunk without a dict; any other event is
        decoded as JSON (tolerating half a surrogate pair, ``_wire_text``) and fed to
        :meth:`feed`. Empty data and ``[DONE]`` give no items.

        Raises:
            ProviderError: ``data`` is not JSON.
            AnthropicStreamError: as :meth:`feed`.
        """
        try:
            fast: _FastEvent | None = _FAST_DECODE(data)
        except msgspec.DecodeError:  # not JSON, or a field of another type: the general path
            fast = None
        if fast is not None and fast.type == "content_block_delta" and fast.index >= 0:
            d = fast.delta
            if d is not None:
                dt = d.type
                if dt == "text_delta":
                    return self._text_delta(fast.index, d.text)
                if dt == "input_json_delta":
                    self._block_at(fast.index, "tool_use").parts.append(d.partial_json)
                    if self.timer.t_first is None:
                        self.timer.first()
                    return []
        if not data or data == "[DONE]":
            return []
        try:
            doc = decode_event(data)
        except msgspec.DecodeError as exc:
            raise ProviderError(f"malformed event data ({event}): {exc}: {data[:200]!r}") from None
        return self.feed(doc)

    def _block_at(self, idx: int, kind: str) -> _Block:
        b = self.blocks.get(idx)
        if b is None:  # a delta without its start: open the block it implies
            b = self.blocks[idx] = _Block(kind)
        return b

    def _text_delta(self, idx: int, text: str) -> list[Stream[Any, Any]]:
        """The chunk of a ``text_delta`` of block ``idx`` (what :meth:`_delta` gives, inlined:
        this runs once per streamed token)."""
        b = self.blocks.get(idx)
        if b is None:
            b = self.blocks[idx] = _Block("text")
        before = b.text
        if text.isascii() and not (before and "\ud800" <= before[-1] <= "\udbff"):
            b.text = text = before + text  # join(before, text) of an ASCII piece, inlined
        else:
            b.text = text = join(before, text)
        b.emitted = True
        if self.timer.t_first is None:
            self.timer.first()
        # visible(text), inlined
        content = TextContent(text[:-1] if text and "\ud800" <= text[-1] <= "\udbff" else text)
        mid = b.mid
        self.last = (mid, content)
        return [
            _NEXT(
                AssistantMessage(
                    id=mid,
                    model=self.model,
                    content=content,
                    usage=self.usage,
                    stop_reason=_STOP,
                    provider=self.provider,
                    timestamp=self.clock.now(),
                )
            )
        ]

    def _feed(self, ev: Any) -> list[Stream[Any, Any]]:
        t = ev.get("type") if isinstance(ev, dict) else None
        if t == "content_block_delta":
            return self._delta(ev)
        if t == "content_block_start":
            return self._start(ev)
        if t == "content_block_stop":
            return self._stop(ev)
        if t == "message_start":
            self.set_usage(_obj(ev.get("message")).get("usage"))
            return [Stream.Pending(ModelState.GeneratingTokens(self.usage))]
        if t == "message_delta":
            return self._message_delta(ev)
        if t == "message_stop":
            self.stopped = True
            return []
        if t == "error":
            raise AnthropicStreamError(error_event_text(ev))
        return []  # ping and event types added later are ignored

    def _block(self, ev: dict[str, Any], kind: str) -> _Block:
        idx = _index(ev)
        b = self.blocks.get(idx)
        if b is None:  # a delta without its start: open the block it implies
            b = self.blocks[idx] = _Block(kind)
        return b

    def _delta(self, ev: dict[str, Any]) -> list[Stream[Any, Any]]:
        d = _obj(ev.get("delta"))
        dt = d.get("type")
        if dt == "text_delta":
            b = self._block(ev, "text")
            b.text = join(b.text, _str(d.get("text")))
            b.emitted = True
            self.timer.first()
            return [self._chunk(b.mid, TextContent(visible(b.text)))]
        if dt == "input_json_delta":
            self._block(ev, "tool_use").parts.append(_str(d.get("partial_json")))
            self.timer.first()
            return []
        if dt == "thinking_delta":
            b = self._block(ev, "thinking")
            b.text = join(b.text, _str(d.get("thinking")))
            b.emitted = True
            self.timer.first()
            return [self._chunk(b.mid, ThinkingContent(visible(b.text), signature=b.signature))]
        if dt == "signature_delta":
            b = self._block(ev, "thinking")
            b.signature = (b.signature or "") + _name(d.get("signature"))
            b.emitted = True
            return [self._chunk(b.mid, ThinkingContent(visible(b.text), signature=b.signature))]
        return []  # citations_delta and future delta types

    def _start(self, ev: dict[str, Any]) -> list[Stream[Any, Any]]:
        out: list[Stream[Any, Any]] = []
        self._flush_pending(out)
        cb = _obj(ev.get("content_block"))
        kind = _str(cb.get("type"))
        b = self.blocks[_index(ev)] = _Block(kind)
        if kind == "text":
            b.text = join("", _str(cb.get("text")))
            if b.text:
                b.emitted = True
                self.timer.first()
                out.append(self._chunk(b.mid, TextContent(visible(b.text))))
        elif kind == "thinking":
            b.text = join("", _str(cb.get("thinking")))
            b.signature = _name(cb.get("signature")) or None
            if b.text:
                b.emitted = True
                self.timer.first()
                out.append(self._chunk(b.mid, ThinkingContent(visible(b.text), signature=b.signature)))
        elif kind == "redacted_thinking":
            b.emitted = True
            self.timer.first()
            out.append(
                self._chunk(b.mid, ThinkingContent("", signature=_name(cb.get("data")), redacted=True))
            )
        elif kind == "tool_use":
            b.call_id = _name(cb.get("id"))
            b.name = _name(cb.get("name"))
            b.initial = cb.get("input")  # optional: absent in some streams
            b.signature = _name(cb.get("signature")) or None
        return out

    def _stop(self, ev: dict[str, Any]) -> list[Stream[Any, Any]]:
        b = self.blocks.get(_index(ev))
        if b is None or b.emitted:
            return []
        out: list[Stream[Any, Any]] = []
        if b.kind == "tool_use":
            self._flush_pending(out)
            self.pending = b
            b.emitted = True  # emitted from `pending`
        elif b.kind == "text":
            b.emitted = True
            out.append(self._chunk(b.mid, TextContent(final(b.text))))
        elif b.kind == "thinking":  # empty text with a signature is still an output
            b.emitted = True
            out.append(self._chunk(b.mid, ThinkingContent(final(b.text), signature=b.signature)))
        return out

    def _message_delta(self, ev: dict[str, Any]) -> list[Stream[Any, Any]]:
        d = ev.get("delta")
        if not isinstance(d, dict):
            raise AnthropicStreamError(
                f"malformed stream event: message_delta without a delta object (delta: {str(d)[:100]})"
            )
        self.set_usage(ev.get("usage"))
        stop, meta = map_stop_reason(d.get("stop_reason"), d.get("stop_details"))
        if stop.is_refusal():
            self.timer.first()  # a refusal is the answer: its arrival is the first token
        self.stop_reason = stop
        out: list[Stream[Any, Any]] = []
        open_tools = [b for b in self.blocks.values() if b.kind == "tool_use" and not b.emitted]
        for b in open_tools:  # cut off before content_block_stop
            self._flush_pending(out)
            b.emitted = True
            self.pending = b
        self.texts = [final(b.text) for b in self.blocks.values() if b.kind == "text"]
        timing = self.timer.metadata(self.usage.output)
        metadata = [*(meta or ()), timing]
        held = self.pending
        if held is not None:
            self.pending = None
            out.append(self._chunk(held.mid, self._tool_content(held), stop, metadata))
        elif self.last is not None:
            content = self.last[1]
            block = next((b for b in self.blocks.values() if b.mid == self.last[0]), None)
            if block is not None and isinstance(content, TextContent):  # the text is complete now
                content = TextContent(final(block.text), content.signature)
            elif block is not None and isinstance(content, ThinkingContent):
                content = msgspec.structs.replace(content, thinking=final(block.text))
            out.append(self._chunk(self.last[0], content, stop, metadata))
        else:
            out.append(self._chunk(new_scru128(), TextContent(""), stop, metadata))
        self.finished = True
        return out

    def finish(self) -> list[Stream[Any, Any]]:
        """Items due when the stream ends: ``Finished`` after a complete message.

        Raises:
            AnthropicStreamError: the stream ended before ``message_delta`` (already complete
                tool calls are returned first through ``flush``).
        """
        if not self.finished:
            raise AnthropicStreamError("the stream ended before message_delta / message_stop")
        return [Stream.Pending(ModelState.Finished())]

    def flush(self) -> list[Stream[Any, Any]]:
        """Outputs held back when the stream fails: a completed tool call, and any tool call
        still open (``arguments=None``, the text so far in ``raw_arguments``: never run)."""
        out: list[Stream[Any, Any]] = []
        if self.finished:
            return out
        try:
            self._flush_pending(out)
        except _MALFORMED:  # a held call that cannot be built: nothing to keep
            return out
        for b in self.blocks.values():
            if b.kind == "tool_use" and not b.emitted:  # never closed: its input is unknown
                b.emitted = True
                call = ToolCall(
                    id=b.call_id or new_call_id("toolu_"),
                    name=b.name,
                    arguments=None,
                    signature=b.signature,
                    raw_arguments=join_all(b.parts),
                )
                out.append(self._chunk(b.mid, call))
        return out


def parse_message(
    doc: Any,
    model: ModelId,
    *,
    provider: str = ModelProviders.Anthropic,
    timer: Timer | None = None,
    price_key: tuple[str | None, str | None] | None = None,
) -> list[Stream[Any, Any]]:
    """The items of a whole (non-streamed) Anthropic message: one ``Next`` per content block,
    the last carrying the stop reason and timing, all carrying the usage; then ``Finished``.

    The same response streamed assembles to the same outputs. An ``{"type": "error"}``
    document raises :class:`AnthropicStreamError`.
    """
    if not isinstance(doc, dict):
        raise AnthropicStreamError(f"unexpected response: {str(doc)[:1000]}")
    if doc.get("type") == "error":
        raise AnthropicStreamError(error_event_text(doc))
    try:
        return _parse_message(doc, model, provider=provider, timer=timer, price_key=price_key)
    except _MALFORMED as exc:
        raise AnthropicStreamError(f"malformed response ({type(exc).__name__}: {exc})") from None


def _parse_message(
    doc: dict[str, Any],
    model: ModelId,
    *,
    provider: str,
    timer: Timer | None,
    price_key: tuple[str | None, str | None] | None,
) -> list[Stream[Any, Any]]:
    parser = AnthropicStreamParser(model, provider=provider, timer=timer, price_key=price_key)
    parser.timer.first()  # the whole answer arrived at once: that is its time to first token
    parser.set_usage(doc.get("usage"))
    out: list[Stream[Any, Any]] = []
    content = doc.get("content")
    for i, block in enumerate(content if isinstance(content, list) else []):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        ev: dict[str, Any] = {"index": i, "content_block": block}
        if kind == "tool_use":
            inp = block.get("input")
            block = {k: v for k, v in block.items() if k != "input"}
            ev = {"index": i, "content_block": block}
            out += parser.feed({"type": "content_block_start", **ev})
            parser.blocks[i].initial = inp if isinstance(inp, dict) else {}
        else:
            out += parser.feed({"type": "content_block_start", **ev})
        out += parser.feed({"type": "content_block_stop", "index": i})
    delta = {"stop_reason": doc.get("stop_reason"), "stop_details": doc.get("stop_details")}
    out += parser.feed({"type": "message_delta", "delta": delta})
    out += parser.finish()
    return _collapse(out)


def _collapse(items: list[Stream[Any, Any]]) -> list[Stream[Any, Any]]:
    """Drop chunks superseded by a later chunk of the same id (a whole response needs one
    chunk per output)."""
    last: dict[str, int] = {}
    for i, it in enumerate(items):
        if isinstance(it, Stream.Next):
            last[it.value.id] = i
    return [it for i, it in enumerate(items) if not isinstance(it, Stream.Next) or last[it.value.id] == i]
