"""``run_turn``: drives a turn from phase to phase and streams what they emit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from ...errors import FoundationAIError
from ...types import AgentProgress, Stream
from ..errors import StoreError
from ..stores.lease import take_turn_lease
from .assemble import assemble_context, assemble_plain
from .begin import open_turn, persist_prompt
from .decide import decide
from .drain import admit, drain_steering
from .execute import execute_tools
from .finish import close_abandoned, close_crashed, finish, release
from .follow_ups import take_follow_ups
from .generate import generate
from .hooks import IN_PROCESS, Phase, PhaseHooks
from .host import TurnHost
from .persist import flush, flush_blocking, store_failed, write_now
from .state import TurnState

__all__ = ["quiet_ok", "run_quiet", "run_turn"]

_SETTLE_STEPS = 50
"""Event-loop iterations a new turn waits for an abandoned stream to finish closing."""


_PLAIN = (
    open_turn,
    persist_prompt,
    drain_steering,
    admit,
    assemble_context,
    generate,
    decide,
    execute_tools,
    take_follow_ups,
    finish,
)
"""The phases in the order ``run_turn`` unpacks them (see ``_watched``)."""


async def run_turn(
    host: TurnHost, state: TurnState, *, on_exit: Callable[[bool], bool] | None = None
) -> AsyncIterator[Any]:
    """Run one turn of ``host`` (a session) and stream its ``Stream[SessionRecord,
    AgentProgress]`` items; fills ``state`` (see ``docs/turn-loop.md``).

    ``on_exit(True)`` is called first and must return True (False: a turn is already running,
    after a short wait for an abandoned stream to close, ``FoundationAIError``); ``on_exit(False)``
    is called once the turn is over, however it ends.
    """
    if on_exit is not None and not on_exit(True):
        await _wait_to_enter(on_exit)
    try:
        await take_turn_lease(host)  # SessionBusyError: a turn runs on the session elsewhere
        watch = host.hooks.phases
        open_, prompt, drain, admit_, assemble, generate_, decide_, tools, follow, finish_ = (
            _PLAIN if watch is None else _watched(watch)
        )
        out = state.out
        abandoned: BaseException | None = None
        try:
            nxt = _OPEN
            while True:  # one phase per pass, then what it queued is stored and what it emitted yielded
                phase = nxt
                if phase is _DRAIN:
                    nxt = drain(host, state)
                elif phase is _ADMIT:
                    nxt = admit_(host, state)
                elif phase is _ASSEMBLE:
                    nxt = await assemble(host, state)
                elif phase is _GENERATE:
                    gen = state.generation
                    if (
                        watch is None
                        and not state.emit
                        and host.hooks.steps is IN_PROCESS
                        and gen is not None
                    ):
                        await gen.run()  # nothing to stream: no async generator
                    else:
                        stream = generate_(host, state)
                        try:
                            async for item in stream:
                                yield item
                        except BaseException:
                            await stream.aclose()  # its cleanup runs now, not when it is collected
                            raise
                    nxt = _DECIDE
                elif phase is _DECIDE:
                    nxt = decide_(host, state)
                elif phase is _TOOLS:
                    nxt = await tools(host, state)
                elif phase is _FOLLOW:
                    nxt = follow(host, state)
                elif phase is _OPEN:
                    open_(host, state)
                    nxt = _TOOLS if state.resuming else _PROMPT  # a paused turn goes on with its calls
                elif phase is _PROMPT:
                    nxt = prompt(host, state)
                else:
                    break
                # records an earlier turn could not write are written after ``open``
                down = False
                if host.pending_records:
                    try:
                        if getattr(host.store, "nonblocking", False):
                            write_now(host)
                        else:
                            await flush(host)
                    except StoreError as exc:
                        _store_down(host, state, exc)
                        down = True
                if out:
                    for item in out:
                        yield item
                    out.clear()
                if down:
                    break  # the turn failed (kind "store"); it ends as any failed turn does
            state.finished = True
        except (GeneratorExit, asyncio.CancelledError) as exc:
            abandoned = exc  # the consumer closed (or dropped) the stream, or the task was cancelled
            raise
        finally:
            release(host)
            if abandoned is not None:
                close_abandoned(host, state)
                if watch is not None:  # finish will not run: let the hooks close what they opened
                    watch.after_phase(Phase.FINISH, state, abandoned)
            elif not state.finished:
                close_crashed(host, state)
            if not state.finished:
                flush_blocking(host)  # cannot await here: a best effort, else the next turn writes them
        finish_(host, state)
        try:
            await flush(host)
        except StoreError as exc:
            _failed_at_the_end(state, exc)
        for item in out:
            yield item
        out.clear()
    finally:
        if on_exit is not None:
            on_exit(False)


async def _wait_to_enter(on_exit: Callable[[bool], bool]) -> None:
    """A stream abandoned by ``break`` in ``async for`` is closed by a task the event loop
    schedules when the iterator is dropped: let it run before deciding the session is busy.

    Raises:
        FoundationAIError: a turn is still running on the session.
    """
    for _ in range(_SETTLE_STEPS):
        await asyncio.sleep(0)
        if on_exit(True):
            return
    raise FoundationAIError("a turn is already running on this session")


def quiet_ok(host: TurnHost) -> bool:
    """True when :func:`run_quiet` may drive a turn of ``host``: no phase hooks, and the step
    runner is the in-process one."""
    hooks = host.hooks
    return hooks.phases is None and hooks.steps is IN_PROCESS


async def run_quiet(host: TurnHost, state: TurnState) -> None:
    """:func:`run_turn` for a caller that takes no stream items (``state.emit`` False), when
    :func:`quiet_ok`: the same phases, records, store writes and result in ``state``, in one
    coroutine. An answer that ends the turn is written with the ``Summary``, in one write
    (nothing runs between the two; a failure is reported the same way: ``docs/turn-loop.md``).
    The turn holds the host's guard (``host._enter``) while it runs.

    Raises:
        FoundationAIError: a turn is already running (``host._enter(True)`` returned False).
    """
    if not host._enter(True):
        await _wait_to_enter(host._enter)
    try:
        await take_turn_lease(host)  # SessionBusyError: a turn runs on the session elsewhere
        cancelled = False
        steering = host.steering
        nonblocking = getattr(host.store, "nonblocking", False)  # written on the loop, no await
        try:
            # one phase after the other, what it queued stored before the next; the phases that
            # queue nothing (admit, assemble_context, generate) fall through to the next at once
            nxt = _OPEN
            while True:
                if nxt is _DRAIN and not steering.wanted:
                    nxt = _ADMIT  # nothing steered (``wanted`` is set by every steer and abort)
                if nxt is _ADMIT:
                    nxt = admit(host, state)
                if nxt is _ASSEMBLE:
                    hooks = host.hooks
                    if hooks.context is None and hooks.can_spend is None:
                        nxt = assemble_plain(host, state)
                    else:
                        nxt = await assemble_context(host, state)
                if nxt is _GENERATE:
                    gen = state.generation
                    if not gen.take_ready():  # type: ignore[union-attr]
                        await gen.run()  # type: ignore[union-attr]
                    nxt = _DECIDE
                if nxt is _DECIDE:
                    nxt = decide(host, state)
                    if nxt is _FOLLOW and not (steering.wanted or steering._steer or steering._follow):
                        break  # idle (inlined), no follow-up to take: ``finish``, the answer written with it
                elif nxt is _TOOLS:
                    nxt = await execute_tools(host, state)
                elif nxt is _DRAIN:
                    nxt = drain_steering(host, state)
                elif nxt is _FOLLOW:
                    nxt = take_follow_ups(host, state)
                elif nxt is _OPEN:
                    open_turn(host, state)
                    nxt = _TOOLS if state.resuming else _PROMPT
                elif nxt is _PROMPT:
                    nxt = persist_prompt(host, state)
                else:  # finish
                    break
                if host.pending_records and not (
                    _written(host, state) if nonblocking else await _stored(host, state)
                ):
                    break
            state.finished = True
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            release(host)
            if cancelled:
                close_abandoned(host, state)
            elif not state.finished:
                close_crashed(host, state)
            if not state.finished:
                flush_blocking(host)
        finish(host, state)
        try:
            if host.pending_records:  # a nonblocking store: flush's own path, without its coroutine
                write_now(host) if nonblocking else await flush(host)
        except StoreError as exc:
            _failed_at_the_end(state, exc)
        state.out.clear()
    finally:
        host._enter(False)


def _written(host: TurnHost, state: TurnState) -> bool:
    """The queued records written to a ``nonblocking`` store, on the loop
    (:func:`~.persist.write_now`, inlined); False when the store failed (the turn is then
    failed, kind ``"store"``, and ends; the records stay queued)."""
    pending = host.pending_records
    batch = pending.copy()
    stored = host.stored_header
    cached = host._header  # ``session_header()``'s cache, its usual answer inlined
    if (
        cached is not None
        and cached[4] is stored
        and cached[0] is host.models[0]
        and cached[1] is host.system_prompt
        and cached[2] is (registry := host.registry)
        and cached[3] == registry.version
    ):
        header = None  # unchanged since it was stored
    else:
        header = host.session_header()
        if header is stored or header == stored:
            header = None
    try:
        host.store.append(host.session_id, batch, header)
    except StoreError as exc:
        _store_down(host, state, exc)
        return False
    if header is not None:
        host.stored_header = header
    if len(batch) == len(pending):
        pending.clear()
    else:
        del pending[: len(batch)]
    return True


async def _stored(host: TurnHost, state: TurnState) -> bool:
    """:func:`_written` for any store (written off the event loop)."""
    try:
        await flush(host)
    except StoreError as exc:
        _store_down(host, state, exc)
        return False
    return True


_OPEN, _PROMPT, _DRAIN, _ADMIT = Phase.OPEN, Phase.PROMPT, Phase.DRAIN_STEERING, Phase.ADMIT
_ASSEMBLE, _GENERATE, _DECIDE = Phase.ASSEMBLE_CONTEXT, Phase.GENERATE, Phase.DECIDE
_TOOLS, _FOLLOW, _FINISH = Phase.EXECUTE_TOOLS, Phase.FOLLOW_UPS, Phase.FINISH


def _store_down(host: TurnHost, state: TurnState, exc: StoreError) -> None:
    """The store failed (the records stay queued): the turn is marked failed (kind ``"store"``)
    and its open tool calls paired, queued too."""
    close_crashed(host, state)  # before the FailedAction: ``finish`` expects it last
    store_failed(state, exc)


def _failed_at_the_end(state: TurnState, exc: StoreError) -> None:
    """The last write (the ``Summary``) failed after ``finish``: the turn fails, its
    ``FailedAction`` last, in place of ``TurnComplete`` (a turn that already failed because of
    the store keeps that failure)."""
    if state.error is not None and state.error.kind == "store":
        return
    store_failed(state, exc)
    failed = state.records[-1]
    state.out[:] = [
        item
        for item in state.out
        if not (isinstance(item, Stream.Pending) and isinstance(item.value, AgentProgress.TurnComplete))
    ]
    state.out.append(Stream.Next(failed))


def _watched(watch: PhaseHooks) -> Any:
    """``_PLAIN`` with every phase wrapped in ``watch.before_phase`` / ``watch.after_phase``
    (``after_phase`` gets the exception that escaped the phase, if any)."""

    def sync(phase: Phase, fn: Callable[[TurnHost, TurnState], Any]) -> Callable[[TurnHost, TurnState], Any]:
        def run(host: TurnHost, state: TurnState) -> Any:
            watch.before_phase(phase, state)
            try:
                nxt = fn(host, state)
            except BaseException as exc:
                watch.after_phase(phase, state, exc)
                raise
            watch.after_phase(phase, state, None)
            return nxt

        return run

    def coro(
        phase: Phase, fn: Callable[[TurnHost, TurnState], Awaitable[Phase]]
    ) -> Callable[[TurnHost, TurnState], Awaitable[Phase]]:
        async def run(host: TurnHost, state: TurnState) -> Phase:
            watch.before_phase(phase, state)
            try:
                nxt = await fn(host, state)
            except BaseException as exc:
                watch.after_phase(phase, state, exc)
                raise
            watch.after_phase(phase, state, None)
            return nxt

        return run

    async def streamed(host: TurnHost, state: TurnState) -> AsyncGenerator[Any, None]:
        watch.before_phase(Phase.GENERATE, state)
        stream = generate(host, state)
        try:
            async for item in stream:
                yield item
        except BaseException as exc:
            await stream.aclose()
            watch.after_phase(Phase.GENERATE, state, exc)
            raise
        watch.after_phase(Phase.GENERATE, state, None)

    return (
        sync(Phase.OPEN, open_turn),
        sync(Phase.PROMPT, persist_prompt),
        sync(Phase.DRAIN_STEERING, drain_steering),
        sync(Phase.ADMIT, admit),
        coro(Phase.ASSEMBLE_CONTEXT, assemble_context),
        streamed,
        sync(Phase.DECIDE, decide),
        coro(Phase.EXECUTE_TOOLS, execute_tools),
        sync(Phase.FOLLOW_UPS, take_follow_ups),
        sync(Phase.FINISH, finish),
    )
