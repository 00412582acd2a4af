"""OpenAI Responses stream events (and whole responses) -> ``Stream[Messages, ModelState]``.

Pure, no I/O: :class:`ResponsesStreamParser` is fed decoded SSE ``data`` objects and returns the
items they produce, following the Model contract of ``backends/base.py`` in snapshot mode.
Source: the OpenAI Responses API streaming events reference
(https://platform.openai.com/docs/api-reference/responses-streaming); docs/providers.md.

- Every output item (``message``, ``function_call``, ``reasoning``) is one output with its own
  message id; events find their item by ``item_id`` (else ``output_index``). The provider's
  item id of a message or function call is kept in ``Messages.Assistant.signature`` (a reasoning
  item's in ``ThinkingContent.item_id``) so that replay can pair them. A reasoning item with
  several summary parts keeps the JSON of its ``summary`` array in ``signature`` too, so that it
  is replayed unchanged; its thinking text is the parts joined by blank lines (raw
  ``reasoning_text`` content parts when there is no summary).
- Outputs are emitted in the order their items were opened, each one finished before the next
  starts, whatever order the server closes them in: chunks of an item opened after one still
  open are held back until the earlier one is closed (``response.output_item.done``), so no
  output id returns after a later output started, and the final stop reason and usage ride on
  the last output.
- ``response.output_text.delta``: text chunks holding the whole text so far.
  ``response.refusal.delta`` / a ``refusal`` content part: the refusal text, as
  ``RefusalReason`` metadata on the item's text output; a response that only refused ends with
  ``StopReason.REFUSAL``.
- ``response.reasoning_summary_text.delta`` (and ``response.reasoning_text.delta``): thinking
  chunks carrying the item id in ``ThinkingContent.item_id``; ``response.output_item.done`` for
  the reasoning item sends it once more with ``signature = encrypted_content`` when that adds
  something — also when the summary is empty and ``encrypted_content`` null: such an item is
  still an output, replayed unchanged.
- ``response.function_call_arguments.delta``: merged by item; the call (``id`` = ``call_id``,
  not the item id) is emitted once, complete, after its item closed, when the next output is
  emitted or the response ends. A final ``arguments`` (``.done``, ``output_item.done``)
  replaces the deltas unless it is empty: an empty one never erases received arguments.
- ``response.completed`` / ``response.incomplete``: usage (``input_tokens`` includes cached
  tokens, which become ``cache_read``; ``output_tokens`` includes reasoning tokens, which stay
  output tokens) and the stop reason (``ToolUse`` when a function call was made,
  ``max_output_tokens`` -> Length, ``content_filter`` -> ``Message`` + ``RefusalReason``);
  the last output is repeated carrying them.
- ``response.failed`` and ``error`` raise :class:`ResponsesStreamError` with the provider's text;
  so does an event whose fields have the wrong types (never another exception).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..errors import ProviderError
from ..ids import new_call_id, new_scru128
from ..pricing import priced
from ..types import (
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
from ._anthropic_stream import tool_arguments
from ._common import SnapshotParser
from ._http import Timer
from ._reasoning_tokens import billed_output
from ._wire_text import MALFORMED as _MALFORMED
from ._wire_text import as_key as _key
from ._wire_text import as_name as _name
from ._wire_text import as_object as _obj
from ._wire_text import as_str as _str
from ._wire_text import final, join, join_all, visible

__all__ = ["ResponsesStreamError", "ResponsesStreamParser", "parse_response", "usage_of"]

_EMPTY_USAGE = UsageReport()
_ENCODE = msgspec.json.encode


def _final_arguments(it: Any, value: Any) -> None:
    """A call's final ``arguments`` (``function_call_arguments.done``, ``output_item.done``)
    replace what the deltas gave, unless they are empty: an empty final value never erases
    arguments already received (some servers send them only in ``.done``, then ``""``)."""
    if isinstance(value, str) and value.strip():
        it.parts = [value]


class ResponsesStreamError(ProviderError):
    """``response.failed``, an ``error`` event, or a stream that ended early."""


def _error_text(err: Any, fallback: str) -> str:
    if isinstance(err, dict):
        msg = err.get("message") or fallback
        code = err.get("code") or err.get("type")
        return f"{msg} (code: {code})" if code else str(msg)
    if isinstance(err, str) and err:
        return err
    return fallback


def usage_of(u: Any) -> UsageReport:
    """A :class:`UsageReport` (tokens) from a Responses ``usage`` object.

    ``input_tokens`` minus ``input_tokens_details.cached_tokens`` -> input; the cached tokens ->
    cache_read; ``output_tokens`` (OpenAI: reasoning tokens included) -> output, plus
    ``output_tokens_details.reasoning_tokens`` only for a server whose ``total_tokens`` shows
    they were left out (:func:`~._reasoning_tokens.billed_output`, docs/providers.md);
    ``total_tokens``.
    """
    if not isinstance(u, dict):
        return _EMPTY_USAGE
    inp = _count(u.get("input_tokens"))
    sent = _count(u.get("output_tokens"))
    reasoning = _count(_obj(u.get("output_tokens_details")).get("reasoning_tokens"))
    cached = _count(_obj(u.get("input_tokens_details")).get("cached_tokens"))
    total = _count(u.get("total_tokens")) if u.get("total_tokens") is not None else None
    out = billed_output(sent, reasoning, inp, total)  # reasoning counted once, whatever the server
    return UsageReport(
        input=max(inp - cached, 0.0),
        output=out,
        cache_read=cached,
        cache_write=0.0,
        total_tokens=total if total is not None and out == sent else inp + out,
    )


def _count(value: Any) -> float:
    """A token count: a JSON number, else 0 (a wrongly typed count reads as absent)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


class _Item:
    __slots__ = (
        "call_id",
        "done",
        "emitted",
        "flushed",
        "item_id",
        "kind",
        "meta",
        "mid",
        "name",
        "parts",
        "refusal",
        "shown",
        "signature",
        "summary_index",
        "summary_json",
        "text",
        "wire_id",
    )

    def __init__(self, kind: str, item_id: str, wire_id: str | None = None) -> None:
        self.kind = kind
        self.item_id = item_id
        self.wire_id = wire_id  # the provider's item id, when it sent one
        self.mid = new_scru128()
        self.text = ""
        self.refusal = ""
        self.parts: list[str] = []
        self.call_id = ""
        self.name = ""
        self.signature: str | None = None
        self.summary_index: Any = -1
        self.summary_json: str | None = None
        self.emitted = False
        self.done = False  # closed by the server (output_item.done)
        self.flushed = False  # its final chunk was emitted (or, for a call, handed to `pending`)
        self.shown: Any = None  # the content of its last chunk
        self.meta: list[Any] | None = None


class ResponsesStreamParser(SnapshotParser):
    """Turns Responses stream events into model stream items (see the module docstring).

    ``ResponsesStreamParser(model, *, provider=ModelProviders.OpenAIResponses, timer=None,
    price_key=None)`` (see :class:`~._common.SnapshotParser`).

    Outputs are emitted in the order their items were opened, each one finished before the next
    starts: a server that keeps an item open while a later one streams (OpenRouter closes the
    reasoning item after the message) gets the later item's chunks held back until the earlier
    one closes, so no output id comes back after a later one started, and the final stop reason
    and usage ride on the last output.
    """

    default_provider = ModelProviders.OpenAIResponses

    def _init_state(self) -> None:
        self.items: dict[str, _Item] = {}
        self.by_index: dict[Any, _Item] = {}
        self.order: list[_Item] = []
        self.pending: _Item | None = None
        self.last: tuple[str, Any, list[Any] | None, str | None] | None = None
        self.called = False

    def set_usage(self, u: Any) -> None:
        """Set the usage from a Responses ``usage`` object, priced with genai-prices when
        ``price_key`` (provider id, API URL) is set."""
        report = usage_of(u)
        self.usage = priced(self.model.name(), report, self.price_key)

    def _chunk(
        self,
        mid: str,
        content: Any,
        stop: Any = StopReason.STOP,
        meta: list[Any] | None = None,
        signature: str | None = None,
    ) -> Any:
        self.last = (mid, content, meta, signature)
        return self._next(mid, content, stop, meta, signature)

    def _call(self, it: _Item) -> ToolCall:
        args, raw = tool_arguments(join_all(it.parts))
        return ToolCall(id=it.call_id or new_call_id(), name=it.name, arguments=args, raw_arguments=raw)

    def _flush_pending(self, out: list[Any]) -> None:
        it = self.pending
        if it is not None:
            self.pending = None
            out.append(self._chunk(it.mid, self._call(it), signature=it.wire_id))

    # -- ordering ------------------------------------------------------------------------------

    def _is_head(self, it: _Item) -> bool:
        """True when every item opened before ``it`` has been flushed."""
        for x in self.order:
            if x is it:
                return True
            if not x.flushed:
                return False
        return True

    def _content(self, it: _Item, *, end: bool) -> Any:
        text = final(it.text) if end else visible(it.text)
        if it.kind == "reasoning":
            return ThinkingContent(text, signature=it.signature, item_id=it.item_id)
        return TextContent(text)

    def _show(self, it: _Item, out: list[Any], *, end: bool = False) -> None:
        """Emit ``it``'s current snapshot (a text or reasoning item) unless nothing changed."""
        content = self._content(it, end=end)
        if it.emitted and (content, it.meta) == it.shown:
            return
        self._flush_pending(out)
        it.emitted = True
        it.shown = (content, it.meta)
        sig = it.summary_json if it.kind == "reasoning" else it.wire_id
        out.append(self._chunk(it.mid, content, meta=it.meta, signature=sig))

    def _finish_item(self, it: _Item, out: list[Any]) -> None:
        """``it`` is the head and closed: its final chunk (a call waits in ``pending`` so that
        the last one can carry the stop reason)."""
        it.flushed = True
        if it.kind == "function_call":
            self._flush_pending(out)
            self.pending = it
        else:
            self._show(it, out, end=True)

    def _advance(self, out: list[Any]) -> None:
        """Flush every closed item at the head of the order; show the new head's snapshot."""
        for it in self.order:
            if it.flushed:
                continue
            if it.done:
                self._finish_item(it, out)
                continue
            if it.kind != "function_call" and (it.text or (it.kind == "reasoning" and it.emitted)):
                self._show(it, out)
            return

    def _find(self, ev: dict[str, Any], kind: str) -> _Item:
        iid = _str(ev.get("item_id"))
        it = self.items.get(iid) if iid else None
        if it is None:
            it = self.by_index.get(_key(ev.get("output_index")))
        if it is None:  # an event for an item we were not told about: open it
            it = self._open({"type": kind, "id": iid}, ev.get("output_index"))
        return it

    def _open(self, item: dict[str, Any], index: Any) -> _Item:
        kind = _str(item.get("type"))
        wire_id = _name(item.get("id")) or None
        if wire_id is not None and wire_id in self.items:
            return self.items[wire_id]  # added twice: the same item
        iid = wire_id or new_scru128()
        it = _Item(kind, iid, wire_id)
        self.items[iid] = it
        self.order.append(it)
        if index is not None:
            self.by_index[_key(index)] = it
        if kind == "function_call":
            self.called = True
            it.call_id = _name(item.get("call_id"))
            it.name = _name(item.get("name"))
            if _str(item.get("arguments")):
                it.parts.append(item["arguments"])
        elif kind == "reasoning":
            it.signature = _name(item.get("encrypted_content")) or None
        return it

    # -- events ------------------------------------------------------------------------------

    def feed(self, ev: Any) -> list[Any]:
        """The items produced by one event (a decoded ``data`` object).

        Raises:
            ResponsesStreamError: ``response.failed``, ``error``, or an event whose fields have
                the wrong types (never another exception, whatever the server sends).
        """
        try:
            return self._feed(ev)
        except _MALFORMED as exc:
            raise ResponsesStreamError(f"malformed stream event ({type(exc).__name__}: {exc})") from None

    def _feed(self, ev: Any) -> list[Any]:
        t = ev.get("type") if isinstance(ev, dict) else None
        out: list[Any] = []
        if t == "response.output_text.delta":
            it = self._find(ev, "message")
            it.text = join(it.text, _str(ev.get("delta")))
            self.timer.first()
            if self._is_head(it) and not it.flushed:
                self._show(it, out)
            return out
        if t == "response.function_call_arguments.delta":
            self._find(ev, "function_call").parts.append(_str(ev.get("delta")))
            self.timer.first()
            return out
        if t in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            it = self._find(ev, "reasoning")
            idx = _key(ev.get("summary_index", ev.get("content_index", 0)))
            if idx != it.summary_index:
                if it.text:
                    it.text += "\n\n"
                it.summary_index = idx
            it.text = join(it.text, _str(ev.get("delta")))
            self.timer.first()
            if self._is_head(it) and not it.flushed:
                self._show(it, out)
            return out
        if t == "response.output_item.added":
            self._open(_obj(ev.get("item")), ev.get("output_index"))
            return out
        if t == "response.output_item.done":
            return self._item_done(_obj(ev.get("item")), ev.get("output_index"))
        if t == "response.function_call_arguments.done":
            _final_arguments(self._find(ev, "function_call"), ev.get("arguments"))
            return out
        if t == "response.refusal.delta":
            it = self._find(ev, "message")
            it.refusal = join(it.refusal, _str(ev.get("delta")))
            self.timer.first()
            return out
        if t in ("response.completed", "response.incomplete"):
            return self._completed(_obj(ev.get("response")))
        if t == "response.failed":
            resp = _obj(ev.get("response"))
            raise ResponsesStreamError(_error_text(resp.get("error"), "the response failed"))
        if t == "error":
            raise ResponsesStreamError(_error_text(ev.get("error") or ev, "stream error"))
        return out  # created, in_progress, content_part.*, *.done echoes, future events

    def _item_done(self, item: dict[str, Any], index: Any) -> list[Any]:
        out: list[Any] = []
        iid = _str(item.get("id"))
        it = self.items.get(iid) if iid else None
        if it is None and index is not None:
            it = self.by_index.get(_key(index))
        if it is None:
            it = self._open(item, index)
        if it.done:
            return out
        it.done = True
        kind = _str(item.get("type")) or it.kind
        if kind == "function_call":
            if _str(item.get("call_id")):
                it.call_id = _name(item["call_id"])
            if _str(item.get("name")):
                it.name = _name(item["name"])
            _final_arguments(it, item.get("arguments"))
        elif kind == "reasoning":
            if "encrypted_content" in item:
                it.signature = _name(item.get("encrypted_content")) or None
            raw_summary = item.get("summary")
            summary = [x for x in raw_summary if isinstance(x, dict)] if isinstance(raw_summary, list) else []
            if not it.text:
                said = [_str(x.get("text")) for x in summary]
                if not said:  # raw chain of thought (reasoning_text content parts)
                    raw = item.get("content")
                    said = (
                        [_str(x.get("text")) for x in raw if isinstance(x, dict)]
                        if isinstance(raw, list)
                        else []
                    )
                it.text = join("", "\n\n".join(said))
            # several summary parts: keep them as sent (the text joins them with blank lines)
            it.summary_json = _ENCODE(summary).decode() if len(summary) > 1 else None
        elif kind == "message":
            texts: list[str] = []
            refusals: list[str] = []
            content = item.get("content")
            for part in content if isinstance(content, list) else []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "output_text":
                    texts.append(_str(part.get("text")))
                elif part.get("type") == "refusal":
                    refusals.append(_str(part.get("refusal")))
            if texts:
                it.text = join("", "".join(texts))
            refusal = join("", "".join(refusals)) or it.refusal
            if refusal:
                it.refusal = refusal
                it.meta = [GenerationMetadata.RefusalReason(final(refusal))]
                self.timer.first()
        if self._is_head(it):
            self._advance(out)
        return out

    def _completed(self, resp: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        if not self.items:  # a server that sent no item events: take the final output list
            output = resp.get("output")
            for i, item in enumerate(output if isinstance(output, list) else []):
                if isinstance(item, dict):
                    self._open(item, i)
                    out += self._item_done(item, i)
        for it in self.order:  # items the stream never closed are complete now
            it.done = True
        self._advance(out)
        self.set_usage(resp.get("usage"))
        status = resp.get("status")
        meta: list[Any] = []
        details = _obj(resp.get("incomplete_details"))
        reason = _str(details.get("reason"))
        refused = any(it.refusal for it in self.order)
        if status == "incomplete" and reason:
            stop: Any = StopReason.parse(reason)
            if reason == "content_filter":
                meta.append(GenerationMetadata.RefusalReason(reason))
        elif self.called:
            stop = StopReason.TOOL_USE
        elif refused:
            stop = StopReason.REFUSAL  # the model declined: a typed outcome (docs/providers.md)
        else:
            stop = StopReason.STOP
        meta.append(self.timer.metadata(self.usage.output))
        held = self.pending
        if held is not None:
            self.pending = None
            out.append(self._chunk(held.mid, self._call(held), stop, meta, held.wire_id))
        elif self.last is not None:
            mid, content, item_meta, wire_id = self.last
            out.append(self._chunk(mid, content, stop, [*(item_meta or ()), *meta], wire_id))
        else:
            out.append(self._chunk(new_scru128(), TextContent(""), stop, meta))
        self.finished = True
        return out

    def finish(self) -> list[Any]:
        """``Finished`` after ``response.completed``.

        Raises:
            ResponsesStreamError: the stream ended before ``response.completed``.
        """
        if not self.finished:
            raise ResponsesStreamError("the stream ended before response.completed")
        return [Stream.Pending(ModelState.Finished())]

    def flush(self) -> list[Any]:
        """Outputs held back when the stream fails: a completed function call."""
        out: list[Any] = []
        if not self.finished:
            try:
                self._flush_pending(out)
            except _MALFORMED:
                return []
        return out


def parse_response(
    doc: Any,
    model: ModelId,
    *,
    provider: str = ModelProviders.OpenAIResponses,
    timer: Timer | None = None,
    price_key: tuple[str | None, str | None] | None = None,
) -> list[Any]:
    """The items of a whole (non-streamed) response object: one ``Next`` per output item (the
    last carrying stop reason and timing, all carrying the usage), then ``Finished``.

    Raises:
        ResponsesStreamError: ``status: "failed"`` or an ``error`` document.
    """
    if not isinstance(doc, dict):
        raise ResponsesStreamError(f"unexpected response: {str(doc)[:1000]}")
    if doc.get("status") == "failed" or (doc.get("error") and not doc.get("output")):
        raise ResponsesStreamError(_error_text(doc.get("error"), "the response failed"))
    try:
        return _parse_response(doc, model, provider=provider, timer=timer, price_key=price_key)
    except _MALFORMED as exc:
        raise ResponsesStreamError(f"malformed response ({type(exc).__name__}: {exc})") from None


def _parse_response(
    doc: dict[str, Any],
    model: ModelId,
    *,
    provider: str,
    timer: Timer | None,
    price_key: tuple[str | None, str | None] | None,
) -> list[Any]:
    parser = ResponsesStreamParser(model, provider=provider, timer=timer, price_key=price_key)
    parser.timer.first()  # the whole answer arrived at once: that is its time to first token
    parser.set_usage(doc.get("usage"))
    out: list[Any] = []
    output = doc.get("output")
    for i, item in enumerate(output if isinstance(output, list) else []):
        if isinstance(item, dict):
            out += parser.feed({"type": "response.output_item.added", "item": item, "output_index": i})
            out += parser.feed({"type": "response.output_item.done", "item": item, "output_index": i})
    out += parser.feed({"type": "response.completed", "response": doc})
    out += parser.finish()
    last: dict[str, int] = {}
    for i, x in enumerate(out):
        if isinstance(x, Stream.Next):
            last[x.value.id] = i
    return [x for i, x in enumerate(out) if not isinstance(x, Stream.Next) or last[x.value.id] == i]
