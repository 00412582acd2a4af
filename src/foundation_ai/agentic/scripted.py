"""``ScriptedModel``: a deterministic ``Model`` for tests and benchmarks.

It follows the ``Model`` contract of ``backends/base.py`` exactly: ``Stream.Init``, one stable
message id per output, text/thinking split into chunks (``"snapshot"``: the whole text so far;
``"delta"``: only the new piece), a tool call emitted once complete, the output's id repeated in
a final chunk carrying the stop reason and usage, then ``Pending(Finished)``; a scripted error
is an Assistant message with ``StopReason.Error`` and the text in ``error_detail`` followed by
``Pending(ModelState.Error)``. Each generation plays the next reply of the script::

    model = ScriptedModel([
        [say("Let me add."), call("add", {"a": 1, "b": 2})],   # preamble + a tool call
        say("3"),                                            # the answer
    ], chunk_mode="delta")

A reply is an output, a list of outputs, a :class:`Reply`, or a callable taking the
``ModelInteraction`` and returning one of those. Outputs: :func:`say`, :func:`think`,
:func:`call`, :func:`fail` (also :func:`overflow` and :func:`rate_limited`), :func:`pause`
(sleep, seconds) and :func:`hook` (call a function when reached). ``interactions`` (and
``params``) keep the most recent requests, 100 by default (``record=``; ``None`` keeps all, ``0``
none), so a long benchmark holds a bounded number of them; ``requests`` counts every one. Once
the script is exhausted each generation fails with "script exhausted".
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from ..backends.base import ChunkMode, ModelDescriptor, ModelStream, _sync_iter, assemble
from ..errors import ConfigurationError
from ..ids import new_call_id, new_scru128
from ..types import (
    ExecutionHint,
    Messages,
    ModelId,
    ModelInteraction,
    ModelParams,
    ModelState,
    StopReason,
    Stream,
    TextContent,
    ThinkingContent,
    ToolCall,
    UsageReport,
)

__all__ = [
    "Reply",
    "ScriptedModel",
    "call",
    "fail",
    "hook",
    "overflow",
    "pause",
    "rate_limited",
    "say",
    "think",
]


class Say(msgspec.Struct, frozen=True):
    text: str


class Think(msgspec.Struct, frozen=True):
    text: str
    signature: str | None = None


class Call(msgspec.Struct, frozen=True):
    call: ToolCall


class Fail(msgspec.Struct, frozen=True):
    detail: str


class Pause(msgspec.Struct, frozen=True):
    seconds: float


class Hook(msgspec.Struct, frozen=True):
    fn: Any


Output = Say | Think | Call | Fail | Pause | Hook


def say(text: str) -> Say:
    """A text output."""
    return Say(text)


def think(text: str, signature: str | None = None) -> Think:
    """A thinking output."""
    return Think(text, signature)


def call(
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    id: str | None = None,
    depends_on: Sequence[str] = (),
    hint: ExecutionHint = ExecutionHint.Unspecified,
    raw_arguments: str | None = None,
) -> Call:
    """A tool call (``arguments`` ``None`` + ``raw_arguments`` = invalid/truncated JSON)."""
    return Call(
        ToolCall(
            id=id or new_call_id(),
            name=name,
            arguments=arguments if arguments is not None or raw_arguments is not None else {},
            depends_on=list(depends_on),
            execution_hint=hint,
            raw_arguments=raw_arguments,
        )
    )


def fail(detail: str) -> Fail:
    """A provider error with this text (after any outputs before it)."""
    return Fail(detail)


def overflow() -> Fail:
    """An OpenAI-style context-overflow error."""
    return Fail(
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
    )


def rate_limited() -> Fail:
    """An HTTP 429 rate-limit error."""
    return Fail("HTTP 429 Too Many Requests: Rate limit reached for requests")


def pause(seconds: float) -> Pause:
    """Sleep this many seconds before the next output (cancellable)."""
    return Pause(seconds)


def hook(fn: Callable[[], Any]) -> Hook:
    """Call ``fn()`` (sync or async) when the stream reaches this point."""
    return Hook(fn)


class Reply(msgspec.Struct):
    """One scripted generation: outputs, final stop reason (default: ToolUse when there are
    calls, else Stop) and usage (tokens; default: input 10 x messages, output 1 per word)."""

    outputs: list[Any]
    stop_reason: Any = None
    usage: UsageReport | None = None


ReplyLike = Any


class ScriptedModel:
    """A deterministic ``Model`` (see the module docstring).

    Args:
        script: the replies, one per generation, in order.
        chunk_mode: ``"snapshot"`` or ``"delta"``.
        chunk_words: words per text chunk (text is split on spaces; ``0``: one chunk).
        chunk_delay: seconds to sleep before each chunk (``0``: none; a zero-latency model).
        name: the model name (``descriptor.name``).
        context_window: tokens, for ``descriptor``.
        input_price, output_price: USD per million tokens, for cost in the ledger.
        record: how many of the latest requests ``interactions`` / ``params`` keep (oldest
            dropped first); ``None``: all of them (grows with every generation); ``0``: none.

    Attributes:
        interactions: the latest ``ModelInteraction`` requests, oldest first (at most ``record``).
        params: the ``ModelParams`` of those requests, aligned with ``interactions``.
        requests: how many generations were requested in all.
    """

    def __init__(
        self,
        script: Sequence[ReplyLike] = (),
        *,
        chunk_mode: ChunkMode = "snapshot",
        chunk_words: int = 1,
        chunk_delay: float = 0.0,
        name: str = "scripted",
        context_window: int | None = None,
        input_price: float | None = None,
        output_price: float | None = None,
        record: int | None = 100,
    ) -> None:
        if record is not None and record < 0:
            raise ConfigurationError("record must be None or at least 0")
        self.record = record
        self.requests = 0
        self.script: list[ReplyLike] = list(script)
        self.chunk_mode: ChunkMode = chunk_mode
        self.chunk_words = chunk_words
        self.chunk_delay = chunk_delay
        self.descriptor = ModelDescriptor(
            name=name,
            provider="scripted",
            context_window=context_window,
            input_price=input_price,
            output_price=output_price,
        )
        self._model_id = ModelId.Name(name)
        self.interactions: list[ModelInteraction] = []
        self.params: list[ModelParams | None] = []
        self._pos = 0
        self._usages: dict[tuple[float, int], UsageReport] = {}

    @property
    def model_id(self) -> ModelId:
        return self._model_id

    def extend(self, *replies: ReplyLike) -> None:
        """Append replies to the script."""
        self.script.extend(replies)

    @property
    def remaining(self) -> int:
        """Replies not yet played."""
        return len(self.script) - self._pos

    def _remember(self, interaction: ModelInteraction, params: ModelParams | None) -> None:
        self.requests += 1
        keep = self.record
        if keep == 0:
            return
        kept = self.interactions
        kept.append(interaction)
        self.params.append(params)
        if keep is not None and len(kept) > keep:
            del kept[0]  # one over at most: ``record`` is fixed
            del self.params[0]

    def _next_reply(self, interaction: ModelInteraction) -> Reply:
        if self._pos >= len(self.script):
            return Reply([Fail("script exhausted")])
        r = self.script[self._pos]
        self._pos += 1
        if callable(r) and not isinstance(r, Reply):
            r = r(interaction)
        if isinstance(r, Reply):
            return r
        if isinstance(r, list | tuple):
            return Reply(list(r))
        if isinstance(r, str):
            return Reply([Say(r)])
        return Reply([r])

    def _pieces(self, text: str) -> list[str]:
        if self.chunk_words <= 0 or not text:
            return [text]
        words = text.split(" ")
        n = self.chunk_words
        out = [" ".join(words[i : i + n]) for i in range(0, len(words), n)]
        return [p + " " if k < len(out) - 1 else p for k, p in enumerate(out)]

    def astream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> AsyncIterator[ModelStream]:
        """Play the next reply (see the module docstring). The reply is taken when iteration
        starts; one with no :func:`pause`, no :func:`hook` and no ``chunk_delay`` is built at
        once and handed out chunk by chunk (no async generator), the others are played live."""
        return _Playback(self, interaction, params)

    def _begin(self, interaction: ModelInteraction, params: ModelParams | None) -> Any:
        """The chunks of the next reply: a list, or an async generator playing a reply that
        sleeps or calls hooks."""
        if self.record == 0:  # no request log: only the count
            self.requests += 1
        else:
            self._remember(interaction, params)
        reply = self._next_reply(interaction)
        usage_in = float(10 * len(interaction.messages))
        if self.chunk_delay:
            return self._play(reply, usage_in)
        for o in reply.outputs:
            if type(o) is Pause or type(o) is Hook:
                return self._play(reply, usage_in)
        return self._chunks(reply, usage_in)

    def _usage(self, usage_in: float, words: int) -> UsageReport:
        """``UsageReport.of(usage_in, words)``, kept (frozen: one per pair of counts)."""
        report = self._usages.get((usage_in, words))
        if report is None:
            if len(self._usages) >= 1024:
                self._usages.clear()
            report = self._usages[usage_in, words] = UsageReport.of(usage_in, float(words))
        return report

    def _chunks(self, reply: Reply, usage_in: float) -> list[ModelStream]:
        """Every chunk of ``reply`` (no pauses, no hooks), in order."""
        mid = self._model_id
        snapshot = self.chunk_mode == "snapshot"
        usage, usages = self._usage, self._usages  # the reports of this model, kept (frozen)
        has_calls = False
        words = 0
        out: list[ModelStream] = [_INIT]
        last_id: str | None = None
        last_content: Any = None
        made = _utcnow()  # every chunk of the reply is made now, at once
        for o in reply.outputs:
            kind = type(o)
            if kind is Fail:
                out.append(_NEXT(_error_message(mid, o.detail, usage_in, words)))
                out.append(_PENDING(ModelState.Error(o.detail)))
                return out
            oid = new_scru128()
            if kind is Call:
                has_calls = True
                last_id, last_content = oid, o.call
                out.append(
                    _NEXT(
                        _ASSISTANT(
                            id=oid,
                            model=mid,
                            content=o.call,
                            usage=usages.get((usage_in, words)) or usage(usage_in, words),
                            provider="scripted",
                            timestamp=made,
                        )
                    )
                )
                continue
            text = o.text
            so_far = ""
            for piece in self._pieces(text) if self.chunk_words > 0 else (text,):
                so_far += piece
                words += 1 if piece.strip() else 0
                shown = so_far if snapshot else piece
                content: Any = TextContent(shown) if kind is Say else ThinkingContent(shown, o.signature)
                out.append(
                    _NEXT(
                        _ASSISTANT(
                            id=oid,
                            model=mid,
                            content=content,
                            usage=usages.get((usage_in, words)) or usage(usage_in, words),
                            provider="scripted",
                            timestamp=made,
                        )
                    )
                )
            last_id = oid
            if snapshot and kind is Say and content.content == text:  # frozen: shared
                last_content = content
            else:
                last_content = _final_content(o, text, snapshot)
        if last_id is None or reply.usage is not None or reply.stop_reason is not None:
            final = self._final(reply, last_id, last_content, has_calls, usage_in, words)
        else:  # the usual closing chunk (no scripted usage or stop reason)
            final = _ASSISTANT(
                id=last_id,
                model=mid,
                content=last_content,
                usage=usages.get((usage_in, max(words, 1))) or usage(usage_in, max(words, 1)),
                stop_reason=_TOOL_USE if has_calls else StopReason.STOP,
                provider="scripted",
                timestamp=made,
            )
        out.append(_NEXT(final))
        out.append(_FINISHED)
        return out

    def _final(
        self, reply: Reply, last_id: str | None, content: Any, has_calls: bool, usage_in: float, words: int
    ) -> Any:
        """The closing chunk: the last output's id repeated with the stop reason and usage (an
        empty reply: one empty text output)."""
        usage = reply.usage or UsageReport.of(usage_in, float(max(words, 1)))
        stop: Any = reply.stop_reason or (StopReason.ToolUse() if has_calls else StopReason.Stop())
        if last_id is None:
            return _ASSISTANT(
                model=self._model_id,
                content=TextContent(""),
                usage=usage,
                stop_reason=stop,
                provider="scripted",
            )
        return _ASSISTANT(
            id=last_id,
            model=self._model_id,
            content=content,
            usage=usage,
            stop_reason=stop,
            provider="scripted",
        )

    async def _play(self, reply: Reply, usage_in: float) -> AsyncIterator[ModelStream]:
        """Play ``reply`` live: sleeps (``pause``, ``chunk_delay``) and hooks happen between chunks."""
        mid = self._model_id
        delay = self.chunk_delay
        snapshot = self.chunk_mode == "snapshot"
        has_calls = any(isinstance(o, Call) for o in reply.outputs)
        words = 0
        yield Stream.Init()
        last_id: str | None = None
        last_content: Any = None
        for out in reply.outputs:
            if isinstance(out, Pause):
                await asyncio.sleep(out.seconds)
                continue
            if isinstance(out, Hook):
                res = out.fn()
                if inspect.isawaitable(res):
                    await res
                continue
            if isinstance(out, Fail):
                yield Stream.Next(_error_message(mid, out.detail, usage_in, words))
                yield Stream.Pending(ModelState.Error(out.detail))
                return
            oid = new_scru128()
            if isinstance(out, Call):
                if delay:
                    await asyncio.sleep(delay)
                msg = Messages.Assistant(
                    id=oid,
                    model=mid,
                    content=out.call,
                    usage=UsageReport.of(usage_in, float(words)),
                    provider="scripted",
                )
                last_id, last_content = oid, out.call
                yield Stream.Next(msg)
                continue
            text = out.text
            so_far = ""
            for piece in self._pieces(text):
                if delay:
                    await asyncio.sleep(delay)
                so_far += piece
                words += 1 if piece.strip() else 0
                shown = so_far if snapshot else piece
                content: Any = (
                    TextContent(shown) if isinstance(out, Say) else ThinkingContent(shown, out.signature)
                )
                yield Stream.Next(
                    Messages.Assistant(
                        id=oid,
                        model=mid,
                        content=content,
                        usage=UsageReport.of(usage_in, float(words)),
                        provider="scripted",
                    )
                )
            last_id = oid
            last_content = _final_content(out, text, snapshot)
        yield Stream.Next(self._final(reply, last_id, last_content, has_calls, usage_in, words))
        yield Stream.Pending(ModelState.Finished())

    def stream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> Iterator[ModelStream]:
        """Synchronous ``astream`` (on a private loop in a worker thread)."""
        return _sync_iter(lambda: self.astream(interaction, params))

    def generate(self, interaction: ModelInteraction, params: ModelParams | None = None) -> list[Messages]:
        """``assemble`` of :meth:`stream`."""
        return assemble(self.stream(interaction, params), self.chunk_mode)

    async def agenerate(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> list[Messages]:
        """``assemble`` of :meth:`astream`."""
        return assemble([i async for i in self.astream(interaction, params)], self.chunk_mode)


_ASSISTANT = Messages.Assistant
_utcnow = functools.partial(datetime.now, UTC)  # ``utc_now`` without a Python frame
_NEXT, _PENDING = Stream.Next, Stream.Pending
_INIT: ModelStream = Stream.Init()  # frozen: shared
_FINISHED: ModelStream = Stream.Pending(ModelState.Finished())
_TOOL_USE = StopReason.ToolUse()


def _error_message(mid: ModelId, detail: str, usage_in: float, words: int) -> Any:
    """A scripted provider error: an Assistant message with ``StopReason.Error``."""
    return Messages.Assistant(
        model=mid,
        content=TextContent(""),
        stop_reason=StopReason.Error(),
        error_detail=detail,
        usage=UsageReport.of(usage_in, float(words)),
        provider="scripted",
    )


def _final_content(out: Say | Think, text: str, snapshot: bool) -> Any:
    """The content of a text or thinking output's closing chunk (delta mode: empty)."""
    if isinstance(out, Say):
        return TextContent(text if snapshot else "")
    return ThinkingContent(text if snapshot else "", out.signature)


class _Playback:
    """The async iterator ``ScriptedModel.astream`` returns: takes the reply on the first
    ``__anext__``, then hands out its chunks (a list, or a live async generator)."""

    __slots__ = ("_interaction", "_items", "_model", "_params", "_pos")

    def __init__(
        self, model: ScriptedModel, interaction: ModelInteraction, params: ModelParams | None
    ) -> None:
        self._model, self._interaction, self._params = model, interaction, params
        self._items: Any = None
        self._pos = 0

    def __aiter__(self) -> _Playback:
        return self

    async def __anext__(self) -> ModelStream:
        items = self._items
        if items is None:
            items = self._items = self._model._begin(self._interaction, self._params)
        if type(items) is list:
            pos = self._pos
            if pos >= len(items):
                raise StopAsyncIteration
            self._pos = pos + 1
            return items[pos]  # type: ignore[no-any-return]
        return await items.__anext__()  # type: ignore[no-any-return]

    def ready(self) -> list[ModelStream] | None:
        """Every chunk at once, when the reply has no pause and no hook (the turn loop takes
        them without awaiting each one), else ``None`` (iterate). Either way the reply is
        taken now; the chunks are handed out once (iterating afterwards yields nothing)."""
        items = self._items
        if items is None:
            model = self._model
            if model.record == 0 and not model.chunk_delay:  # ``_begin``'s usual path, inlined
                model.requests += 1
                interaction = self._interaction
                reply = model._next_reply(interaction)
                for o in reply.outputs:
                    if type(o) is Pause or type(o) is Hook:
                        self._items = model._play(reply, float(10 * len(interaction.messages)))
                        return None
                self._items = []
                return model._chunks(reply, float(10 * len(interaction.messages)))
            items = self._items = model._begin(self._interaction, self._params)
        if type(items) is not list:
            return None
        self._items = []
        return items if self._pos == 0 else items[self._pos :]

    async def aclose(self) -> None:
        """Stop: no more chunks (a live reply's generator is closed)."""
        items = self._items
        if items is None or type(items) is list:
            self._items = []
            return
        await items.aclose()
