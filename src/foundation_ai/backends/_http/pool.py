"""The async connection pool shared by every backend with the same timeout and connection cap on an event
loop (:func:`shared_pool`; ``docs/scaling.md``, "Many sessions in one process"), and the one TLS context.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from http.cookiejar import CookieJar
from typing import Any

import httpx2

from .._gate import SlotGate

__all__ = ["MAX_CONNECTIONS", "shared_pool", "shared_ssl_context"]


MAX_CONNECTIONS = 1000
"""Default of :attr:`HttpOptions.max_connections`: requests in flight at once per backend (the
OpenAI Python SDK's default connection limit, https://github.com/openai/openai-python)."""

SHARD_CONNECTIONS = 2
"""Connections per ``httpx2.AsyncClient`` of an :class:`_AsyncPool`: httpcore checks every
connection of a client on each request and release (a ``select`` on each idle one), so few
per client keep that short; a client costs about 3 KiB."""


_SSL_LOCK = threading.Lock()
_SSL: list[ssl.SSLContext] = []


def shared_ssl_context() -> ssl.SSLContext:
    """The TLS context of every client the options create, built once per process by
    ``httpx2.create_ssl_context()`` (certifi's CA bundle, or ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR`` as httpx reads them). Loading a CA bundle costs about 800 KB of memory,
    so one context per client would cost that per backend object."""
    if not _SSL:
        with _SSL_LOCK:
            if not _SSL:
                _SSL.append(httpx2.create_ssl_context())
    return _SSL[0]


class _AsyncPool:
    """The own async clients of the :class:`HttpOptions` sharing one setting on one event
    loop (:func:`shared_pool`): up to
    ``max_connections`` requests in flight (the rest wait in a :class:`~._gate.SlotGate`, first
    come first served, each until its first-byte deadline), spread over ``httpx2.AsyncClient`` objects of
    :data:`SHARD_CONNECTIONS` connections each, created as the load grows. httpcore's pool
    scans its connections on every request and release (and counts the idle ones once per
    idle connection), so one client holding thousands of connections would cost
    O(connections) to O(connections squared) per request; small shards keep that scan short."""

    __slots__ = ("_busy", "_clients", "_free", "_key", "_timeout", "gate", "users")

    def __init__(self, timeout: Any, max_connections: int | None, key: Any = None) -> None:
        self._timeout = timeout
        self._clients: list[httpx2.AsyncClient] = []
        self._busy: list[int] = []
        self._free: list[int] = []
        """One entry per free connection slot: its shard's index (the last released on top, so
        the connection used last, still kept alive, is used first)."""
        self.gate = SlotGate(max_connections) if max_connections is not None else None
        """The wait for a slot (``None``: no limit); :meth:`acquire` is ``gate.acquire()`` then
        :meth:`take`."""
        self._key = key
        self.users = 0
        """How many :class:`HttpOptions` send through this pool (see :meth:`leave`)."""

    def client(self, i: int) -> httpx2.AsyncClient:
        """Shard ``i`` (created when ``i`` is the next index)."""
        if i == len(self._clients):
            limits = httpx2.Limits(
                max_connections=SHARD_CONNECTIONS, max_keepalive_connections=SHARD_CONNECTIONS
            )
            self._clients.append(
                httpx2.AsyncClient(
                    timeout=self._timeout, limits=limits, verify=shared_ssl_context(), cookies=_NoCookies()
                )
            )
            self._busy.append(0)
            self._free.extend([i] * SHARD_CONNECTIONS)
        return self._clients[i]

    async def acquire(self) -> int:
        """Wait for a slot; the index of the shard to send through (release it with
        :meth:`release`)."""
        if self.gate is not None:
            await self.gate.acquire()
        return self.take()

    def take(self) -> int:
        """The index of the shard to send through, once a slot of :attr:`gate` is held (or
        without a gate); release it with :meth:`release`."""
        free = self._free
        if not free:  # every shard is full: a new one
            self.client(len(self._clients))
        i = free.pop()
        self._busy[i] += 1
        return i

    def release(self, i: int) -> None:
        """Give back the slot taken by :meth:`acquire`."""
        self._busy[i] -= 1
        self._free.append(i)
        if self.gate is not None:
            self.gate.release()

    async def aclose(self) -> None:
        """Close every client (requests still in flight fail)."""
        clients, self._clients, self._busy, self._free = self._clients, [], [], []
        for c in clients:
            await c.aclose()

    async def leave(self) -> None:
        """One user fewer; the last one out closes the clients and drops the pool from the
        shared registry (the next request makes a new pool)."""
        self.users -= 1
        if self.users <= 0:
            with _POOLS_LOCK:
                if self._key is not None and _POOLS.get(self._key, (None, None))[1] is self:
                    del _POOLS[self._key]
            await self.aclose()


class _NoCookies(CookieJar):
    """A cookie jar that keeps nothing: the pools are shared between backends (maybe with
    different keys), so a cookie one server response sets must not ride along on another
    backend's requests. HTTP APIs of model providers need no cookies."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None

    def set_cookie(self, cookie: Any) -> None:
        return None


_POOLS: dict[tuple[int, str, int | None], tuple[asyncio.AbstractEventLoop, _AsyncPool]] = {}
_POOLS_LOCK = threading.Lock()


async def close_pools(loop: asyncio.AbstractEventLoop) -> None:
    """Close and forget every pool of own async clients bound to ``loop`` (run on ``loop``
    just before it closes: a session's private loop), so their kept-alive connections are
    closed now rather than left open until garbage collection warns about them."""
    with _POOLS_LOCK:
        mine = [k for k, (lp, _p) in _POOLS.items() if lp is loop]
        pools = [_POOLS.pop(k)[1] for k in mine]
    for pool in pools:
        await pool.aclose()


def shared_pool(loop: asyncio.AbstractEventLoop, timeout: Any, max_connections: int | None) -> _AsyncPool:
    """The pool of own async clients for ``loop`` with these settings, made on first use and
    shared by every :class:`HttpOptions` asking with the same ones (pools of closed loops are
    dropped here)."""
    key = (id(loop), repr(timeout), max_connections)
    with _POOLS_LOCK:
        found = _POOLS.get(key)
        if found is not None and found[0] is loop:
            return found[1]
        for k, (lp, _p) in list(_POOLS.items()):
            if lp.is_closed():
                del _POOLS[k]
        pool = _AsyncPool(timeout, max_connections, key)
        _POOLS[key] = (loop, pool)
    return pool
