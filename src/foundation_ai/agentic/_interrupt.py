"""Ctrl-C during a blocking call (``run_turn``, ``ask``, iterating ``run_turn_stream()``).

A blocking call runs the session's private event loop with ``run_until_complete``. Python's
default SIGINT handler raises ``KeyboardInterrupt`` wherever the main thread happens to be, which
may be the event loop's ``select`` (the turn's task is then left suspended on the loop, holding
the session) or the middle of the turn's own code. :func:`run_interruptible` does what
``asyncio.run`` does instead (https://docs.python.org/3/library/asyncio-runner.html#handling-keyboard-interruption):
the first Ctrl-C cancels the running task, which ends the turn as any cancelled turn ends
(its output so far kept as aborted, open tool calls answered, the ``Summary`` stored, the session
free), and then ``KeyboardInterrupt`` is raised to the caller; a second Ctrl-C while that
happens raises ``KeyboardInterrupt`` at once.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable
from typing import Any

__all__ = ["run_interruptible"]


def run_interruptible(loop: asyncio.AbstractEventLoop, awaitable: Awaitable[Any]) -> Any:
    """``loop.run_until_complete(awaitable)``, with Ctrl-C handled as the module docstring says.
    Only in the main thread, while SIGINT has Python's default handler (a program that set its
    own handler keeps it) and where the event loop takes signal handlers (not on Windows);
    elsewhere exactly ``run_until_complete``. The handler is the loop's
    (``loop.add_signal_handler``): the signal wakes the loop even when another thread received
    it, and the cancellation runs between two steps of the loop, never inside the turn's code.

    Raises:
        KeyboardInterrupt: Ctrl-C was pressed (after the task has ended).
        BaseException: whatever ``awaitable`` raises.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        return loop.run_until_complete(awaitable)
    task = asyncio.ensure_future(awaitable, loop=loop)
    hits = 0

    def on_sigint() -> None:
        nonlocal hits
        hits += 1
        if hits > 1 or task.done():
            raise KeyboardInterrupt()  # a callback's KeyboardInterrupt leaves the loop at once
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError, ValueError):  # no signal handlers on this loop
        return loop.run_until_complete(task)
    try:
        try:
            result = loop.run_until_complete(task)
        except asyncio.CancelledError:
            if hits:
                raise KeyboardInterrupt() from None
            raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)  # back to Python's default handler
    if hits:  # the task ended on its own terms after the cancellation (an aborted turn)
        raise KeyboardInterrupt()
    return result
