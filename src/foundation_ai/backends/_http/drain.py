"""Drains: what is left of a response after the caller stopped reading is read (briefly) or dropped, so
a kept-alive connection goes back to the pool clean.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2

from .deadline import _Clock, _Watch
from .failures import _STREAM_ERRORS

_SPENT = httpx2.ByteStream(b"")


def _unlink(resp: httpx2.Response) -> None:
    """Break the reference cycle of a closed ``resp`` (httpx binds a response's body stream to
    the response itself), so the response, its request and the transport's per-request
    objects are freed at once by reference counting instead of waiting, as cyclic garbage,
    for a full (slow, generation-2) garbage collection. An open response is left alone."""
    if resp.is_closed:
        resp.stream = _SPENT


DRAIN_SECONDS = 0.25
"""Longest wait, after a stream's last event, for the rest of its body (see ``final``)."""


async def _drain(events: AsyncIterator[Any], loop: asyncio.AbstractEventLoop, end: float | None) -> None:
    """Read what is left of ``events`` for at most :data:`DRAIN_SECONDS` (never past ``end``,
    loop time); anything read is dropped, any failure ignored (the connection is then closed
    instead of reused)."""
    due = loop.time() + DRAIN_SECONDS
    if end is not None:
        due = min(due, end)
    try:
        async with asyncio.timeout_at(due):
            async for _ in events:
                pass
    except (TimeoutError, *_STREAM_ERRORS):
        pass


def _drain_sync(events: Iterator[Any], watch: _Watch, clock: _Clock) -> None:
    """The sync :func:`_drain`: read what is left of ``events`` for at most
    :data:`DRAIN_SECONDS` (never past the deadline); at the due time the watchdog shuts the
    socket (the connection is then closed instead of reused). Anything read is dropped, any
    failure ignored; the deadline watch is restored after."""
    watch.arm(min(time.monotonic() + DRAIN_SECONDS, clock.end), "drain")
    try:
        for _ in events:
            pass
    except _STREAM_ERRORS:
        pass
    finally:
        watch.arm(clock.end, "deadline")
