"""Running blocking tool code off the event loop without holding up interpreter exit.

``asyncio.to_thread`` uses the loop's default ``ThreadPoolExecutor``, whose worker threads are
joined when the interpreter exits: a sync tool that timed out, or was abandoned by a steer or an
abort, would keep the process alive until it returned. :func:`run_in_daemon_thread` runs each
call in its own *daemon* thread instead. An abandoned sync tool keeps running in the background
until it returns (Python cannot stop a thread); its result is discarded, and it does not delay
exit (it is killed with the process).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["run_in_daemon_thread"]

T = TypeVar("T")


async def run_in_daemon_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Call ``fn(*args, **kwargs)`` in a new daemon thread (with the caller's context variables)
    and await its result; exceptions propagate. Cancelling the awaiting task abandons the call:
    the thread runs on, its outcome is dropped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return  # abandoned (cancelled or timed out)
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            outcome: tuple[bool, Any] = (True, call())
        except BaseException as exc:  # delivered to the awaiting task
            outcome = (False, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more

    name = getattr(fn, "__name__", "call")
    threading.Thread(target=work, name=f"foundation-ai-tool-{name}", daemon=True).start()
    return await future
