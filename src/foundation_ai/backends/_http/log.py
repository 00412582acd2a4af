"""What the HTTP backends send and receive, on the standard :mod:`logging` module (logger
``foundation_ai.http``, level ``DEBUG``; ``foundation-ai -v`` turns it on): each attempt's
method, URL, headers and body, then the answer's status and time to headers, with every
configured secret masked (:meth:`HttpOptions.redact`; docs/models.md, "Seeing what is sent").

Nothing is formatted unless the logger is enabled for ``DEBUG`` (one cheap check per request).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from .options import HttpOptions

__all__ = ["MAX_LOGGED_BODY", "log_request", "log_response", "logger"]

logger = logging.getLogger("foundation_ai.http")

MAX_LOGGED_BODY = 64 * 1024
"""Characters of a request body that are logged (the rest is counted, not shown)."""

_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"})


def log_request(opts: HttpOptions, url: str, headers: Mapping[str, str], body: bytes, attempt: int) -> float:
    """Log one attempt's request when enabled; returns ``time.perf_counter()`` (seconds), the
    start that :func:`log_response` measures from."""
    if logger.isEnabledFor(logging.DEBUG):
        shown = {k: ("***" if k.lower() in _SECRET_HEADERS else opts.redact(v)) for k, v in headers.items()}
        text = body.decode("utf-8", "replace")
        more = len(text) - MAX_LOGGED_BODY
        text = opts.redact(text[:MAX_LOGGED_BODY]) + (f"... ({more} more characters)" if more > 0 else "")
        logger.debug("POST %s (attempt %d) headers=%s body=%s", opts.redact(url), attempt + 1, shown, text)
    return time.perf_counter()


def log_response(opts: HttpOptions, url: str, status: int, started: float) -> None:
    """Log the answer's status and the seconds since ``started`` when enabled."""
    if logger.isEnabledFor(logging.DEBUG):
        ms = (time.perf_counter() - started) * 1000
        logger.debug("POST %s -> HTTP %d after %.0f ms (headers)", opts.redact(url), status, ms)
