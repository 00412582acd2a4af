"""OpenAI Responses stream events (and whole responses) -> ``Stream[Messages, ModelState]``.

Pure, no I/O: :class:`ResponsesStreamParser` is fed decoded SSE ``data`` objects and returns the
items they produce, following the Model contract of ``backends/base.py`` in snapshot mode.
Sources: OpenAI Responses API streaming events reference and wire-notes section 3.

- Every output item (``message``, ``function_call``, ``reasoning``) is one output with its own
  message id; events find their item by ``item_id`` (else ``output_index``). The provider's
  item id of a message or function call is kept in ``Messages.Assistant.signature`` (a reasoning
  item's in ``ThinkingContent.item_id``) so that replay can pair them. A reasoning item with
  several summary parts keeps the JSON of its ``summary`` array in ``signature`` too, so that it
  is replayed unchanged (C29); its thinking text is the parts joined by blank lines.
- ``response.output_text.delta``: text chunks holding the whole text so far.
  ``response.refusal.delta``: the refusal text, surfaced as ``RefusalReason`` metadata on the
  item's text output (C33's rule for OpenAI).
- ``response.reasoning_summary_text.delta`` (and ``response.reasoning_text.delta``): thinking
  chunks (summary parts joined by a blank line) carrying the item id in
  ``ThinkingContent.item_id``; ``response.output_item.done`` for the reasoning item sends it
  once more with ``signature = encrypted_content`` — also when the summary is empty and
  ``encrypted_content`` null (C31): such an item is still an output, replayed unchanged.
- ``response.function_call_arguments.delta``: merged by item; the call (``id`` = ``call_id``,
  not the item id) is emitted once, complete, when the next item starts or the response ends.
- ``response.completed`` / ``response.incomplete``: usage (``input_tokens`` includes cached
  tokens, which become ``cache_read``; ``output_tokens`` includes reasoning tokens, which stay
  output tokens) and the stop reason (``ToolUse`` when a function call was made,
  ``max_output_tokens`` -> Length, ``content_filter`` -> ``Message`` + ``RefusalReason``);
  the last output is repeated carrying them.
- ``response.failed`` and ``error`` raise :class:`ResponsesStreamError` with the provider's text.
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

__all__ = ["ResponsesStreamError", "ResponsesStreamParser", "parse_response", "usage_of"]

_EMPTY_USAGE = UsageReport()
_ENCODE = msgspec.json.encode


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
    cache_read; ``output_tokens`` (reasoning tokens included) -> output; ``total_tokens``.
    """
    if not isinstance(u, dict):
        return _EMPTY_USAGE
    inp = float(u.get("input_tokens") or 0)
    out = float(u.get("output_tokens") or 0)
    details = u.get("input_tokens_details") or {}
    cached = float(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0.0
    total = u.get("total_tokens")
    return UsageReport(
        input=max(inp - cached, 0.0),
        output=out,
        cache_read=cached,
        cache_write=0.0,
        total_tokens=float(total) if total is not None else inp + out,
    )


class _Item:
    __slots__ = (
        "call_id",
        "done",
        "emitted",
        "item_id",
        "kind",
        "meta",
        "mid",
        "name",
        "parts",
        "refusal",
        "signature",
        "summary_index",
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
        self.summary_index = -1
        self.emitted = False
        self.done = False
        self.meta: list[Any] | None = None


class ResponsesStreamParser(SnapshotParser):
    """Turns Responses stream events into model stream items (see the module docstring).

    ``ResponsesStreamParser(model, *, provider=ModelProviders.OpenAIResponses, timer=None,
    price_key=None)`` (see :class:`~._common.SnapshotParser`).
    """

    default_provider = ModelProviders.OpenAIResponses

    def _init_state(self) -> None:
        self.items: dict[str, _Item] = {}
        self.by_index: dict[int, _Item] = {}
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
        args, raw = tool_arguments("".join(it.parts))
        return ToolCall(id=it.call_id or new_call_id(), name=it.name, arguments=args, raw_arguments=raw)

    def _flush_pending(self, out: list[Any]) -> None:
        it = self.pending
        if it is not None:
            self.pending = None
            out.append(self._chunk(it.mid, self._call(it), signature=it.wire_id))

    def _find(self, ev: dict[str, Any], kind: str) -> _Item:
        iid = ev.get("item_id")
        it = self.items.get(iid) if iid else None
        if it is None:
            idx = ev.get("output_index")
            it = self.by_index.get(idx) if idx is not None else None
        if it is None:  # an event for an item we were not told about: open it
            it = self._open({"type": kind, "id": iid or ""}, ev.get("output_index"), [])
        return it

    def _open(self, item: dict[str, Any], index: Any, out: list[Any]) -> _Item:
        self._flush_pending(out)
        kind = item.get("type", "")
        wire_id = item.get("id") or None
        iid = wire_id or new_scru128()
        it = _Item(kind, iid, wire_id)
        self.items[iid] = it
        if isinstance(index, int):
            self.by_index[index] = it
        if kind == "function_call":
            self.called = True
            it.call_id = item.get("call_id") or ""
            it.name = item.get("name") or ""
            if item.get("arguments"):
                it.parts.append(item["arguments"])
        elif kind == "reasoning":
            it.signature = item.get("encrypted_content")
        return it

    def _thinking(self, it: _Item) -> ThinkingContent:
        return ThinkingContent(it.text, signature=it.signature, item_id=it.item_id)

    # -- events ------------------------------------------------------------------------------

    def feed(self, ev: Any) -> list[Any]:
        """The items produced by one event (a decoded ``data`` object).

        Raises:
            ResponsesStreamError: ``response.failed`` or ``error``.
        """
        t = ev.get("type") if isinstance(ev, dict) else None
        if t == "response.output_text.delta":
            it = self._find(ev, "message")
            it.text += ev.get("delta", "")
            it.emitted = True
            self.timer.first()
            return [self._chunk(it.mid, TextContent(it.text), meta=it.meta, signature=it.wire_id)]
        if t == "response.function_call_arguments.delta":
            self._find(ev, "function_call").parts.append(ev.get("delta", ""))
            self.timer.first()
            return []
        if t in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            it = self._find(ev, "reasoning")
            idx = ev.get("summary_index", ev.get("content_index", 0))
            if idx != it.summary_index:
                if it.text:
                    it.text += "\n\n"
                it.summary_index = idx
            it.text += ev.get("delta", "")
            it.emitted = True
            self.timer.first()
            return [self._chunk(it.mid, self._thinking(it))]
        if t == "response.output_item.added":
            out: list[Any] = []
            self._open(ev.get("item") or {}, ev.get("output_index"), out)
            return out
        if t == "response.output_item.done":
            return self._item_done(ev.get("item") or {}, ev.get("output_index"))
        if t == "response.function_call_arguments.done":
            it = self._find(ev, "function_call")
            if isinstance(ev.get("arguments"), str):
                it.parts = [ev["arguments"]]
            return []
        if t == "response.refusal.delta":
            it = self._find(ev, "message")
            it.refusal += ev.get("delta", "")
            return []
        if t in ("response.completed", "response.incomplete"):
            return self._completed(ev.get("response") or {})
        if t == "response.failed":
            resp = ev.get("response") or {}
            raise ResponsesStreamError(_error_text(resp.get("error"), "the response failed"))
        if t == "error":
            raise ResponsesStreamError(_error_text(ev.get("error") or ev, "stream error"))
        return []  # created, in_progress, content_part.*, *.done echoes, future events

    def _item_done(self, item: dict[str, Any], index: Any) -> list[Any]:
        out: list[Any] = []
        iid = item.get("id")
        it = self.items.get(iid) if iid else None
        if it is None and isinstance(index, int):
            it = self.by_index.get(index)
        if it is None:
            it = self._open(item, index, out)
        if it.done:
            return out
        it.done = True
        kind = item.get("type", it.kind)
        if kind == "function_call":
            if item.get("call_id"):
                it.call_id = item["call_id"]
            if item.get("name"):
                it.name = item["name"]
            if isinstance(item.get("arguments"), str):
                it.parts = [item["arguments"]]
            self._flush_pending(out)
            self.pending = it
        elif kind == "reasoning":
            it.signature = item.get("encrypted_content", it.signature)
            summary = [x for x in item.get("summary") or [] if isinstance(x, dict)]
            if not it.text:
                it.text = "\n\n".join(x.get("text", "") for x in summary)
            # several summary parts: keep them as sent (the text joins them with blank lines)
            parts = _ENCODE(summary).decode() if len(summary) > 1 else None
            out.append(self._chunk(it.mid, self._thinking(it), signature=parts))
        elif kind == "message":
            texts: list[str] = []
            refusals: list[str] = []
            for part in item.get("content") or []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "output_text":
                    texts.append(part.get("text", ""))
                elif part.get("type") == "refusal":
                    refusals.append(part.get("refusal", ""))
            final = "".join(texts) if texts else it.text
            refusal = "".join(refusals) or it.refusal
            if refusal:
                it.meta = [GenerationMetadata.RefusalReason(refusal)]
            if not it.emitted or final != it.text or refusal:
                it.text = final
                it.emitted = True
                out.append(self._chunk(it.mid, TextContent(final), meta=it.meta, signature=it.wire_id))
        return out

    def _completed(self, resp: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        if not self.items:  # a server that sent no item events: take the final output list
            for i, item in enumerate(resp.get("output") or []):
                if isinstance(item, dict):
                    out += self._item_done(item, i)
        for it in list(self.items.values()):  # items the stream never closed
            if it.kind == "function_call" and not it.done:
                it.done = True
                self._flush_pending(out)
                self.pending = it
        self.set_usage(resp.get("usage"))
        status = resp.get("status")
        meta: list[Any] = []
        details = resp.get("incomplete_details") or {}
        reason = details.get("reason") if isinstance(details, dict) else None
        if status == "incomplete" and reason:
            stop: Any = StopReason.parse(str(reason))
            if reason == "content_filter":
                meta.append(GenerationMetadata.RefusalReason(str(reason)))
        elif self.called:
            stop = StopReason.TOOL_USE
        else:
            stop = StopReason.STOP
        meta.append(self.timer.metadata(self.usage.output))
        final = self.pending
        if final is not None:
            self.pending = None
            out.append(self._chunk(final.mid, self._call(final), stop, meta, final.wire_id))
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
            self._flush_pending(out)
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
    parser = ResponsesStreamParser(model, provider=provider, timer=timer, price_key=price_key)
    parser.set_usage(doc.get("usage"))
    out: list[Any] = []
    for i, item in enumerate(doc.get("output") or []):
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
