"""Running blocking tool code off the event loop without holding up interpreter exit.

``asyncio.to_thread`` uses the loop's default ``ThreadPoolExecutor``, whose worker threads are
joined when the interpreter exits: a sync tool that timed out, or was abandoned by a steer or an
abort, would keep the process alive until it returned. :func:`run_in_daemon_thread` runs each
call on a *daemon* worker thread instead: idle workers are reused (starting a thread per call
costs more than a whole agent turn's bookkeeping), a busy pool grows by one thread, and a
worker idle for a minute exits. An abandoned sync tool keeps running in the background
until it returns (Python cannot stop a thread); its result is discarded, and it does not delay
exit (it is killed with the process).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["run_in_daemon_thread"]

T = TypeVar("T")

_IDLE_SECONDS = 60.0
_jobs: queue.SimpleQueue[Callable[[], Callable[[], None]]] = queue.SimpleQueue()
_lock = threading.Lock()
_idle = 0  # workers waiting on _jobs; a job is only queued when one is idle


def _worker(job: Callable[[], Callable[[], None]]) -> None:
    """Run jobs until idle for ``_IDLE_SECONDS``. A job computes, then returns its delivery;
    the worker counts itself idle *before* delivering, so the caller's next call reuses it."""
    global _idle
    while True:
        deliver = job()
        with _lock:
            _idle += 1
        deliver()
        try:
            job = _jobs.get(timeout=_IDLE_SECONDS)
        except queue.Empty:
            with _lock:
                try:  # a job queued for us between the timeout and the lock
                    job = _jobs.get_nowait()
                except queue.Empty:
                    _idle -= 1
                    return


def _submit(job: Callable[[], Callable[[], None]]) -> None:
    global _idle
    with _lock:
        if _idle:
            _idle -= 1
            _jobs.put(job)
            return
    threading.Thread(target=_worker, args=(job,), name="foundation-ai-tool", daemon=True).start()


async def run_in_daemon_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Call ``fn(*args, **kwargs)`` on a daemon worker thread (with the caller's context variables)
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

    def work() -> Callable[[], None]:
        try:
            outcome: tuple[bool, Any] = (True, call())
        except BaseException as exc:  # delivered to the awaiting task
            outcome = (False, exc)

        def deliver() -> None:
            try:
                loop.call_soon_threadsafe(settle, *outcome)
            except RuntimeError:
                pass  # the loop is closed: nobody waits any more

        return deliver

    _submit(work)
    return await future
