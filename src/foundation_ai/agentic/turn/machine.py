"""``run_turn``: drives a turn from phase to phase and streams what they emit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from ...errors import FoundationAIError
from .assemble import assemble_context
from .begin import open_turn, persist_prompt
from .decide import decide
from .drain import admit, drain_steering
from .execute import execute_tools
from .finish import close_abandoned, close_crashed, finish, release
from .follow_ups import take_follow_ups
from .hooks import Phase
from .host import TurnHost
from .state import TurnState

__all__ = ["run_turn"]

_SETTLE_STEPS = 50
"""Event-loop iterations a new turn waits for an abandoned stream to finish closing."""

_SYNC: dict[Phase, Callable[[TurnHost, TurnState], Phase]] = {
    Phase.OPEN: open_turn,
    Phase.PROMPT: persist_prompt,
    Phase.DRAIN_STEERING: drain_steering,
    Phase.ADMIT: admit,
    Phase.DECIDE: decide,
    Phase.FOLLOW_UPS: take_follow_ups,
}


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
        # A stream abandoned by ``break`` in ``async for`` is closed by a task the event loop
        # schedules when the iterator is dropped: let it run before deciding the session is busy.
        for _ in range(_SETTLE_STEPS):
            await asyncio.sleep(0)
            if on_exit(True):
                break
        else:
            raise FoundationAIError("a turn is already running on this session")
    try:
        hooks = host.hooks
        watch, steps = hooks.phases, hooks.steps
        out = state.out
        phase = Phase.OPEN
        running: Phase | None = None
        abandoned = False
        try:
            while phase is not Phase.FINISH:
                running = phase
                if watch is not None:
                    watch.before_phase(phase, state)
                if phase is Phase.GENERATE:
                    assert state.generation is not None
                    stream = steps.generation(state.generation)
                    try:
                        async for item in stream:
                            yield item
                    finally:
                        await stream.aclose()
                    phase = Phase.DECIDE
                elif phase is Phase.EXECUTE_TOOLS:
                    stream = execute_tools(host, state)
                    try:
                        async for item in stream:
                            yield item
                    finally:
                        await stream.aclose()
                    phase = state.next
                elif phase is Phase.ASSEMBLE_CONTEXT:
                    phase = await assemble_context(host, state)
                else:
                    phase = _SYNC[phase](host, state)
                if watch is not None:
                    watch.after_phase(running, state, None)
                running = None
                if out:
                    for item in out:
                        yield item
                    out.clear()
            state.finished = True
        except BaseException as exc:
            # GeneratorExit: the consumer closed (or dropped) the stream; CancelledError: the
            # task was cancelled. Either ends the turn like an abort.
            abandoned = isinstance(exc, GeneratorExit | asyncio.CancelledError)
            if watch is not None and running is not None:
                watch.after_phase(running, state, exc)
            raise
        finally:
            release(host)
            if abandoned:
                close_abandoned(host, state)
            elif not state.finished:
                close_crashed(host, state)
        if watch is not None:
            watch.before_phase(Phase.FINISH, state)
        finish(host, state)
        if watch is not None:
            watch.after_phase(Phase.FINISH, state, None)
        for item in out:
            yield item
        out.clear()
    finally:
        if on_exit is not None:
            on_exit(False)
