"""Async SSE streaming (:func:`astream_events`): the same contract as :func:`~.sync_stream.stream_events`
on the shared pool or a user's client, each wait under ``asyncio.timeout_at``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx2
import msgspec
from httpx2 import EventSource

from .deadline import _Clock, _Expired, _ReadDeadline, _task_getter
from .drain import _drain, _unlink
from .events import MAX_EVENT_BYTES, SseEvent, _check_event_stream
from .failures import _STREAM_ERRORS, HttpStreamError, _is_json, _status_error
from .log import log_request, log_response
from .options import HttpOptions, _request_headers
from .pool import _AsyncPool
from .retry import _closed_unanswered, _failed_attempt, _retry_wait
from .sync_stream import stream_events

__all__ = ["astream_events"]


async def astream_events(
    opts: HttpOptions,
    url: str,
    body: bytes | Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    final: str | None = None,
) -> AsyncIterator[SseEvent]:
    """Async :func:`stream_events`: same events, retries, deadlines and errors (the wait for
    the response under ``asyncio.timeout_at``, the reads of the stream under one timer per
    answer, :class:`_ReadDeadline`). With only a user ``httpx2.Client`` configured, the request
    goes through that client, each blocking step in a worker thread (``asyncio.to_thread``),
    never through a client of our own.

    ``final``: the ``data`` of the stream's last event (``"[DONE]"`` for OpenAI Chat
    Completions): when it arrives, the rest of the body (the HTTP chunked terminator) is read
    first, for at most :data:`DRAIN_SECONDS`, so a caller that stops there leaves a complete
    response whose connection goes back to the pool (no new TCP and TLS handshake).

    Without a user client, requests go through the options' own pool (:meth:`HttpOptions.async_pool`):
    at most ``opts.max_connections`` in flight, the rest wait their turn."""
    if opts.async_client is None and opts.sync_client is not None:
        async for ev in _in_thread(stream_events(opts, url, body, headers)):
            yield ev
        return
    pool = opts.async_pool() if opts.async_client is None else None
    client = opts.async_client
    content = body if isinstance(body, bytes) else msgspec.json.encode(body)
    hdrs = _request_headers(opts, headers)
    clock = _Clock(opts)
    loop = asyncio.get_running_loop()
    attempt = 0
    resent = False  # the request was sent again after a connection closed unanswered
    while True:
        clock.new_attempt()
        started = yielded = False
        wait: float | None = None
        shard = -1
        try:
            try:
                sent_at = log_request(opts, url, hdrs, content, attempt)
                if pool is not None:
                    shard = await _take_slot(pool, clock, loop)
                    resp = await _send(pool.client(shard), clock, loop, url, content, hdrs)
                else:
                    assert client is not None
                    resp = await _send(client, clock, loop, url, content, hdrs)
                log_response(opts, url, resp.status_code, sent_at)
                started = True
                try:
                    end = clock.loop_due(loop, clock.end)
                    if resp.status_code >= 400:
                        wait = await _error_answer(resp, end, attempt, clock, opts)
                    else:
                        if _is_json(resp):
                            async with asyncio.timeout_at(end):
                                raw = await resp.aread()
                            yield SseEvent("json", raw.decode("utf-8", "replace"))
                            return
                        _check_event_stream(resp, opts)
                        events = aiter(EventSource(resp, max_event_size=MAX_EVENT_BYTES))
                        guard = _ReadDeadline(loop, end)
                        current_task = _task_getter(loop)
                        try:
                            while True:
                                # one read under the stream's deadline timer (_ReadDeadline),
                                # inlined: this runs once per event
                                if guard.fired:
                                    raise TimeoutError
                                task = current_task()
                                assert task is not None
                                base = task.cancelling()
                                guard.task = task
                                try:
                                    sse = await anext(events)
                                except StopAsyncIteration:
                                    break
                                except asyncio.CancelledError:
                                    if guard.cancelled and task.uncancel() <= base:
                                        raise TimeoutError from None
                                    raise
                                finally:
                                    guard.task = None
                                data = sse.data  # a property: read once
                                if data == final:
                                    await _drain(events, loop, end)
                                yielded = True
                                yield SseEvent(sse.event, data)
                        finally:
                            guard.cancel()
                            await _aclose_quietly(events)
                        return
                except TimeoutError:
                    clock.expire("deadline")
                    raise _Expired from None
                finally:
                    await resp.aclose()
                    _unlink(resp)
            finally:
                if shard >= 0 and pool is not None:
                    pool.release(shard)
        except HttpStreamError:
            raise
        except Exception as exc:
            if not isinstance(exc, (*_STREAM_ERRORS, _Expired)):
                raise
            if not resent and clock.expired is None and _closed_unanswered(exc, started):
                resent = True  # a kept-alive connection closed by the server: again, at once
                continue
            wait = _failed_attempt(exc, clock, opts, attempt, started, yielded)
        await asyncio.sleep(wait)
        attempt += 1


async def _send(
    client: httpx2.AsyncClient,
    clock: _Clock,
    loop: asyncio.AbstractEventLoop,
    url: str,
    content: bytes,
    hdrs: Mapping[str, str],
) -> httpx2.Response:
    """One attempt of :func:`astream_events` up to the response's headers, under the attempt's
    first-byte (or total) deadline, through ``client`` (a pool slot, if any, is already held
    by the caller, which releases it).

    The deadline is a :class:`_ReadDeadline` timer (what ``asyncio.timeout_at`` does, with
    fewer objects).

    Raises:
        _Expired: the deadline passed first (recorded on ``clock``).
    """
    task = asyncio.current_task(loop)
    assert task is not None
    base = task.cancelling()
    guard = _ReadDeadline(loop, clock.loop_due(loop, clock.first_due))
    guard.task = task
    try:
        if guard.fired:
            raise asyncio.CancelledError  # a due time already past: expired at once
        request = client.build_request(
            "POST", url, content=content, headers=hdrs, timeout=clock.httpx_timeout()
        )
        return await client.send(request, stream=True)
    except BaseException as exc:
        expired = isinstance(exc, TimeoutError)
        if guard.fired:
            # as asyncio.timeout: our cancellation becomes the deadline error
            undone = task.uncancel() <= base if guard.cancelled else True
            guard.cancelled = False
            expired = expired or (undone and isinstance(exc, asyncio.CancelledError))
        if expired:
            clock.expire("first_byte" if clock.first_due < clock.end else "deadline")
            raise _Expired from None
        raise
    finally:
        guard.task = None
        guard.cancel()
        if guard.cancelled:  # fired as the attempt finished: take our cancellation back
            task.uncancel()


def _left_queue(gate: Any, slot: asyncio.Future[Any], exc: BaseException, clock: _Clock) -> None:
    """A request stopped waiting for its pool slot (``exc``: cancelled, or its deadline
    passed): the slot is given up; a passed deadline raises ``_Expired``."""
    gate.give_up(slot)
    if isinstance(exc, TimeoutError):
        clock.expire("first_byte" if clock.first_due < clock.end else "deadline")
        raise _Expired from None


async def _error_answer(
    resp: httpx2.Response, end: float | None, attempt: int, clock: _Clock, opts: HttpOptions
) -> float:
    """An HTTP error answer: its body read (under the deadline ``end``, loop time) into the
    error; returns the wait before the next attempt, or raises the error when there is none."""
    async with asyncio.timeout_at(end):
        raw = await resp.aread()
    err = _status_error(resp.status_code, raw, opts)
    wait = _retry_wait(err, attempt, resp.headers, clock, opts)
    if wait is None:
        raise err
    return wait


async def _aclose_quietly(agen: Any) -> None:
    try:
        await agen.aclose()
    except Exception:
        pass


_END = object()


async def _in_thread(it: Iterator[SseEvent]) -> AsyncIterator[SseEvent]:
    """Iterate the blocking iterator ``it`` with each ``next`` in a worker thread. Closing this
    iterator closes ``it`` (releasing the connection) before returning; cancelling it while a
    step is in flight returns at once and closes ``it`` in the background when that step ends."""
    lock = threading.Lock()
    in_flight = False

    def step() -> object:
        with lock:
            return next(it, _END)

    def close() -> None:
        with lock:
            close_it = getattr(it, "close", None)
            if close_it is not None:
                close_it()

    try:
        while True:
            in_flight = True
            item = await asyncio.to_thread(step)
            in_flight = False
            if item is _END:
                return
            yield item  # type: ignore[misc]
    finally:
        if in_flight:  # cancelled mid-read: do not wait for the blocked read
            asyncio.get_running_loop().run_in_executor(None, close)
        else:
            await asyncio.to_thread(close)


async def _take_slot(pool: _AsyncPool, clock: _Clock, loop: asyncio.AbstractEventLoop) -> int:
    """A connection of the shared pool for one attempt (its shard), waiting for a free slot
    under the first-byte deadline when ``max_connections`` requests are in flight."""
    gate = pool.gate
    if gate is not None and not gate.try_take():
        # one future per waiting request (thousands may wait); the first-byte deadline runs
        slot = gate.wait(loop, clock.loop_due(loop, clock.first_due))
        try:
            await slot
        except BaseException as exc:
            _left_queue(gate, slot, exc, clock)
            raise
    shard: int = pool.take()
    return shard
