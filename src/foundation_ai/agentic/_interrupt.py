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

try:  # the C functions behind ``signal``: the same calls without the enum conversion (~5 us each)
    import _signal as _sig  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - another Python implementation
    _sig = signal
from collections.abc import Awaitable
from types import FrameType
from typing import Any

__all__ = ["run_interruptible"]

_SIGINT = int(signal.SIGINT)
_DEFAULT = signal.default_int_handler


def run_interruptible(loop: asyncio.AbstractEventLoop, awaitable: Awaitable[Any]) -> Any:
    """``loop.run_until_complete(awaitable)``, with Ctrl-C handled as the module docstring says.
    Only in the main thread and while SIGINT has Python's default handler (a program that set
    its own handler keeps it); elsewhere exactly ``run_until_complete``.

    The signal's wakeup file descriptor is pointed at the loop's own wakeup channel while the
    call runs (what ``loop.add_signal_handler`` does, without its per-call cost of listing
    every valid signal): a SIGINT received by another thread still wakes the loop's
    ``select``, and the handler only cancels the task, so the cancellation runs between two
    steps of the loop, never inside the turn's code.

    Raises:
        KeyboardInterrupt: Ctrl-C was pressed (after the task has ended).
        BaseException: whatever ``awaitable`` raises.
    """
    if threading.current_thread() is not threading.main_thread() or _sig.getsignal(_SIGINT) is not _DEFAULT:
        return loop.run_until_complete(awaitable)
    wake = getattr(loop, "_csock", None)  # a selector loop's self-pipe (asyncio's own signal path)
    if wake is None:
        return loop.run_until_complete(awaitable)
    task = asyncio.ensure_future(awaitable, loop=loop)
    hits = 0

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        nonlocal hits
        hits += 1
        if hits > 1 or task.done():
            raise KeyboardInterrupt()
        task.cancel()

    previous_fd = _sig.set_wakeup_fd(wake.fileno(), warn_on_full_buffer=False)
    _sig.signal(_SIGINT, on_sigint)
    try:
        try:
            result = loop.run_until_complete(task)
        except asyncio.CancelledError:
            if hits:
                raise KeyboardInterrupt() from None
            raise
    finally:
        _sig.signal(_SIGINT, _DEFAULT)
        _sig.set_wakeup_fd(previous_fd)
    if hits:  # the task ended on its own terms after the cancellation (an aborted turn)
        raise KeyboardInterrupt()
    return result
