"""Retries before the first event: which statuses and exceptions are retried and how long to wait
(``Retry-After`` / ``retry-after-ms``, else exponential backoff with jitter).
"""

from __future__ import annotations

import email.utils
import math
import random
import time

import httpx2

from .deadline import _Clock
from .failures import HttpStreamError, _connect_error, _is_cert_error, _mid_stream_error
from .options import HttpOptions

__all__ = ["retry_delay"]


def _header_seconds(headers: httpx2.Headers) -> float | None:
    """The server's requested wait in seconds, or ``None`` when absent or not a finite,
    non-negative number (``NaN``, ``inf``, ``-1``, garbage, an unparsable date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            v = float(ms) / 1000.0
        except ValueError:
            v = math.nan
        if math.isfinite(v) and v >= 0:
            return v
    ra = headers.get("retry-after")
    if ra:
        try:
            v = float(ra)
        except ValueError:
            try:
                v = email.utils.parsedate_to_datetime(ra).timestamp() - time.time()
                v = max(v, 0.0)  # a date in the past: retry now
            except (TypeError, ValueError, IndexError, OverflowError):
                v = math.nan
        if math.isfinite(v) and v >= 0:
            return v
    return None


def retry_delay(attempt: int, headers: httpx2.Headers | None, opts: HttpOptions) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based); always finite, ``>= 0`` and
    ``<= max_retry_delay``.

    ``retry-after-ms`` (milliseconds) or ``Retry-After`` (seconds or an HTTP date) when present
    and a finite, non-negative number; otherwise (absent, ``NaN``, ``inf``, negative, garbage)
    ``retry_base_delay * 2**attempt`` with +-25 % jitter. Capped by ``max_retry_delay`` (a huge
    header value waits the cap).
    """
    cap = opts.max_retry_delay
    if not (isinstance(cap, int | float) and math.isfinite(cap)) or cap < 0:
        cap = 60.0
    wanted = _header_seconds(headers) if headers is not None else None
    if wanted is None:
        base = opts.retry_base_delay
        if not math.isfinite(base) or base < 0:
            base = 0.5
        wanted = base * (2.0 ** min(attempt, 62)) * random.uniform(0.75, 1.25)
    return float(min(max(wanted, 0.0), cap))


_RETRY_EXC = (
    httpx2.ConnectError,
    httpx2.TimeoutException,
    httpx2.RemoteProtocolError,
    httpx2.ReadError,
    httpx2.WriteError,
)
"""Transport failures retried when no event was yielded yet (connect, timeouts, resets)."""


_UNANSWERED = "without sending a response"
"""What httpcore's ``RemoteProtocolError`` says when the server closed the connection after the
request was sent and before any byte of the response."""


def _closed_unanswered(exc: BaseException, started: bool) -> bool:
    """True when the server closed the connection without answering the request (no response
    byte: ``RemoteProtocolError`` "Server disconnected without sending a response", or a reset
    read, ``ReadError``, before the status line). On a kept-alive connection this is the server
    closing it as idle while the request was on its way (RFC 9112, section 9.3.1: "connections
    can be closed at any time"): an upstream's keep-alive timeout (uvicorn's is 5 s, as is
    httpx's ``keepalive_expiry``) or its requests-per-connection cap. The request is then sent
    again at once, once, on another connection (:func:`~.async_stream.astream_events`,
    :func:`~.sync_stream.stream_events`), without waiting and without taking one of
    ``max_retries``: a server that closed a connection unasked gets the request on a fresh
    one, and a failure of that one is an ordinary failed attempt."""
    if started:
        return False
    if isinstance(exc, httpx2.RemoteProtocolError):
        return _UNANSWERED in str(exc)
    return isinstance(exc, httpx2.ReadError)


def _attempt_error(
    exc: Exception, clock: _Clock, opts: HttpOptions, attempt: int, started: bool, yielded: bool
) -> HttpStreamError | None:
    """The error to raise for ``exc`` (a transport failure, or the effect of an expired
    deadline), or ``None`` when the attempt is to be retried: no event yielded yet, a retryable
    kind, retries and time left. ``started``: the response headers had arrived."""
    if clock.expired is not None:
        err = clock.error()
    elif _is_cert_error(exc):
        return HttpStreamError(opts.redact(f"TLS certificate verification failed: {exc}"), retryable=False)
    elif yielded or not isinstance(exc, _RETRY_EXC):
        return _mid_stream_error(exc, opts) if started else _connect_error(exc, opts)
    else:
        err = _mid_stream_error(exc, opts) if started else _connect_error(exc, opts)
        err.retryable = True
    if yielded or not err.retryable or attempt >= opts.max_retries or clock.remaining() <= 0:
        return err
    return None


def _retry_wait(
    err: HttpStreamError | None,
    attempt: int,
    headers: httpx2.Headers | None,
    clock: _Clock,
    opts: HttpOptions,
) -> float | None:
    """Seconds to wait before the next attempt, or ``None`` when there is none: ``err`` not
    retryable, no retries left, the server asks (``Retry-After``) for a longer wait than
    ``max_retry_delay`` (retrying sooner would only be refused again: the error is returned
    at once, so a fallback model, if any, is tried), or the wait would end past the total
    deadline."""
    if err is not None and (not err.retryable or attempt >= opts.max_retries):
        return None
    if attempt >= opts.max_retries:
        return None
    if headers is not None:
        asked = _header_seconds(headers)
        if asked is not None and asked > retry_delay(attempt, headers, opts):
            return None
    wait = retry_delay(attempt, headers, opts)
    if wait >= clock.remaining():
        return None
    return wait


def _failed_attempt(
    exc: Exception, clock: _Clock, opts: HttpOptions, attempt: int, started: bool, yielded: bool
) -> float:
    """The wait in seconds before the next attempt after ``exc`` (a transport failure, a
    timeout or an expired deadline) ended attempt ``attempt``.

    Raises:
        HttpStreamError: the failure is final (after output, a certificate error, the deadline
            reached) or no retry is left.
    """
    failure = _attempt_error(exc, clock, opts, attempt, started, yielded)
    if failure is not None:
        raise failure from None
    wait = _retry_wait(None, attempt, None, clock, opts)
    if wait is None:
        raise (clock.error() if clock.expired else _connect_error(exc, opts)) from None
    return wait
