"""The turn loop (seed 000, sections 1, 10-12; wire-notes section 7).

One turn, as an async generator of ``Stream[SessionRecord, AgentProgress]`` items:

1. Persist the prompt (and any queued follow-ups). 2. Generate: the context oldest-first, the
system prompt and soul separate, the session's tools; every chunk is merged (snapshot or delta)
into one message per output and yielded as a snapshot. 3. If the response holds tool calls it is
never final (case C47): persist it, run the calls (validated; ``depends_on`` stages), persist the
results, generate again. 4. An answer with no tool calls ends the turn, unless follow-ups are
queued (an outer iteration).

Errors: a vacuous answer (empty or punctuation) is ``Retracted`` and retried once; a context
overflow drops the oldest whole exchanges and retries; a rate limit trips that model's circuit
breaker and moves to the next fallback; any other error ends the turn with a ``FailedAction``
(never persisted). Steering and abort are handled at the safe points described in
:mod:`.steering`. A turn abandoned by its consumer (the stream closed or dropped early) or
cancelled (its task) ends like an abort: partial outputs kept with ``StopReason.Aborted``, every
open call paired with a result, a ``Summary`` persisted. The turn ends with ``Summary`` (cumulative usage, persisted), then a
``FailedAction`` when it failed.
"""

from __future__ import annotations

import asyncio
import logging
import string
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ..backends.base import merge_chunk
from ..errors import FoundationAIError
from ..types import (
    AgenticError,
    AgentProgress,
    AssistantMessage,
    Messages,
    ModelInteraction,
    ModelState,
    SessionRecord,
    StopReason,
    Stream,
    StructuredErrorTrace,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UsageReport,
)
from .context import dangling_calls, interrupted_results, next_round_cut, next_trim_start
from .dag import run_calls
from .events import TurnOutcome, TurnSummary
from .ledger import price_usage
from .output import check_output, params_for, refusal_of

if TYPE_CHECKING:
    from .session import AgentSession

log = logging.getLogger(__name__)

_SETTLE_STEPS = 50
"""Event-loop iterations a new turn waits for an abandoned stream to finish closing."""

__all__ = ["CircuitBreaker", "TurnState", "is_rate_limit", "is_vacuous", "run_turn_loop"]

_VACUOUS = string.punctuation + string.whitespace + "\u2026\u00a0"
_RATE = ("429", "rate limit", "rate_limit", "ratelimit", "too many requests", "rate-limit")


def is_vacuous(text: str) -> bool:
    """True for an empty or punctuation-only answer."""
    return not text.strip(_VACUOUS)


def is_rate_limit(detail: str | None) -> bool:
    """True when a provider error text reports a rate limit (HTTP 429, "rate limit", "too many
    requests"); wire-notes section 1 (rate limits are not overflows)."""
    if not detail:
        return False
    low = detail.lower()
    return any(k in low for k in _RATE)


class CircuitBreaker:
    """Per-model breakers: a model that hit a rate limit is skipped for ``cooldown`` seconds."""

    __slots__ = ("_open_until", "cooldown")

    def __init__(self, cooldown: float = 30.0) -> None:
        self.cooldown = cooldown
        self._open_until: dict[int, float] = {}

    def trip(self, index: int) -> None:
        """Open the breaker of model ``index``."""
        self._open_until[index] = time.monotonic() + self.cooldown

    def available(self, index: int) -> bool:
        """True when model ``index`` may be called."""
        until = self._open_until.get(index)
        return until is None or time.monotonic() >= until

    def pick(self, count: int) -> int | None:
        """The first available model index, or ``None``."""
        for i in range(count):
            if self.available(i):
                return i
        return None


class TurnState:
    """What a turn produced, filled by the loop (read by ``Turn``)."""

    __slots__ = (
        "error",
        "generations",
        "outcome",
        "output",
        "output_errors",
        "output_retries",
        "output_spec",
        "output_text",
        "persisted",
        "records",
        "refusal",
        "snapshot",
    )

    def __init__(self, output_spec: Any = None) -> None:
        self.output_spec = output_spec
        self.output: Any = None
        self.output_errors: list[str] = []
        self.output_text = ""
        self.output_retries = 0
        self.refusal: str | None = None
        self.records: list[SessionRecord] = []
        self.outcome = TurnOutcome.Completed
        self.error: AgenticError | None = None
        self.generations = 0
        self.persisted = 0
        self.snapshot: Any = None


def _error_message(model: Any, detail: str) -> AssistantMessage:
    return Messages.Assistant(
        model=model.model_id, content=TextContent(""), stop_reason=StopReason.Error(), error_detail=detail
    )


async def run_turn_loop(
    session: AgentSession,
    prompts: Sequence[Messages],
    state: TurnState,
    tool_choice: Any = None,
    *,
    emit: bool = True,
    on_exit: Any = None,
) -> AsyncIterator[Any]:
    """Run one turn of ``session`` (see the module docstring); fills ``state``.

    ``emit=False`` (non-streaming callers) skips the snapshot and progress items; the records in
    ``state`` are the same. ``on_exit()`` is called once the turn is over, however it ends.
    """
    if on_exit is not None and not on_exit(True):
        # A stream abandoned by ``break`` in ``async for`` is closed by a task the event loop
        # schedules when the iterator is dropped: let it run before deciding the session is busy.
        for _ in range(_SETTLE_STEPS):
            await asyncio.sleep(0)
            if on_exit(True):
                break
        else:
            raise FoundationAIError("a turn is already running on this session")
    try:
        steering = session.steering
        ledger = session.ledger
        registry = session.registry
        models = session.models
        breaker = session.breaker
        records = state.records
        loop = asyncio.get_running_loop()
        current_task = asyncio.current_task
        steering.bind(loop)
        ledger.start_turn()
        keep_from = len(session.messages)

        def persist(msgs: Sequence[Messages]) -> None:
            if not msgs:
                return
            recs = [SessionRecord.Conversation(message=m) for m in msgs]
            session.messages.extend(msgs)
            records.extend(recs)
            state.persisted += len(msgs)
            session.store.append(session.session_id, recs)

        def fail(kind: str, message: str, retryable: bool = False, **context: Any) -> None:
            state.error = AgenticError(kind=kind, message=message, retryable=retryable)
            state.outcome = {
                "budget_exhausted": TurnOutcome.BudgetExhausted,
                "iteration_limit": TurnOutcome.IterationLimit,
                "refused": TurnOutcome.Refused,
            }.get(kind, TurnOutcome.Failed)
            context.setdefault("iteration", inner)
            trace = StructuredErrorTrace(frames=["run_turn", kind], context=context)
            records.append(SessionRecord.FailedAction(error=state.error, trace=trace))

        head_end = keep_from

        def can_trim() -> bool:
            if next_trim_start(session.messages, session.context_start, keep_from) is not None:
                return True
            cut = session.context_cut[1] if session.context_cut else head_end
            return next_round_cut(session.messages, head_end, cut) is not None

        def trim() -> bool:
            """Drop the oldest whole exchange before this turn, else the oldest round of this
            turn (keeping its prompt); False when nothing can go (cases C28, C40)."""
            start = next_trim_start(session.messages, session.context_start, keep_from)
            if start is not None:
                session.context_start = start
                return True
            cut = session.context_cut[1] if session.context_cut else head_end
            nxt = next_round_cut(session.messages, head_end, cut)
            if nxt is None:
                return False
            session.context_cut = (head_end, nxt)
            return True

        inner = 0
        outer = 0
        vacuous_retried = False
        choices = list(tool_choice) if isinstance(tool_choice, list | tuple) else [tool_choice]
        step = 0
        finished = False
        abandoned = False
        live: dict[str, AssistantMessage] = {}  # the running generation's outputs, not yet persisted
        live_results: list[ToolResultMessage | None] = []  # the running tool stage's results
        try:
            if emit:
                yield Stream.Init()
                yield Stream.Pending(AgentProgress.Initializing(step="turn"))
            queued = [Messages.coerce(p) for p in prompts] + steering.take_follow_ups()
            persist(queued)
            head_end = keep_from + len(queued)
            for m in queued if emit else ():
                yield Stream.Next(SessionRecord.Conversation(message=m))

            while True:
                # ---- safe point: before a generation ------------------------------------------------
                if steering.aborted:
                    state.outcome = TurnOutcome.Aborted
                    state.error = AgenticError(kind="aborted", message="aborted by the caller")
                    yield Stream.Pending(AgentProgress.Steering(source="abort"))
                    break
                steers = steering.take_steers()
                if steers:
                    yield Stream.Pending(AgentProgress.Steering(source="steer"))
                    persist(steers)
                    for m in steers:
                        yield Stream.Next(SessionRecord.Conversation(message=m))
                if inner >= session.max_inner:
                    fail(
                        "iteration_limit", f"reached the limit of {session.max_inner} model calls in one turn"
                    )
                    break
                why = ledger.exhausted()
                if why is not None:
                    fail("budget_exhausted", why)
                    break
                index = breaker.pick(len(models))
                if index is None:
                    fail(
                        "rate_limited", "every model is rate limited (circuit breakers open)", retryable=True
                    )
                    break
                model = models[index]
                delta = getattr(model, "chunk_mode", "snapshot") == "delta"
                interaction = ModelInteraction(
                    messages=session.context(),
                    system_prompt=session.system_prompt,
                    soul=session.soul,
                    tools_shed=registry.declarations(),
                    tool_choice=choices[step] if step < len(choices) else None,
                    chat_template=session.chat_template,
                )
                step += 1
                inner += 1
                state.generations += 1
                name = model.descriptor.name
                reported = 0  # Generating is emitted once at 0, then only when the count grows
                if emit:
                    yield Stream.Pending(AgentProgress.Generating(model=name, tokens_so_far=0))

                # ---- generation ---------------------------------------------------------------------
                outputs: dict[str, AssistantMessage] = {}
                live = outputs
                error: AssistantMessage | None = None
                usage = UsageReport()
                interrupted = False
                agen = model.astream(interaction, params_for(session.params, state.output_spec, model))
                anext_ = agen.__anext__
                try:
                    while True:
                        if steering.wanted:
                            interrupted = True
                            break
                        steering.wait_here(current_task())
                        try:
                            item = await anext_()
                        except StopAsyncIteration:
                            break
                        except asyncio.CancelledError as exc:
                            if steering.is_interrupt(exc):
                                interrupted = True
                                break
                            raise
                        except Exception as exc:  # a backend that raised: treat as a provider error
                            error = _error_message(model, f"{type(exc).__name__}: {exc}")
                            break
                        finally:
                            steering.wait_here(None)
                        if isinstance(item, Stream.Next):
                            batch = (item.value,)
                        elif isinstance(item, Stream.Spread):
                            batch = tuple(item.value)
                        elif isinstance(item, Stream.Pending):
                            v = item.value
                            if isinstance(v, ModelState.Error):
                                if error is None:
                                    error = _error_message(model, v.message)
                            elif emit and getattr(v, "usage", None) is not None:
                                tokens = int(v.usage.output)
                                if tokens > reported:
                                    reported = tokens
                                    yield Stream.Pending(
                                        AgentProgress.Generating(model=name, tokens_so_far=tokens)
                                    )
                            continue
                        else:
                            continue
                        for m in batch:
                            if not isinstance(m, AssistantMessage):
                                continue
                            if isinstance(m.stop_reason, StopReason.Error):
                                error = m
                                usage = m.usage
                                continue
                            prev = outputs.get(m.id)
                            merged = merge_chunk(prev, m, "delta" if delta else "snapshot")
                            outputs[m.id] = merged
                            usage = m.usage
                            if emit:
                                yield Stream.Next(SessionRecord.Conversation(message=merged))
                            if emit and prev is None and isinstance(m.content, ToolCall):
                                yield Stream.Pending(AgentProgress.ToolCallRequested(name=m.content.name))
                finally:
                    steering.wait_here(None)
                    try:
                        await agen.aclose()
                    except Exception:
                        pass
                ledger.record(price_usage(usage, getattr(model, "descriptor", None)))
                produced = list(outputs.values())
                live = {}  # from here on, every path persists or retracts them before yielding
                seen = [m.id for m in produced]

                # ---- interrupted: steer or abort ----------------------------------------------------
                if interrupted:
                    if steering.aborted:
                        kept: list[Messages] = []
                        for m in produced:
                            kept.append(msgspec.structs.replace(m, stop_reason=StopReason.Aborted()))
                        calls = [m.content for m in produced if isinstance(m.content, ToolCall)]
                        persist(kept)
                        cancelled = interrupted_results(calls, "aborted")
                        persist(cancelled)
                        for c in calls:
                            yield Stream.Pending(AgentProgress.ToolCallCancelled(id=c.id))
                        for r in cancelled:
                            yield Stream.Next(SessionRecord.Conversation(message=r))
                        continue  # the top of the loop ends the turn as Aborted
                    if seen:
                        rec = SessionRecord.Retracted(
                            reason="steered: generation interrupted", message_ids=seen
                        )
                        records.append(rec)
                        yield Stream.Next(rec)
                    continue

                # ---- provider error ------------------------------------------------------------------
                window = getattr(model.descriptor, "context_window", None)
                silent = (
                    error is None
                    and window is not None
                    and any(m.is_context_overflow(window) for m in produced)
                    and can_trim()
                )
                if error is not None or silent:
                    if seen:
                        rec = SessionRecord.Retracted(
                            reason="generation failed; retrying or failing", message_ids=seen
                        )
                        records.append(rec)
                        yield Stream.Next(rec)
                    detail = (
                        error.error_detail or "" if error is not None else "usage exceeds the context window"
                    )
                    if silent or (error is not None and error.is_context_overflow(window)):
                        if not trim():
                            fail("context_overflow", detail or "context overflow", model=name)
                            break
                        inner -= 1  # a retry with less context is not a new step
                        yield Stream.Pending(AgentProgress.ProcessingMemory(kind="trim_context"))
                        continue
                    if is_rate_limit(detail):
                        breaker.trip(index)
                        if breaker.pick(len(models)) is None:
                            fail("rate_limited", detail, retryable=True, model=name)
                            break
                        inner -= 1
                        continue
                    fail("provider", detail or "the model stream failed", model=name)
                    break

                # ---- a response ----------------------------------------------------------------------
                calls = [m.content for m in produced if isinstance(m.content, ToolCall)]
                if not calls:
                    text = "".join(m.content.content for m in produced if isinstance(m.content, TextContent))
                    refusal = refusal_of(produced)
                    if refusal is not None:  # a typed outcome: one model call, never retried
                        persist(produced)
                        state.refusal = refusal
                        fail("refused", refusal, model=name)
                        break
                    spec = state.output_spec
                    if spec is not None:
                        verdict = check_output(spec, state, produced, text)
                        if verdict is not None:
                            persist(produced)
                            if isinstance(verdict, Messages):  # errors go back to the model
                                persist([verdict])
                                if emit:
                                    yield Stream.Next(SessionRecord.Conversation(message=verdict))
                                continue
                            fail("output_validation", verdict, model=name)
                            break
                    if is_vacuous(text) and not vacuous_retried and spec is None:
                        vacuous_retried = True
                        rec = SessionRecord.Retracted(
                            reason="vacuous answer; retrying once", message_ids=seen
                        )
                        records.append(rec)
                        yield Stream.Next(rec)
                        continue
                    persist(produced)
                    if emit:
                        yield Stream.Pending(AgentProgress.FlushingRecords(count=len(produced)))
                    more = steering.take_follow_ups() + steering.take_steers()
                    if not more:
                        break
                    outer += 1
                    if outer >= session.max_outer:
                        for m in more:
                            steering.follow_up(m)
                        fail("iteration_limit", f"reached the limit of {session.max_outer} follow-up rounds")
                        break
                    yield Stream.Pending(AgentProgress.Steering(source="follow_up"))
                    persist(more)
                    for m in more:
                        yield Stream.Next(SessionRecord.Conversation(message=m))
                    inner = 0
                    vacuous_retried = False
                    continue

                # C47: preamble text + tool calls is never final
                persist(produced)
                if emit:
                    yield Stream.Pending(AgentProgress.FlushingRecords(count=len(produced)))
                results: list[ToolResultMessage | None] = [None] * len(calls)
                live_results = results
                if emit:
                    yield Stream.Pending(AgentProgress.ExecutingTools(total=len(calls), completed=0))
                tools_interrupted = False
                if steering.wanted:
                    tools_interrupted = True
                else:
                    steering.wait_here(current_task())
                    try:
                        await run_calls(calls, registry, results)
                    except asyncio.CancelledError as exc:
                        if not steering.is_interrupt(exc):
                            raise
                        tools_interrupted = True
                    finally:
                        steering.wait_here(None)
                done = [r for r in results if r is not None]
                if tools_interrupted:
                    why = "aborted" if steering.aborted else "steered"
                    missing = [c for c, r in zip(calls, results, strict=True) if r is None]
                    for c in missing:
                        yield Stream.Pending(AgentProgress.ToolCallCancelled(id=c.id))
                    filled = iter(interrupted_results(missing, why))
                    done = [r if r is not None else next(filled) for r in results]
                persist(done)
                live_results = []
                if emit:
                    yield Stream.Pending(AgentProgress.FlushingRecords(count=len(done)))
                if emit:
                    yield Stream.Pending(AgentProgress.ExecutingTools(total=len(calls), completed=len(calls)))
                if emit:
                    for r in done:
                        yield Stream.Next(SessionRecord.Conversation(message=r))
            finished = True
        except (GeneratorExit, asyncio.CancelledError):
            abandoned = True  # the consumer closed (or dropped) the stream, or the task was cancelled
            raise
        finally:
            steering.bind(None)
            steering.clear_abort()
            session.context_cut = None
            if abandoned:
                _end_as_aborted(session, state, live, live_results, persist, keep_from)
            elif not finished:  # crashed: pair every call
                open_calls = dangling_calls(session.messages[keep_from:])
                if open_calls:
                    persist(interrupted_results(open_calls, "turn abandoned"))
        summary = SessionRecord.Summary(message_count=state.persisted, usage=ledger.snapshot())
        state.snapshot = summary.usage
        session.store.append(session.session_id, [summary])
        failed = records[-1] if records and isinstance(records[-1], SessionRecord.FailedAction) else None
        if emit and failed is None:  # a failed turn ends with its FailedAction, not TurnComplete
            yield Stream.Pending(AgentProgress.TurnComplete(usage=summary.usage))
        if failed is not None:
            records.pop()
        records.append(summary)
        yield Stream.Next(summary)
        if failed is not None:
            records.append(failed)
            yield Stream.Next(failed)

    finally:
        if on_exit is not None:
            on_exit(False)


def _end_as_aborted(
    session: AgentSession,
    state: TurnState,
    live: dict[str, AssistantMessage],
    live_results: list[ToolResultMessage | None],
    persist: Any,
    keep_from: int,
) -> None:
    """Close an abandoned turn the way ``abort()`` does (it cannot yield any more): keep the
    partial outputs with ``StopReason.Aborted`` and the results of tools that finished, give
    every other open tool call an "aborted" result and persist a ``Summary``. A store failure
    here is logged, never raised over the ``GeneratorExit``/``CancelledError`` ending the turn."""
    try:
        persist([msgspec.structs.replace(m, stop_reason=StopReason.Aborted()) for m in live.values()])
        persist([r for r in live_results if r is not None])
        open_calls = dangling_calls(session.messages[keep_from:])
        persist(interrupted_results(open_calls, "aborted"))
        state.outcome = TurnOutcome.Aborted
        state.error = AgenticError(kind="aborted", message="the turn stream was closed before the turn ended")
        summary = SessionRecord.Summary(message_count=state.persisted, usage=session.ledger.snapshot())
        state.snapshot = summary.usage
        state.records.append(summary)
        session.store.append(session.session_id, [summary])
    except Exception:
        log.warning(
            "session %s: could not persist the end of an abandoned turn", session.session_id, exc_info=True
        )


def summary_of(state: TurnState, usage: Any) -> TurnSummary:
    """The ``TurnSummary`` of a finished turn."""
    return TurnSummary(
        outcome=state.outcome,
        message_count=state.persisted,
        usage=usage,
        generations=state.generations,
        error=state.error,
    )
