"""A first-come-first-served limit on the requests in flight, with a due time per waiter and
one timer for the whole queue (the wait for a slot of the shared HTTP pool, ``_http/pool.py``).

``asyncio.Semaphore`` plus ``asyncio.timeout_at`` would do the same with, per waiting request,
a coroutine, a timer handle, its callback and a timeout object, all tracked by the cycle
collector; with thousands of requests waiting (``docs/scaling.md``, "Many sessions in one
process") a waiter here is one ``asyncio.Future`` and a float.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque

__all__ = ["SlotGate"]

_RESOLUTION = time.get_clock_info("monotonic").resolution
"""How early a loop may run a timer (asyncio runs handles due within its clock resolution)."""


class SlotGate:
    """At most ``limit`` slots held at once; more takers wait in order of arrival.

    - :meth:`try_take`: take a free slot now (``False`` when none is free or others wait:
      no one jumps the queue);
    - :meth:`wait`: join the queue; returns the future to await. Its result (``None``) means
      the slot is now held by the waiter; at its ``due`` time (event loop clock) it fails with
      ``TimeoutError`` instead. A waiter that stops waiting for any other reason (cancelled)
      calls :meth:`give_up` with its future, which gives back a slot handed to it meanwhile;
    - :meth:`release`: give a held slot back (to the first waiter, else to the free count).

    Not thread-safe: one gate serves one event loop.
    """

    __slots__ = ("_dues", "_free", "_timer", "_timer_at", "_waiters")

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._dues: deque[float] = deque()
        """Each waiter's due time (loop clock; ``inf``: none), in the order of ``_waiters``."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    @property
    def waiting(self) -> int:
        """How many takers wait for a slot."""
        return len(self._waiters)

    def try_take(self) -> bool:
        """Take a slot now if one is free and nobody waits; True when taken."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    def wait(self, loop: asyncio.AbstractEventLoop, due: float | None) -> asyncio.Future[None]:
        """Join the queue; the future to await (see the class docstring). ``due``: loop time
        after which the wait fails with ``TimeoutError`` (``None``: no limit; a time already
        past fails at the loop's next turn)."""
        fut: asyncio.Future[None] = loop.create_future()
        when = math.inf if due is None else due
        self._waiters.append(fut)
        self._dues.append(when)
        if when < self._timer_at:
            self._arm(loop, when)
        return fut

    async def acquire(self) -> None:
        """Wait, without a due time, until a slot is held (:meth:`try_take` else :meth:`wait`)."""
        if self.try_take():
            return
        fut = self.wait(asyncio.get_running_loop(), None)
        try:
            await fut
        except BaseException:
            self.give_up(fut)
            raise

    def give_up(self, fut: asyncio.Future[None]) -> None:
        """The waiter of ``fut`` stopped waiting (cancelled, or its due time passed): leave the
        queue, and give back the slot when one was handed to it just before."""
        if not fut.done() or fut.cancelled():
            if not fut.done():
                fut.cancel()
            self._remove(fut)
        elif fut.exception() is None:  # the slot was handed over: pass it on
            self.release()

    def release(self) -> None:
        """Give a held slot back: to the first waiter still waiting, else to the free count."""
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            self._dues.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1
        self._disarm()

    def _remove(self, fut: asyncio.Future[None]) -> None:
        for i, w in enumerate(self._waiters):
            if w is fut:
                del self._waiters[i]
                del self._dues[i]
                break
        if not self._waiters:
            self._disarm()

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = loop.call_at(when, self._expire, loop)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = math.inf

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """The timer: fail every waiter whose due time has come, then wait for the next one."""
        self._timer, self._timer_at = None, math.inf
        now = loop.time() + _RESOLUTION
        waiters: deque[asyncio.Future[None]] = deque()
        dues: deque[float] = deque()
        for fut, due in zip(self._waiters, self._dues, strict=True):
            if fut.done():
                continue
            if due <= now:
                fut.set_exception(TimeoutError())
            else:
                waiters.append(fut)
                dues.append(due)
        self._waiters, self._dues = waiters, dues
        if dues:
            nxt = min(dues)
            if not math.isinf(nxt):
                self._arm(loop, nxt)
