"""The daemon worker threads that run sync tools (agentic/threads.py)."""

from __future__ import annotations

import asyncio
import threading

from foundation_ai.agentic.threads import run_in_daemon_thread


def _tool_threads() -> set[int]:
    return {t.ident or 0 for t in threading.enumerate() if t.name == "foundation-ai-tool"}


async def test_sequential_calls_reuse_an_idle_daemon_worker() -> None:
    first = await run_in_daemon_thread(threading.get_ident)
    workers = _tool_threads()
    second = await run_in_daemon_thread(threading.get_ident)
    assert first in workers and second in workers  # no new thread for the second call
    assert _tool_threads() == workers
    assert threading.get_ident() not in workers


async def test_a_blocked_worker_does_not_hold_up_another_call() -> None:
    release = threading.Event()
    blocked = asyncio.ensure_future(run_in_daemon_thread(release.wait, 10))
    await asyncio.sleep(0)
    try:
        # The pool grows by one thread instead of queueing behind the blocked call.
        ident = await asyncio.wait_for(run_in_daemon_thread(threading.get_ident), timeout=5)
        assert ident != threading.get_ident()
    finally:
        release.set()
    assert await blocked is True


async def test_exceptions_propagate_and_workers_are_daemons() -> None:
    def boom() -> None:
        assert threading.current_thread().daemon
        raise ValueError("tool failed")

    try:
        await run_in_daemon_thread(boom)
    except ValueError as exc:
        assert str(exc) == "tool failed"
    else:
        raise AssertionError("the exception was not propagated")
