"""Phase ``generate``: one model call, streamed; a :class:`Generation` is the step a
:class:`~foundation_ai.agentic.turn.hooks.StepRunner` runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

import msgspec

from ...backends.base import merge_chunk
from ...types import (
    AgentProgress,
    AssistantMessage,
    Messages,
    ModelInteraction,
    ModelState,
    SessionRecord,
    StopReason,
    Stream,
    TextContent,
    ToolCall,
    UsageReport,
)
from ..output import params_for

if TYPE_CHECKING:
    from .host import TurnHost
    from .state import TurnState

__all__ = ["Generation", "GenerationRecord", "generate"]


_NO_USAGE = UsageReport()  # frozen: shared
_NEXT, _SPREAD, _PENDING, _ERROR = Stream.Next, Stream.Spread, Stream.Pending, StopReason.Error
# the exact type, checked first (``type(x) is T``), then ``isinstance`` for subclasses
_NEXT_T = type(Stream.Next(None))
_INIT_T, _PENDING_T = type(Stream.Init()), type(Stream.Pending(None))
_FINISHED_T = type(ModelState.Finished())
_NOT_ERRORS = frozenset(type(s) for s in (StopReason.Stop(), StopReason.ToolUse(), StopReason.Length()))
"""The usual stop reasons' exact types: no ``isinstance`` (a slower check on these classes)."""


class GenerationRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The result of a generation as data (``Generation.snapshot()``; JSON/msgpack-encodable
    with msgspec): merged ``outputs`` in order, the provider ``error`` (an assistant message
    with ``StopReason.Error``), the last ``usage`` report, ``interrupted`` by steering."""

    outputs: list[AssistantMessage]
    error: AssistantMessage | None = None
    usage: UsageReport = msgspec.field(default_factory=UsageReport)
    interrupted: bool = False


class Generation:
    """One model call of a turn: ``key`` (``"generation:<n>"``), ``model``, ``interaction``;
    its result ``outputs`` (merged messages by id), ``error``, ``usage``, ``interrupted``."""

    __slots__ = (
        "_stream",
        "emit",
        "error",
        "host",
        "index",
        "interaction",
        "interrupted",
        "model",
        "outputs",
        "params",
        "usage",
    )

    def __init__(self, host: TurnHost, state: TurnState, model: Any, interaction: ModelInteraction) -> None:
        self.host = host
        self.emit = state.emit
        self.index = state.generations
        self.model = model
        self.interaction = interaction
        spec = state.output_spec
        base = host.params if state.params is None else state.params
        self.params = base if spec is None else params_for(base, spec, model)
        """The session's params (or the turn's), with the turn's output type as ``output_format``."""
        self.outputs: dict[str, AssistantMessage] = {}
        self.error: AssistantMessage | None = None
        self.usage = _NO_USAGE
        self.interrupted = False
        self._stream: Any = None  # the model's stream when ``take_ready`` found it live

    @property
    def key(self) -> str:
        """``"generation:<n>"``: ``n`` counts the turn's model calls from 1 (retries included)."""
        return f"generation:{self.index}"

    def snapshot(self) -> GenerationRecord:
        """The result as a :class:`GenerationRecord` (after the stream ended)."""
        return GenerationRecord(
            outputs=list(self.outputs.values()),
            error=self.error,
            usage=self.usage,
            interrupted=self.interrupted,
        )

    def restore(self, record: GenerationRecord) -> None:
        """Take the result from ``record`` instead of calling the model (a replayed step)."""
        self.outputs.clear()
        self.outputs.update((m.id, m) for m in record.outputs)
        self.error, self.usage, self.interrupted = record.error, record.usage, record.interrupted

    def _failed(self, detail: str) -> AssistantMessage:
        return Messages.Assistant(
            model=self.model.model_id,
            content=TextContent(""),
            stop_reason=StopReason.Error(),
            error_detail=detail,
        )

    async def stream(self) -> AsyncGenerator[Any, None]:
        """Call the model and merge every chunk (snapshot or delta) into one message per output.
        Emits ``Generating`` (at 0 tokens, then when the output count grows), a
        ``Conversation`` snapshot per chunk and ``ToolCallRequested`` per new call (streaming
        only; otherwise it is :meth:`run` and yields nothing). Stops early, ``interrupted``,
        when steered or aborted; a raised exception or a ``ModelState.Error`` becomes ``error``."""
        if not self.emit:
            await self.run()
            return
        steering, model, outputs = self.host.steering, self.model, self.outputs
        name = model.descriptor.name
        snapshot = getattr(model, "chunk_mode", "snapshot") != "delta"
        reported = 0  # Generating is emitted once at 0, then only when the count grows
        yield Stream.Pending(AgentProgress.Generating(model=name, tokens_so_far=0))
        # The task consuming the turn, which an interrupt cancels: a consumer may pull each
        # item from another task, so it is looked up before every await.
        current_task = asyncio.current_task
        agen = model.astream(self.interaction, self.params)
        # ``anext(agen)`` per chunk, not a bound ``agen.__anext__`` kept in a local: one tracked
        # object fewer per generation in flight (thousands may be, see docs/scaling.md)
        try:
            while True:
                if steering.wanted:
                    self.interrupted = True
                    break
                steering.waiting = current_task()
                try:
                    item = await anext(agen)
                except StopAsyncIteration:
                    break
                except asyncio.CancelledError as exc:
                    if steering.is_interrupt(exc):
                        self.interrupted = True
                        break
                    raise
                except Exception as exc:  # a backend that raised: treat as a provider error
                    self.error = self._failed(f"{type(exc).__name__}: {exc}")
                    break
                finally:
                    steering.waiting = None
                if isinstance(item, _NEXT):
                    batch: tuple[Any, ...] = (item.value,)
                elif isinstance(item, _SPREAD):
                    batch = tuple(item.value)
                elif isinstance(item, _PENDING):
                    v = item.value
                    if isinstance(v, ModelState.Error):
                        if self.error is None:
                            self.error = self._failed(v.message)
                    elif getattr(v, "usage", None) is not None:
                        tokens = int(v.usage.output)
                        if tokens > reported:
                            reported = tokens
                            yield Stream.Pending(AgentProgress.Generating(model=name, tokens_so_far=tokens))
                    continue
                else:
                    continue
                for m in batch:
                    if not isinstance(m, AssistantMessage):
                        continue
                    self.usage = m.usage
                    if isinstance(m.stop_reason, StopReason.Error):
                        self.error = m
                        continue
                    prev = outputs.get(m.id)
                    merged = m if snapshot or prev is None else merge_chunk(prev, m, "delta")
                    outputs[m.id] = merged
                    yield Stream.Next(SessionRecord.Conversation(message=merged))
                    if prev is None and isinstance(m.content, ToolCall):
                        yield Stream.Pending(AgentProgress.ToolCallRequested(name=m.content.name))
        finally:
            steering.waiting = None
            try:
                await agen.aclose()
            except Exception:
                pass

    async def run(self) -> None:
        """:meth:`stream` for a caller that takes no items (``emit`` False): the same result
        (``outputs``, ``error``, ``usage``, ``interrupted``), without an async generator."""
        if self._stream is None and self.take_ready():
            return  # the chunks were all there
        steering, model, outputs = self.host.steering, self.model, self.outputs
        snapshot = getattr(model, "chunk_mode", "snapshot") != "delta"
        agen = self._stream
        task = asyncio.current_task()  # nothing is yielded: the same task awaits every chunk
        try:
            while True:
                if steering.wanted:
                    self.interrupted = True
                    break
                steering.waiting = task
                try:
                    item = await anext(agen)
                except StopAsyncIteration:
                    break
                except asyncio.CancelledError as exc:
                    if steering.is_interrupt(exc):
                        self.interrupted = True
                        break
                    raise
                except Exception as exc:  # a backend that raised: treat as a provider error
                    self.error = self._failed(f"{type(exc).__name__}: {exc}")
                    break
                finally:
                    steering.waiting = None
                if isinstance(item, _NEXT):
                    m = item.value
                    if not isinstance(m, AssistantMessage):
                        continue
                    self.usage = m.usage
                    stop = m.stop_reason
                    if type(stop) not in _NOT_ERRORS and isinstance(stop, _ERROR):
                        self.error = m
                    elif snapshot:
                        outputs[m.id] = m
                    else:
                        outputs[m.id] = merge_chunk(outputs.get(m.id), m, "delta")
                elif isinstance(item, _SPREAD):
                    for m in item.value:
                        self._fold(m, snapshot)
                elif (
                    isinstance(item, _PENDING)
                    and isinstance(item.value, ModelState.Error)
                    and self.error is None
                ):
                    self.error = self._failed(item.value.message)
        finally:
            steering.waiting = None
            try:
                await agen.aclose()
            except Exception:
                pass

    def take_ready(self) -> bool:
        """Call the model; when its stream holds every chunk at once (a ``ready()`` method
        returning them, as :class:`~foundation_ai.agentic.ScriptedModel`'s does), take them
        now, with the result :meth:`run` would give, and return True: the same checks between
        chunks, no awaits (an await that never suspends lets nothing else run either).
        Otherwise return False: :meth:`run` then reads that same stream."""
        model = self.model
        stream = model.astream(self.interaction, self.params)
        ready = getattr(stream, "ready", None)
        items = ready() if ready is not None else None
        if items is None:
            self._stream = stream
            return False
        steering, outputs = self.host.steering, self.outputs
        if steering.wanted:  # checked once: nothing between the chunks lets a steer in (no await)
            self.interrupted = True
            return True
        snapshot = getattr(model, "chunk_mode", "snapshot") != "delta"
        usage = None
        for item in items:
            kind = type(item)
            if kind is not _NEXT_T and (
                kind is _INIT_T or (kind is _PENDING_T and type(item.value) is _FINISHED_T)
            ):
                continue  # the usual first and last chunks: nothing to take
            if kind is _NEXT_T or isinstance(item, _NEXT):
                m = item.value
                if type(m) is not AssistantMessage and not isinstance(m, AssistantMessage):
                    continue
                usage = m.usage
                stop = m.stop_reason
                if type(stop) not in _NOT_ERRORS and isinstance(stop, _ERROR):
                    self.error = m
                elif snapshot:
                    outputs[m.id] = m
                else:
                    outputs[m.id] = merge_chunk(outputs.get(m.id), m, "delta")
            elif isinstance(item, _SPREAD):
                if usage is not None:
                    self.usage, usage = usage, None
                for m in item.value:
                    self._fold(m, snapshot)
            elif (
                isinstance(item, _PENDING) and isinstance(item.value, ModelState.Error) and self.error is None
            ):
                self.error = self._failed(item.value.message)
        if usage is not None:  # the last report of the chunks taken
            self.usage = usage
        return True

    def _fold(self, m: Any, snapshot: bool) -> None:
        if not isinstance(m, AssistantMessage):
            return
        self.usage = m.usage
        if isinstance(m.stop_reason, _ERROR):
            self.error = m
            return
        prev = self.outputs.get(m.id)
        self.outputs[m.id] = m if snapshot or prev is None else merge_chunk(prev, m, "delta")


def generate(host: TurnHost, state: TurnState) -> AsyncGenerator[Any, None]:
    """Phase ``generate``: stream ``state.generation`` through the session's step runner
    (``StepRunner.generation``; in-process by default). Next: ``decide``."""
    gen = state.generation
    assert gen is not None
    return host.hooks.steps.generation(gen)
