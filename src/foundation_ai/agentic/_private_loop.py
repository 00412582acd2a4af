"""The private event loop of a session's blocking calls: how it is closed (leftover tasks settled, then
cancelled; the HTTP connections kept alive on it closed; async generators finalized).
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


_SETTLE_SECONDS = 5.0
"""How long a blocking call waits, once done, for clean-up tasks it left on the private loop
(async generators a backend left open closing in a worker thread, e.g. with a sync-only
``httpx2.Client``); the rest is cancelled when the session or the interpreter closes the loop."""


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close a session's private loop: let its leftover tasks finish (bounded), cancel the rest,
    close the HTTP connections kept alive on it, finalize open async generators; never "Task
    was destroyed but it is pending!"."""
    if loop.is_closed() or loop.is_running():
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # called from async code (another loop runs in this thread): just close it
        loop.close()
        return
    try:
        loop.run_until_complete(_settle())
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        pools = sys.modules.get("foundation_ai.backends._http.pool")  # never loaded: no pools
        if pools is not None:  # the HTTP connections kept alive on this loop
            loop.run_until_complete(pools.close_pools(loop))
        loop.run_until_complete(loop.shutdown_asyncgens())
    except Exception:  # closing must not fail (it may run at interpreter exit)
        pass
    finally:
        loop.close()


async def _settle() -> None:
    """Let async generators left open finish closing (their ``aclose`` tasks, at most
    ``_SETTLE_SECONDS``); other tasks are left alone."""
    for _ in range(3):
        await asyncio.sleep(0)
    closing = [t for t in asyncio.all_tasks() if not t.done() and _is_generator_close(t)]
    if closing:
        await asyncio.wait(closing, timeout=_SETTLE_SECONDS)


def _is_generator_close(task: asyncio.Task[Any]) -> bool:
    """True for the task the event loop runs to close an async generator that was dropped."""
    return type(task.get_coro()).__name__ in ("async_generator_athrow", "async_generator_asend")
