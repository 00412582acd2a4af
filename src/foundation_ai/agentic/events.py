"""What a streamed turn yields: ``TurnStream`` (raw ``Stream[SessionRecord, AgentProgress]``
items) and ``TurnEvent`` (typed events), docs/concepts.md: The stream contract.

Raw items: ``Stream.Init()``; ``Stream.Pending(AgentProgress)`` hints;
``Stream.Next(SessionRecord.Conversation(message))`` for messages, where **every item sharing a
message id is a snapshot of one output so far** (whatever the backend's chunk mode) and the
last one is the merged message the session persists (unless a later ``Retracted`` names it);
``Stream.Next(SessionRecord.Retracted(...))``; then ``Summary`` and, for a failed turn, a final
``FailedAction``.

``Stream.Spread(records)`` (several records at once) is mapped like one ``Next`` per record, in
order. The item type is :data:`AgentStream` (``agentic::internals::AgentStream`` in the Rust design this library follows).

``TurnStream.events()`` maps them to ``TurnEvent``: ``Text`` and ``Thinking`` carry only the new
piece; ``ToolCall`` comes once, complete; ``ToolResult``; ``Retract``; ``Progress``; then exactly
one terminal ``Failed`` or ``Done(TurnSummary)``. User messages (the prompt, steering) are not
events.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from typing import Any, ClassVar

import msgspec

from ..errors import FoundationAIError
from ..types import (
    AgenticError,
    AgentProgress,
    AssistantMessage,
    SessionRecord,
    Stream,
    TextContent,
    ThinkingContent,
    TokenSnapshot,
    ToolCall,
    ToolResultMessage,
)
from ..types.records import AgentProgressT
from ..types.serialization import register_union

__all__ = ["AgentStream", "TurnEvent", "TurnOutcome", "TurnStream", "TurnSummary"]


class TurnOutcome(enum.Enum):
    """How a turn ended."""

    Completed = "completed"
    """An answer with no tool calls."""
    Aborted = "aborted"
    """``abort()`` was called; everything produced so far is kept."""
    Failed = "failed"
    """A provider error the loop could not recover from."""
    BudgetExhausted = "budget_exhausted"
    """The token or cost budget ran out."""
    IterationLimit = "iteration_limit"
    """The inner or outer iteration limit was reached."""
    AwaitingApproval = "awaiting_approval"
    """A tool call needs approval: the turn paused before running its response's calls
    (``Turn.awaiting`` lists them; ``approve``/``deny`` continue it)."""
    LoopDetected = "loop_detected"
    """The model repeated the same tool call past the loop detection's nudge."""
    Refused = "refused"
    """The model (or the provider's filter) declined to answer: a typed outcome, not a failure.
    The refusal is persisted as the answer, retried never (one model call), and its text is
    ``TurnSummary.refusal`` (``Messages.Assistant.refusal()`` of the last output;
    docs/providers.md, "Refusals"); ``ask`` raises ``RefusalError``."""


class TurnSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The end of a turn: messages persisted, cumulative usage (tokens, USD), model calls."""

    outcome: TurnOutcome
    message_count: int
    """Messages persisted during the turn."""
    usage: TokenSnapshot
    """Cumulative usage of the turn (tokens; ``cost_usd`` in USD)."""
    generations: int = 0
    """Model calls made."""
    error: AgenticError | None = None
    """Why the turn did not complete, when it did not."""
    refusal: str | None = None
    """The provider's refusal text (or reason code), when the outcome is ``Refused``."""


class TurnEvent(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True):
    """A typed event of a streamed turn. Variants: ``Text(text, message_id)``,
    ``Thinking(text, message_id)``, ``ToolCall(call, message_id)``, ``ToolResult(result)``,
    ``Retract(message_ids, reason)``, ``Progress(progress)``, ``Failed(error, summary)``,
    ``Done(summary)``."""

    Text: ClassVar[type[_Text]]
    Thinking: ClassVar[type[_Thinking]]
    ToolCall: ClassVar[type[_ToolCall]]
    ToolResult: ClassVar[type[_ToolResult]]
    Retract: ClassVar[type[_Retract]]
    Progress: ClassVar[type[_Progress]]
    Failed: ClassVar[type[_Failed]]
    Done: ClassVar[type[_Done]]


class _Text(TurnEvent, tag="text", frozen=True):
    text: str
    """Only the new piece."""
    message_id: str


class _Thinking(TurnEvent, tag="thinking", frozen=True):
    text: str
    """Only the new piece."""
    message_id: str


class _ToolCall(TurnEvent, tag="tool_call", frozen=True):
    call: ToolCall
    message_id: str


class _ToolResult(TurnEvent, tag="tool_result", frozen=True):
    result: ToolResultMessage


class _Retract(TurnEvent, tag="retract", frozen=True):
    message_ids: list[str]
    """The ids of streamed outputs to drop."""
    reason: str


class _Progress(TurnEvent, tag="progress", frozen=True):
    progress: AgentProgressT


class _Failed(TurnEvent, tag="failed", frozen=True):
    error: AgenticError
    summary: TurnSummary


class _Done(TurnEvent, tag="done", frozen=True):
    summary: TurnSummary


for _a, _c in (
    ("Text", _Text),
    ("Thinking", _Thinking),
    ("ToolCall", _ToolCall),
    ("ToolResult", _ToolResult),
    ("Retract", _Retract),
    ("Progress", _Progress),
    ("Failed", _Failed),
    ("Done", _Done),
):
    setattr(TurnEvent, _a, _c)
    _c.__qualname__ = _c.__name__ = f"TurnEvent.{_a}"

TurnEventT = _Text | _Thinking | _ToolCall | _ToolResult | _Retract | _Progress | _Failed | _Done
"""The decodable union of ``TurnEvent`` variants: ``from_json(line, TurnEvent)`` works."""
register_union(TurnEvent, TurnEventT)

AgentStream = Stream[SessionRecord, AgentProgress]
"""The agent-level stream item, ``agentic::internals::AgentStream`` of the Rust design:
``Stream[SessionRecord, AgentProgress]`` (what ``run_turn_stream`` yields; docs/concepts.md,
"The stream contract")."""

AgentItem = AgentStream
"""One raw item of a turn stream (the same alias as :data:`AgentStream`)."""


def _failure_in(item: Any) -> Any:
    """The ``FailedAction`` a raw item carries (``Next``, or inside a ``Spread``), else ``None``."""
    if isinstance(item, Stream.Next) and isinstance(item.value, SessionRecord.FailedAction):
        return item.value
    if isinstance(item, Stream.Spread):
        return next((r for r in item.value if isinstance(r, SessionRecord.FailedAction)), None)
    return None


class EventMapper:
    """Turns raw items into ``TurnEvent``s (stateful: remembers how much of each output was seen)."""

    __slots__ = ("_seen", "_summary")

    def __init__(self) -> None:
        self._seen: dict[str, Any] = {}
        self._summary: Any = None

    def map(self, item: Any) -> list[TurnEvent]:
        """The events for one raw item (often none)."""
        if isinstance(item, Stream.Next):
            rec = item.value
            if isinstance(rec, SessionRecord.Conversation):
                m = rec.message
                if isinstance(m, AssistantMessage):
                    return self._assistant(m)
                if isinstance(m, ToolResultMessage):
                    return [_ToolResult(m)]
                return []
            if isinstance(rec, SessionRecord.Retracted):
                for mid in rec.message_ids:
                    self._seen.pop(mid, None)
                return [_Retract(list(rec.message_ids), rec.reason)]
            if isinstance(rec, SessionRecord.Summary):
                self._summary = rec
                return []
            if isinstance(rec, SessionRecord.FailedAction):
                return []
            return []
        if isinstance(item, Stream.Pending):
            return [_Progress(item.value)]
        if isinstance(item, Stream.Spread):  # several records at once: each one's events, in order
            out: list[TurnEvent] = []
            for rec in item.value:
                out += self.map(Stream.Next(rec))
            return out
        return []

    def _assistant(self, m: AssistantMessage) -> list[TurnEvent]:
        c = m.content
        if isinstance(c, TextContent):
            prev = self._seen.get(m.id, "")
            self._seen[m.id] = c.content
            piece = c.content[len(prev) :] if c.content.startswith(prev) else c.content
            return [_Text(piece, m.id)] if piece else []
        if isinstance(c, ThinkingContent):
            prev = self._seen.get(m.id, "")
            self._seen[m.id] = c.thinking
            piece = c.thinking[len(prev) :] if c.thinking.startswith(prev) else c.thinking
            return [_Thinking(piece, m.id)] if piece else []
        if isinstance(c, ToolCall):
            if m.id in self._seen:
                return []
            self._seen[m.id] = True
            return [_ToolCall(c, m.id)]
        return []


class TurnStream:
    """A streamed turn: iterate with ``for`` or ``async for`` over raw ``Stream`` items, or over
    :meth:`events`. Single use. When the stream ends, :attr:`turn` holds the finished ``Turn``.

    ``for`` runs the turn on the session's private event loop in the calling thread; inside a
    running event loop use ``async for``.

    Closing the stream early (``break`` out of the loop, :meth:`close` / :meth:`aclose`, or
    dropping the iterator) ends the turn the way ``abort()`` does: the partial outputs are
    persisted with ``StopReason.Aborted``, every open tool call gets an "aborted" result, a
    ``Summary`` is persisted and the session is free for the next turn. ``close``/``aclose``
    return once that is done; after a bare ``break`` in ``async for`` the event loop finishes
    the closing, and the next turn waits for it.
    """

    def __init__(
        self, agen: AsyncIterator[Any], driver: Callable[[Any], Any], finish: Callable[[], Any]
    ) -> None:
        self._agen = agen
        self._driver = driver
        self._finish = finish
        self._started = False
        self._sync_it: Generator[Any, None, None] | None = None
        self._async_it: AsyncGenerator[Any, None] | None = None
        self.turn: Any = None
        """The ``Turn`` once the stream is exhausted or closed."""

    def _claim(self) -> None:
        if self._started:
            raise FoundationAIError("a TurnStream can be iterated only once")
        self._started = True

    def _ended(self) -> None:
        if self.turn is None:
            self.turn = self._finish()

    async def _aiter(self) -> AsyncGenerator[Any, None]:
        agen = self._agen
        try:
            async for item in agen:
                yield item
        finally:
            await agen.aclose()  # type: ignore[attr-defined]
            self._ended()

    def __aiter__(self) -> AsyncGenerator[Any, None]:
        self._claim()
        self._async_it = self._aiter()
        return self._async_it

    def _iter(self) -> Generator[Any, None, None]:
        agen = self._agen
        nxt = agen.__anext__
        drive = self._driver
        try:
            while True:
                try:
                    item = drive(nxt())
                except StopAsyncIteration:
                    break
                yield item
        finally:
            drive(agen.aclose())  # type: ignore[attr-defined]
            self._ended()

    def __iter__(self) -> Iterator[Any]:
        self._claim()
        self._sync_it = self._iter()
        return self._sync_it

    def close(self) -> None:
        """End the turn now, like ``abort()`` (see the class docstring); returns once the turn
        is over and its records are persisted. No effect on a finished stream; a stream never
        iterated is discarded without running.

        Raises:
            FoundationAIError: the stream is iterated with ``async for`` (use :meth:`aclose`).
        """
        if self._async_it is not None:
            raise FoundationAIError("this TurnStream runs under `async for`: use `await stream.aclose()`")
        if self._sync_it is not None:
            self._sync_it.close()
        self._started = True

    async def aclose(self) -> None:
        """Async :meth:`close`: returns once the turn is over and its records are persisted."""
        if self._async_it is not None:
            await self._async_it.aclose()
        elif self._sync_it is not None:
            self._sync_it.close()
        self._started = True

    def events(self) -> _Events:
        """The typed events (``for`` or ``async for``); see the module docstring."""
        return _Events(self)


class _Events:
    def __init__(self, stream: TurnStream) -> None:
        self._stream = stream

    @staticmethod
    def _terminal(mapper: EventMapper, failed: Any) -> TurnEvent:
        summary = mapper._summary
        ts = _summary_of(summary)
        if failed is not None:
            return _Failed(failed.error, ts)
        return _Done(ts)

    def __iter__(self) -> Iterator[TurnEvent]:
        mapper = EventMapper()
        failed = None
        items = iter(self._stream)
        try:
            for item in items:
                failed = _failure_in(item) or failed
                yield from mapper.map(item)
        finally:
            self._stream.close()  # at once when the consumer stops early (no waiting for GC)
        yield self._terminal_for(mapper, failed)

    async def __aiter__(self) -> AsyncIterator[TurnEvent]:
        mapper = EventMapper()
        failed = None
        items = aiter(self._stream)
        try:
            async for item in items:
                failed = _failure_in(item) or failed
                for ev in mapper.map(item):
                    yield ev
        finally:
            await self._stream.aclose()
        yield self._terminal_for(mapper, failed)

    def _terminal_for(self, mapper: EventMapper, failed: Any) -> TurnEvent:
        turn = self._stream.turn
        if turn is not None:
            if turn.error is not None and turn.outcome is not TurnOutcome.Aborted:
                return _Failed(turn.error, turn.summary)
            return _Done(turn.summary)
        return self._terminal(mapper, failed)


def _summary_of(rec: Any) -> TurnSummary:
    if rec is None:
        return TurnSummary(outcome=TurnOutcome.Failed, message_count=0, usage=TokenSnapshot())
    return TurnSummary(outcome=TurnOutcome.Completed, message_count=rec.message_count, usage=rec.usage)
