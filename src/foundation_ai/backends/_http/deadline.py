"""Deadlines and watchdogs (``docs/models.md``, "Deadlines"): the per-call clock, the shared watchdog thread
that shuts a blocked sync socket at its due time, and the async read deadline.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import math
import socket
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx2
import msgspec

from .failures import HttpStreamError
from .options import HttpOptions


class _Expired(Exception):
    """An asyncio deadline fired (the kind is in the request's ``_Clock``)."""


class _Clock(msgspec.Struct, gc=False):
    """The deadlines of one request: ``end`` (total, monotonic seconds) and, per attempt,
    ``first_due`` (the response must have started by then). ``expired`` names the one that
    fired: ``"deadline"`` or ``"first_byte"``. Made as ``_Clock(opts)``; it references only
    the options and numbers, so it is not tracked by the cycle collector (msgspec ``gc=False``:
    thousands of requests may wait for a pool slot at once)."""

    opts: HttpOptions
    end: float = math.inf
    first_due: float = math.inf
    expired: str | None = None

    def __post_init__(self) -> None:
        d = self.opts.deadline
        self.end = time.monotonic() + d if d is not None else math.inf
        self.first_due = self.end

    def new_attempt(self) -> None:
        fb = self.opts.first_byte_timeout
        self.first_due = min(time.monotonic() + fb, self.end) if fb is not None else self.end
        if self.expired == "first_byte":
            self.expired = None

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def httpx_timeout(self) -> float:
        """The per-operation httpx timeout of an attempt: ``opts.timeout`` capped by the time
        left to the first byte (a connect or read never outlives a deadline by much)."""
        left = self.first_due - time.monotonic()
        return max(min(self.opts.timeout, left), 0.001)

    def expire(self, kind: str) -> None:
        if self.expired != "deadline":
            self.expired = kind

    def check(self) -> None:
        """Raise the deadline error when a deadline fired or the total one is past."""
        if self.expired is None and time.monotonic() >= self.end:
            self.expired = "deadline"
        if self.expired is not None:
            raise self.error()

    def error(self) -> HttpStreamError:
        if self.expired == "first_byte":
            fb = self.opts.first_byte_timeout
            return HttpStreamError(
                f"the server did not start answering within {fb:g} s (first_byte_timeout)", retryable=True
            )
        return HttpStreamError(
            f"no complete answer within the deadline of {self.opts.deadline:g} s (deadline)"
        )

    @staticmethod
    def loop_due(loop: asyncio.AbstractEventLoop, due: float) -> float | None:
        """``due`` (``time.monotonic`` seconds) on ``loop``'s clock; ``None`` for no deadline."""
        if math.isinf(due):
            return None
        return loop.time() + (due - time.monotonic())


class _Reaper:
    """One daemon thread calling scheduled functions at their due time (``time.monotonic``):
    the watchdogs of the sync requests, without a thread per request."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._heap: list[list[Any]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def schedule(self, due: float, fn: Any) -> list[Any]:
        entry = [due, next(self._seq), fn]
        with self._cv:
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="foundation-ai-deadlines", daemon=True)
                self._thread.start()
            self._cv.notify()
        return entry

    @staticmethod
    def cancel(entry: list[Any]) -> None:
        entry[2] = None

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._heap and self._heap[0][2] is None:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cv.wait()
                    continue
                delay = self._heap[0][0] - time.monotonic()
                if delay > 0:
                    self._cv.wait(delay)
                    continue
                entry = heapq.heappop(self._heap)
                fn, entry[2] = entry[2], None
            try:
                fn()
            except Exception:  # a watchdog must never kill the thread
                pass


_REAPER = _Reaper()


class _Watch:
    """The watchdog of one sync attempt: at the due time it marks the clock expired and shuts
    the connection's socket down, which wakes a read blocked on a trickling server. The socket
    is learnt from httpcore's ``trace`` events (a new connection) or the response's
    ``network_stream`` (a pooled one); a transport with neither is bounded by the checks
    between events."""

    __slots__ = ("_entry", "_kind", "_lock", "_sock", "active", "clock")

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self._sock: Any = None
        self._entry: list[Any] | None = None
        self._kind = "deadline"
        self._lock = threading.Lock()
        self.active = True

    def arm(self, due: float, kind: str) -> None:
        """Fire at ``due`` (monotonic seconds) as ``kind`` (``"first_byte"`` / ``"deadline"``;
        ``"drain"``: shut the socket without expiring the clock, see :func:`_drain_sync`)."""
        if self._entry is not None:
            _REAPER.cancel(self._entry)
            self._entry = None
        self._kind = kind
        if not math.isinf(due):
            self._entry = _REAPER.schedule(due, self._fire)

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            self._remember(info.get("return_value"))

    def started(self, resp: httpx2.Response) -> None:
        """The response started: remember its socket and watch the total deadline."""
        self._remember(resp.extensions.get("network_stream"))
        self.arm(self.clock.end, "deadline")

    def _remember(self, stream: Any) -> None:
        get = getattr(stream, "get_extra_info", None)
        sock = get("socket") if get is not None else None
        if isinstance(sock, socket.socket):
            with self._lock:
                self._sock = sock

    def _fire(self) -> None:
        with self._lock:
            if not self.active:
                return
            if self._kind != "drain":  # the end of a drain is no deadline
                self.clock.expire(self._kind)
            sock = self._sock
            if sock is not None:
                try:  # the plain socket's shutdown, also under an SSL socket: wakes a blocked read
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass

    def disarm(self) -> None:
        with self._lock:
            self.active = False
        if self._entry is not None:
            _REAPER.cancel(self._entry)
            self._entry = None


def _task_getter(loop: asyncio.AbstractEventLoop) -> Any:
    """A no-argument function giving the task running on ``loop`` (called once per streamed
    event). On Python 3.11 ``asyncio.current_task`` is Python code (about 0.5 microseconds);
    its own lookup, ``asyncio.tasks._current_tasks.get(loop)``, is one C call. From 3.12 on
    ``current_task`` is C code and is used as is."""
    tasks = getattr(asyncio.tasks, "_current_tasks", None)
    if sys.version_info < (3, 12) and isinstance(tasks, dict):
        get = tasks.get
        return lambda: get(loop)
    return asyncio.current_task


_TIMER_CONTEXT = contextvars.Context()
"""The context the deadline timers run in: their callback reads no context variable, and one
shared empty context spares a copy of the caller's per timer."""


class _ReadDeadline:
    """The deadline of the reads of one streamed answer: one timer for the whole stream
    instead of one ``asyncio.timeout_at`` per event. The reader sets ``task`` while it awaits
    the next event (and clears it after); at ``end`` (loop time) the timer cancels that task,
    setting ``cancelled``, so the read raises ``CancelledError`` that the reader turns into
    ``TimeoutError`` (as ``asyncio.timeout`` does, with ``Task.uncancel``). When it fires while
    no read is waiting, it only sets ``fired`` and the next read raises ``TimeoutError`` at
    once: the task is never cancelled while the caller handles an event."""

    __slots__ = ("_handle", "cancelled", "fired", "task")

    def __init__(self, loop: asyncio.AbstractEventLoop, end: float | None) -> None:
        self.fired = end is not None and end <= loop.time()
        self.cancelled = False
        self.task: asyncio.Task[Any] | None = None
        self._handle = (
            loop.call_at(end, self._fire, context=_TIMER_CONTEXT)
            if end is not None and not self.fired
            else None
        )

    def _fire(self) -> None:
        self.fired = True
        if self.task is not None:
            self.cancelled = True
            self.task.cancel()

    def cancel(self) -> None:
        """Stop the timer (the stream ended or was closed)."""
        if self._handle is not None:
            self._handle.cancel()
