"""Sync SSE streaming (:func:`stream_events`): POST a JSON body, retry before the first event, yield
:class:`~.events.SseEvent` items under the call's deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx2
import msgspec
from httpx2 import EventSource

from ..base import _sync_iter
from .deadline import _Clock, _Watch
from .drain import _drain_sync, _unlink
from .events import MAX_EVENT_BYTES, SseEvent, _check_event_stream
from .failures import _STREAM_ERRORS, HttpStreamError, _is_json, _status_error
from .log import log_request, log_response
from .options import HttpOptions, _request_headers
from .retry import _closed_unanswered, _failed_attempt, _retry_wait

__all__ = ["stream_events"]


def stream_events(
    opts: HttpOptions,
    url: str,
    body: bytes | Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    final: str | None = None,
) -> Iterator[SseEvent]:
    """POST ``body`` (JSON bytes or an object) to ``url`` and yield its server-sent events.

    Retries before the first event as the module docstring says; never after. The request
    ends by ``opts.deadline`` (total, from the first attempt) and each attempt must start
    answering within ``opts.first_byte_timeout``: a watchdog shuts the connection's socket at
    the due time, so a server trickling one byte a second cannot hold the call past the
    deadline. With only a user ``httpx2.AsyncClient`` configured, the request goes through that
    client (on a private event loop in a worker thread,
    :func:`~foundation_ai.backends.base._sync_iter`, with ``Connection: close`` so no pooled
    connection outlives that loop), never through a client of our own.

    ``final``: as in :func:`astream_events`, the ``data`` of the stream's last event; when it
    arrives the rest of the body is read first (for at most :data:`DRAIN_SECONDS`, the
    watchdog shutting the socket of a server that holds the body open), so the connection goes
    back to the pool for the next request.

    Raises:
        HttpStreamError: HTTP error status, connection failure, TLS certificate failure (never
            retried), dropped stream, bad content type, deadline or first-byte timeout.
    """
    if opts.sync_client is None and opts.async_client is not None:
        yield from _over_async_client(opts, url, body, headers)
        return
    client = opts.get_sync_client()
    content = body if isinstance(body, bytes) else msgspec.json.encode(body)
    hdrs = _request_headers(opts, headers)
    clock = _Clock(opts)
    attempt = 0
    resent = False  # the request was sent again after a connection closed unanswered
    while True:
        clock.new_attempt()
        watch = _Watch(clock)
        started = yielded = False
        wait: float | None = None
        resp: httpx2.Response | None = None
        try:
            watch.arm(clock.first_due, "first_byte" if clock.first_due < clock.end else "deadline")
            sent_at = log_request(opts, url, hdrs, content, attempt)
            with client.stream(
                "POST",
                url,
                content=content,
                headers=hdrs,
                timeout=clock.httpx_timeout(),
                extensions={"trace": watch.trace},
            ) as resp:
                watch.started(resp)
                log_response(opts, url, resp.status_code, sent_at)
                started = True
                if resp.status_code >= 400:
                    wait = _status_wait(resp, attempt, clock, opts)
                else:
                    if _is_json(resp):
                        raw = resp.read()
                        clock.check()
                        yield SseEvent("json", raw.decode("utf-8", "replace"))
                        return
                    _check_event_stream(resp, opts)
                    events = iter(EventSource(resp, max_event_size=MAX_EVENT_BYTES))
                    for sse in events:
                        clock.check()
                        if final is not None and sse.data == final:
                            _drain_sync(events, watch, clock)
                        yielded = True
                        yield SseEvent(sse.event, sse.data)
                    clock.check()  # a socket shut by the watchdog can look like a clean end
                    return
        except HttpStreamError:
            raise
        except Exception as exc:
            if not isinstance(exc, _STREAM_ERRORS) and clock.expired is None:
                raise
            if not resent and clock.expired is None and _closed_unanswered(exc, started):
                resent = True  # a kept-alive connection closed by the server: again, at once
                continue
            wait = _failed_attempt(exc, clock, opts, attempt, started, yielded)
        finally:
            watch.disarm()
            if resp is not None:
                _unlink(resp)
        time.sleep(wait)
        attempt += 1


def _status_wait(resp: httpx2.Response, attempt: int, clock: _Clock, opts: HttpOptions) -> float:
    """The wait in seconds before retrying an answer with an HTTP error status.

    Raises:
        HttpStreamError: the status is not retried, or no retry is left.
    """
    err = _status_error(resp.status_code, resp.read(), opts)
    wait = _retry_wait(err, attempt, resp.headers, clock, opts)
    if wait is None:
        raise err
    return wait


def _over_async_client(
    opts: HttpOptions, url: str, body: bytes | Mapping[str, Any], headers: Mapping[str, str]
) -> Iterator[SseEvent]:
    """:func:`stream_events` through the user's only client, an ``httpx2.AsyncClient``, on a
    private event loop in a worker thread."""
    # An AsyncClient's pooled connections belong to the event loop that opened them, and this
    # private loop ends with the call: ask for the connection to be closed after the answer
    # so none is left in the pool bound to a dead loop.
    once = {**headers, "Connection": "close"}
    from .async_stream import astream_events  # sync over the user's async client: the one upward call

    yield from _sync_iter(lambda: astream_events(opts, url, body, once))
