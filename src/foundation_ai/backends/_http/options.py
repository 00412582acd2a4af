"""The options of one HTTP backend (:class:`HttpOptions`: key, base URL, timeouts and deadlines in seconds,
retries, headers, a user's own httpx clients) and their defaults (``docs/models.md``, "Deadlines").
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

import httpx2

from ...errors import ConfigurationError
from .endpoint import resolve_api_key
from .pool import MAX_CONNECTIONS, _AsyncPool, shared_pool, shared_ssl_context
from .secrets import header_secrets, mask_url, redact, url_secrets

__all__ = ["DEFAULT_DEADLINE", "DEFAULT_FIRST_BYTE_TIMEOUT", "HttpOptions"]


DEFAULT_DEADLINE = 900.0
"""Seconds a request may take in all, retries and the whole streamed answer included."""

DEFAULT_FIRST_BYTE_TIMEOUT = 300.0
"""Seconds an attempt may wait for the response to start (status line and headers)."""


def _seconds(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0 or math.isnan(value):
        raise ConfigurationError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return float(value)


class HttpOptions:
    """Connection options of one HTTP backend.

    ``repr`` shows ``api_key='***'``, header names only and the base URL without its userinfo;
    :meth:`secrets` lists every configured credential (the key, credential-like header values,
    the base URL's userinfo) for :func:`redact`, which every error text here goes through.

    Attributes:
        api_key: the key or ``None`` (local servers need none).
        base_url: the base URL without a trailing ``/``.
        timeout: seconds for each connect / read / write / pool wait (``httpx2.Timeout``).
        deadline: seconds the whole request may take, retries and the streamed answer included
            (default :data:`DEFAULT_DEADLINE`, 900; ``None``: no total deadline).
        first_byte_timeout: seconds each attempt may wait for the response to start (status
            line and headers; default :data:`DEFAULT_FIRST_BYTE_TIMEOUT`, 300; ``None``: only
            ``timeout`` and ``deadline`` apply).
        max_retries: retries after the first attempt (0 disables retrying).
        headers: extra headers sent on every request.
        async_client / sync_client: user-supplied clients (used as given, never closed here).
        retry_base_delay: seconds of the first backoff step (doubles each retry, with jitter).
        max_retry_delay: the cap on any wait, in seconds; a ``Retry-After`` asking for more
            ends the retries at once (the error is raised, a fallback model can take over).
        max_connections: requests in flight at once through the pool of own async clients
            (default :data:`MAX_CONNECTIONS`, 1,000; ``None``: no limit). That pool is shared,
            per event loop, by every backend with the same ``timeout`` and ``max_connections``
            (:func:`shared_pool`), so the limit holds for all of them together. More requests
            wait, first come first served, for a free slot (the wait counts toward
            ``first_byte_timeout``). The pool's clients keep no cookies. A user-supplied client
            keeps its own limits.
    """

    __slots__ = (
        "_own_async",
        "_own_sync",
        "api_key",
        "async_client",
        "base_url",
        "deadline",
        "first_byte_timeout",
        "headers",
        "max_connections",
        "max_retries",
        "max_retry_delay",
        "retry_base_delay",
        "sync_client",
        "timeout",
    )

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str,
        timeout: float = 600.0,
        max_retries: int = 2,
        headers: Mapping[str, str] | None = None,
        async_client: httpx2.AsyncClient | None = None,
        sync_client: httpx2.Client | None = None,
        retry_base_delay: float = 0.5,
        max_retry_delay: float = 60.0,
        deadline: float | None = DEFAULT_DEADLINE,
        first_byte_timeout: float | None = DEFAULT_FIRST_BYTE_TIMEOUT,
        max_connections: int | None = MAX_CONNECTIONS,
    ) -> None:
        if max_connections is not None and (
            not isinstance(max_connections, int) or isinstance(max_connections, bool) or max_connections < 1
        ):
            raise ConfigurationError(
                f"max_connections must be a positive integer or None, got {max_connections!r}"
            )
        self.max_connections = max_connections
        self.api_key = api_key
        self.deadline = _seconds(deadline, "deadline")
        self.first_byte_timeout = _seconds(first_byte_timeout, "first_byte_timeout")
        self.base_url = base_url.rstrip("/")
        if not isinstance(timeout, httpx2.Timeout):
            _seconds(timeout, "timeout")  # a positive number of seconds (None: httpx waits forever)
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.headers = dict(headers or {})
        self.async_client = async_client
        self.sync_client = sync_client
        self.retry_base_delay = retry_base_delay
        self.max_retry_delay = max_retry_delay
        self._own_sync: httpx2.Client | None = None
        self._own_async: dict[int, tuple[asyncio.AbstractEventLoop, _AsyncPool]] = {}

    @classmethod
    def create(
        cls,
        *,
        api_key: str | None,
        env_var: str | None,
        key_required: bool,
        base_url: str,
        timeout: float = 600.0,
        max_retries: int = 2,
        headers: Mapping[str, str] | None = None,
        http_client: httpx2.AsyncClient | httpx2.Client | tuple[Any, ...] | None = None,
        retry_base_delay: float = 0.5,
        max_retry_delay: float = 60.0,
        deadline: float | None = DEFAULT_DEADLINE,
        first_byte_timeout: float | None = DEFAULT_FIRST_BYTE_TIMEOUT,
        max_connections: int | None = MAX_CONNECTIONS,
    ) -> HttpOptions:
        """Options with the key resolved (:func:`resolve_api_key`) and ``http_client`` sorted
        into its async / sync slot (a tuple may hold one of each).

        Raises:
            ConfigurationError: no key while ``key_required``; ``http_client`` of another type.
        """
        key = resolve_api_key(api_key, env_var, required=key_required)
        clients = http_client if isinstance(http_client, tuple) else (http_client,)
        a: httpx2.AsyncClient | None = None
        s: httpx2.Client | None = None
        for c in clients:
            if c is None:
                continue
            if isinstance(c, httpx2.AsyncClient):
                a = c
            elif isinstance(c, httpx2.Client):
                s = c
            else:
                raise ConfigurationError(
                    f"http_client must be an httpx2.Client or httpx2.AsyncClient, got {type(c).__name__}"
                )
        return cls(
            api_key=key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            headers=headers,
            async_client=a,
            sync_client=s,
            retry_base_delay=retry_base_delay,
            max_retry_delay=max_retry_delay,
            deadline=deadline,
            first_byte_timeout=first_byte_timeout,
            max_connections=max_connections,
        )

    def secrets(self) -> tuple[str, ...]:
        """Every configured credential: the key, the values of credential-like extra headers
        (:func:`header_secrets`) and the base URL's userinfo (:func:`url_secrets`)."""
        found = [self.api_key] if self.api_key else []
        return (*found, *header_secrets(self.headers), *url_secrets(self.base_url))

    def redact(self, text: str) -> str:
        """``text`` with every one of :meth:`secrets` replaced by ``***``."""
        return redact(text, *self.secrets())

    def __repr__(self) -> str:
        key = "None" if self.api_key is None else "'***'"
        return (
            f"HttpOptions(api_key={key}, base_url={mask_url(self.base_url)!r}, timeout={self.timeout}, "
            f"max_retries={self.max_retries}, headers={sorted(self.headers)})"
        )

    def get_sync_client(self) -> httpx2.Client:
        """The user's ``httpx2.Client``, else one owned by these options (created once)."""
        if self.sync_client is not None:
            return self.sync_client
        if self._own_sync is None:
            self._own_sync = httpx2.Client(timeout=self.timeout, verify=shared_ssl_context())
        return self._own_sync

    def async_pool(self) -> _AsyncPool:
        """The pool of ``httpx2.AsyncClient`` objects these options send through on the running
        event loop (an async client's connections are bound to the loop that opened them). The
        pool is shared by every :class:`HttpOptions` with the same ``timeout`` and
        ``max_connections`` on that loop (:func:`shared_pool`), so a thousand backend objects
        (one per session) share one set of connections instead of keeping one each."""
        loop = asyncio.get_running_loop()
        found = self._own_async.get(id(loop))
        if found is not None and found[0] is loop:
            return found[1]
        for k, (lp, _c) in list(self._own_async.items()):
            if lp.is_closed():
                del self._own_async[k]
        pool = shared_pool(loop, self.timeout, self.max_connections)
        pool.users += 1
        self._own_async[id(loop)] = (loop, pool)
        return pool

    def get_async_client(self) -> httpx2.AsyncClient:
        """The user's ``httpx2.AsyncClient``, else the first client of :meth:`async_pool` (for
        callers sending one request at a time; ``astream_events`` spreads requests over the
        pool)."""
        if self.async_client is not None:
            return self.async_client
        return self.async_pool().client(0)

    def close(self) -> None:
        """Close the sync client these options created and forget their async clients (an
        async client can only be closed on its event loop: :meth:`aclose`). A user's client
        is never closed."""
        if self._own_sync is not None:
            self._own_sync.close()
            self._own_sync = None
        self._own_async.clear()

    async def aclose(self) -> None:
        """Let go of the pool of the running event loop; when no other options use it any
        more, close its clients and their kept-alive connections. Then as :meth:`close`. A
        user's client is never closed; the next request opens new clients."""
        found = self._own_async.pop(id(asyncio.get_running_loop()), None)
        if found is not None:
            await found[1].leave()
        self.close()


def _request_headers(opts: HttpOptions, headers: Mapping[str, str]) -> dict[str, str]:
    """The headers of a streamed POST: the SSE and JSON defaults, the call's, then the options'."""
    h = {"Accept": "text/event-stream", "Content-Type": "application/json"}
    h.update(headers)
    h.update(opts.headers)
    return h
