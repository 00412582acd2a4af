"""The HTTP layer shared by the three HTTP backends (OpenAI Chat, OpenAI Responses, Anthropic).

What a backend gets from here (sources: the error and streaming sections of
https://platform.openai.com/docs/api-reference/chat,
https://platform.openai.com/docs/api-reference/responses and
https://docs.anthropic.com/en/api/messages):

- :class:`HttpOptions`: api key, base URL, timeout (seconds), ``max_retries``, extra headers and
  optional user-supplied ``httpx.Client`` / ``httpx.AsyncClient``. Its ``repr`` never shows a
  credential. Build it with :meth:`HttpOptions.create`, which takes the key from the argument or
  an environment variable and accepts ``http_client`` as either kind of client (or a tuple of
  both). A user's client is never bypassed: given only a sync client, the async functions run
  its blocking calls in worker threads; given only an async client, the sync functions drive it
  on a private event loop in a worker thread. Only with no client at all do the options open
  their own connections: async requests go through a pool shared by every backend with the
  same ``timeout`` and ``max_connections`` on the event loop (:func:`shared_pool`; at most
  ``max_connections`` requests in flight, default 1,000, spread over httpx clients of
  :data:`SHARD_CONNECTIONS` connections each, one TLS context for the process, no cookies
  kept), so many sessions with a backend each still share a few kept-alive connections
  (``docs/scaling.md``, "Many sessions in one process").
- :func:`resolve_api_key` and :func:`redact` / :meth:`HttpOptions.redact`: the key from the
  argument or the environment; any text (error bodies, exception messages) scrubbed of every
  configured credential (the key, credential-like header values such as Azure's ``api-key``,
  the base URL's ``user:password``) before it leaves the layer.
- :func:`stream_events` (sync) and :func:`astream_events` (async): POST a JSON body and yield
  :class:`SseEvent` items (``event``, ``data`` as ``str``). Retries happen *inside*, before the
  first event: 429, 5xx (and 408/409/529), connection errors, timeouts and a connection dropped
  before any event are retried up to ``max_retries``
  times, honouring ``Retry-After`` / ``retry-after-ms`` (a wait asked beyond ``max_retry_delay``
  ends the retries: the error is raised at once), else
  exponential backoff with jitter; 400/401/403/404/422 are never retried. Once the first
  event was yielded nothing is retried. A ``Content-Type: application/json`` answer (a server
  that ignored ``stream: true``) is yielded as ONE event with ``event == "json"`` and the whole
  body as ``data``. Every failure raises :class:`HttpStreamError` (a ``ProviderError``) whose
  ``detail`` is clean provider text with no key in it:

  - an HTTP error status: :func:`error_text` of the body, e.g.
    ``"This model's maximum context length is 8192 tokens... (code: context_length_exceeded,
    HTTP 400)"``; an empty 413 body gives ``"413 status code (no body)"``;
  - a dropped connection mid-stream: ``"connection dropped mid-stream: ..."``;
  - a wrong content type, a timeout, a connection failure after the retries.

  - a deadline: ``"no complete answer within the deadline of 900 s (deadline)"`` (final) or
    ``"the server did not start answering within 300 s (first_byte_timeout)"`` (retried while
    time is left);
  - a TLS certificate that does not verify: final, never retried.

  Every network wait has a deadline (``docs/models.md``, "Deadlines"): ``timeout`` bounds each
  connect / read / write, ``first_byte_timeout`` the wait for the response to start, and
  ``deadline`` the whole call, retries and the streamed answer included. Sync requests are
  watched by one shared watchdog thread that shuts the connection's socket at the due time (a
  read blocked on a server trickling a byte a second wakes up); async requests run each wait
  under ``asyncio.timeout_at``.

  The backend catches ``HttpStreamError`` (and its own parse errors, see :class:`WireError`)
  and turns it into the contract's error tail with :func:`error_items`: an Assistant message
  with a fresh id, empty ``TextContent``, ``StopReason.Error`` and the text in
  ``error_detail``, then ``Stream.Pending(ModelState.Error(text))``. Partial output already
  streamed stays valid.
- :class:`Timer`: ``start()`` when the request goes out, ``first()`` at the first output,
  ``metadata(output_tokens)`` -> ``GenerationMetadata.Timing`` (time to first token, tokens per
  second after the first token, duration; all in seconds).
- :func:`join_url`: base URL + path, tolerating a trailing ``/`` and, for OpenAI-compatible
  servers, a base given with or without ``/v1``.

Typical backend code::

    opts = HttpOptions.create(api_key=api_key, env_var="OPENAI_API_KEY", base_url=base_url,
                              default_base_url="https://api.openai.com/v1", ...)
    try:
        async for ev in astream_events(opts, url, body, headers):
            ...  # parse ev.data; yield chunks
    except (HttpStreamError, WireError) as exc:
        for item in error_items(exc.detail, model_id, provider, usage):
            yield item
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import email.utils
import heapq
import itertools
import math
import os
import random
import re
import socket
import ssl
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from http.cookiejar import CookieJar
from typing import Any
from urllib.parse import quote, quote_plus, unquote, urlsplit

import httpx
import msgspec
from httpx_sse import EventSource, SSEError

from ..errors import ConfigurationError, ProviderError
from ..types import (
    AssistantMessage,
    GenerationMetadata,
    ModelId,
    ModelState,
    StopReason,
    Stream,
    TextContent,
    UsageReport,
)
from ._gate import SlotGate
from .base import _sync_iter

__all__ = [
    "DEFAULT_DEADLINE",
    "DEFAULT_FIRST_BYTE_TIMEOUT",
    "MAX_CONNECTIONS",
    "Endpoint",
    "HttpOptions",
    "HttpStreamError",
    "SseEvent",
    "Timer",
    "WireError",
    "astream_events",
    "error_items",
    "error_text",
    "join_url",
    "mask_url",
    "redact",
    "resolve_api_key",
    "resolve_endpoint",
    "retry_delay",
    "secret_forms",
    "shared_pool",
    "shared_ssl_context",
    "stream_events",
]

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})
"""Statuses retried before output (429 rate limit, 5xx, 529 Anthropic overloaded, 408/409)."""

_JSON_DECODER = msgspec.json.Decoder()


class HttpStreamError(ProviderError):
    """An HTTP request or stream failed; ``detail`` is key-free provider text.

    Attributes:
        detail: the text for ``error_detail``.
        status_code: the HTTP status when there was a response, else ``None``.
        retryable: whether the failure is of a kind that was (or would be) retried.
    """

    def __init__(self, detail: str, *, status_code: int | None = None, retryable: bool = False) -> None:
        super().__init__(detail, status_code=status_code)
        self.retryable = retryable


class WireError(ProviderError):
    """A backend could not parse what the provider sent (malformed SSE data or JSON)."""


class SseEvent(msgspec.Struct, frozen=True, gc=False):
    """One server-sent event: ``event`` name (``"message"`` when absent; ``"json"`` for a whole
    JSON response) and its ``data`` text."""

    event: str
    data: str


# --------------------------------------------------------------------------------------------
# keys and options


def resolve_api_key(api_key: str | None, env_var: str | None, *, required: bool) -> str | None:
    """The key from ``api_key``, else from the environment variable ``env_var``.

    Raises:
        ConfigurationError: ``required`` and no key was found (the message names the variable,
            never a key).
    """
    key = api_key or (os.environ.get(env_var) if env_var else None) or None
    if key is None and required:
        raise ConfigurationError(f"no API key: pass api_key=... or set the {env_var} environment variable")
    return key


class Endpoint(msgspec.Struct, frozen=True):
    """Where a backend sends its requests and with which key (see :func:`resolve_endpoint`).

    Attributes:
        base_url: the API base URL.
        api_key: the key to send, or ``None``.
        official: ``base_url`` is the provider's own host over HTTPS.
    """

    base_url: str
    api_key: str | None
    official: bool


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, lower-cased, the default port filled in; a URL whose
    port does not parse gives port ``-1`` (it pairs with nothing)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


def resolve_endpoint(
    *,
    api_key: str | None,
    base_url: str | None,
    key_env: str,
    base_env: str,
    default_base_url: str,
    env: Mapping[str, str] | None = None,
) -> Endpoint:
    """The base URL and the key of a provider backend, by the key rule of ``docs/models.md``.

    The base URL is ``base_url``, else the environment variable ``base_env``
    (``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``, as the official SDKs read them), else
    ``default_base_url``. The key is ``api_key`` when given (the caller chose where it goes).
    A key read from the environment variable ``key_env`` is sent only to the provider's own
    host (the origin of ``default_base_url``, over HTTPS) or to the host the user paired with
    it in the environment (the origin of ``base_env``); to any other host no key is sent, so an
    ``OPENAI_API_KEY`` never reaches a third-party server by accident.

    Raises:
        ConfigurationError: the provider's own host and no key at all (the message names
            ``key_env``, never a key); a base URL with a query or fragment.
    """
    env = os.environ if env is None else env
    env_base = (env.get(base_env) or "").strip() or None
    chosen = (base_url or "").strip() or env_base or default_base_url
    if "?" in chosen or "#" in chosen:
        raise ConfigurationError(
            f"the base URL {mask_url(chosen)!r} has a query or fragment: a base URL is scheme, host,"
            " port and path only (the API path is appended to it)"
        )
    here = _origin(chosen)
    official = here == _origin(default_base_url) and here[0] == "https"
    key = api_key or None
    if key is None:
        paired = env_base is not None and here == _origin(env_base)
        if official or paired:
            key = env.get(key_env) or None
    if key is None and official:
        raise ConfigurationError(f"no API key: pass api_key=... or set the {key_env} environment variable")
    return Endpoint(base_url=chosen, api_key=key, official=official)


MIN_FRAGMENT = 12
"""Shortest prefix or suffix of a secret (or of an encoded form of it) that :func:`redact`
masks when a server echoes the secret cut short."""

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def secret_forms(secret: str) -> list[str]:
    """The forms a server or a log may show ``secret`` in: as is, URL-encoded (``quote`` with
    and without ``/`` kept, ``quote_plus``), base64 and URL-safe base64 (without padding), and
    the three alignments of its base64 inside a longer base64 text (e.g. ``Basic`` auth of
    ``user:secret``). Case is handled by :func:`redact` itself."""
    forms = [secret, quote(secret, safe=""), quote(secret, safe="/"), quote_plus(secret)]
    raw = secret.encode("utf-8", "surrogatepass")
    for pad in (0, 1, 2):
        enc = base64.b64encode(b"\0" * pad + raw).decode()
        start = 4 if pad else 0
        stop = ((pad + len(raw)) // 3) * 4
        core = enc[start:stop]
        if pad == 0:
            core = enc.rstrip("=")
        forms += [core, core.replace("+", "-").replace("/", "_")]
    seen: list[str] = []
    for f in forms:
        if len(f) >= 4 and f not in seen:
            seen.append(f)
    return seen


def _secret_spans(low: str, form: str, min_frag: int) -> list[tuple[int, int]]:
    """Spans of ``low`` (ASCII-lower-cased text) holding ``form`` whole, or a prefix or suffix
    of it at least ``min_frag`` characters long (case-insensitive)."""
    f = form.translate(_ASCII_LOWER)
    n = len(f)
    k = min(min_frag, n)
    spans: list[tuple[int, int]] = []
    head, tail = f[:k], f[n - k :]
    i = low.find(head)
    while i >= 0:
        j = i + k
        while j < len(low) and j - i < n and low[j] == f[j - i]:
            j += 1
        spans.append((i, j))
        i = low.find(head, i + 1)
    i = low.find(tail)
    while i >= 0:
        a = i
        while a > 0 and (i + k) - a < n and low[a - 1] == f[n - k - (i - a) - 1]:
            a -= 1
        spans.append((a, i + k))
        i = low.find(tail, i + 1)
    return spans


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with every secret replaced by ``***``, in every derived form
    (:func:`secret_forms`: URL-encoded, base64, inside a longer base64 text), in any letter
    case, and cut short: a prefix or suffix of at least :data:`MIN_FRAGMENT` characters of a
    form (a server echoing ``"sk-proj-AbCdEf..."``) is masked too. Secrets shorter than 8
    characters are masked only exactly; shorter than 4, not at all. ``Bearer <secret>`` becomes
    ``Bearer ***``."""
    if not text:
        return text
    spans: list[tuple[int, int]] = []
    low = text.translate(_ASCII_LOWER)
    for sec in {s for s in secrets if s and len(s) >= 4}:
        if len(sec) < 8:
            i = text.find(sec)
            while i >= 0:
                spans.append((i, i + len(sec)))
                i = text.find(sec, i + 1)
            continue
        for form in secret_forms(sec):
            spans += _secret_spans(low, form, MIN_FRAGMENT)
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    pos = 0
    cur_a, cur_b = spans[0]
    for a, b in spans[1:]:
        if a <= cur_b:
            cur_b = max(cur_b, b)
            continue
        out += [text[pos:cur_a], "***"]
        pos = cur_b
        cur_a, cur_b = a, b
    out += [text[pos:cur_a], "***", text[cur_b:]]
    return "".join(out)


_CREDENTIAL_HEADER = re.compile(r"key|token|secret|auth|passw|cookie|credential|signature", re.IGNORECASE)
"""Header names whose values are treated as secrets (``api-key``, ``x-api-key``,
``Authorization``, ``x-auth-token``, ``Cookie``, ...)."""


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The values of ``headers`` whose name looks like a credential (:data:`_CREDENTIAL_HEADER`),
    each also without its scheme word (``"Bearer sk-1"`` gives ``"Bearer sk-1"`` and ``"sk-1"``)."""
    out: list[str] = []
    for name, value in headers.items():
        if value and _CREDENTIAL_HEADER.search(name):
            out.append(value)
            scheme, _, rest = value.partition(" ")
            if rest and scheme.isalpha():
                out.append(rest.strip())
    return out


_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def _userinfo(url: str) -> tuple[str, str] | None:
    """(``scheme://``, userinfo) of ``url`` or ``None``. The userinfo ends at the last ``@``
    before the query, so a password holding an unencoded ``/`` (which ``urlsplit`` reads as
    the start of the path) is still found whole."""
    m = _SCHEME.match(url)
    if m is None:
        return None
    rest = url[m.end() :].split("?", 1)[0].split("#", 1)[0]
    if "@" not in rest:
        return None
    return m.group(0), rest.rpartition("@")[0]


def url_secrets(url: str) -> list[str]:
    """The userinfo of ``url`` (``http://user:pass@host``): ``user:pass``, the password (as
    written and decoded), and the base64 ``user:pass`` httpx would send as Basic auth."""
    found = _userinfo(url)
    if found is None:
        return []
    userinfo = found[1]
    user, _, password = userinfo.partition(":")
    out = [userinfo, unquote(userinfo)]
    if password:
        out += [password, unquote(password)]
    plain = f"{unquote(user)}:{unquote(password)}"
    out.append(base64.b64encode(plain.encode()).decode())
    return out


def mask_url(url: str) -> str:
    """``url`` with any userinfo replaced: ``http://u:pw@h/v1`` -> ``http://***@h/v1`` (also
    when the password holds an unencoded ``/``)."""
    found = _userinfo(url)
    if found is None:
        return url
    scheme, userinfo = found
    return scheme + "***@" + url[len(scheme) + len(userinfo) + 1 :]


DEFAULT_DEADLINE = 900.0
"""Seconds a request may take in all, retries and the whole streamed answer included."""

DEFAULT_FIRST_BYTE_TIMEOUT = 300.0
"""Seconds an attempt may wait for the response to start (status line and headers)."""

MAX_CONNECTIONS = 1000
"""Default of :attr:`HttpOptions.max_connections`: requests in flight at once per backend (the
OpenAI Python SDK's default connection limit, https://github.com/openai/openai-python)."""

SHARD_CONNECTIONS = 10
"""Connections per ``httpx.AsyncClient`` of an :class:`_AsyncPool` (httpx's default limit)."""


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
        timeout: seconds for each connect / read / write / pool wait (``httpx.Timeout``).
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
        async_client: httpx.AsyncClient | None = None,
        sync_client: httpx.Client | None = None,
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
        if not isinstance(timeout, httpx.Timeout):
            _seconds(timeout, "timeout")  # a positive number of seconds (None: httpx waits forever)
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.headers = dict(headers or {})
        self.async_client = async_client
        self.sync_client = sync_client
        self.retry_base_delay = retry_base_delay
        self.max_retry_delay = max_retry_delay
        self._own_sync: httpx.Client | None = None
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
        http_client: httpx.AsyncClient | httpx.Client | tuple[Any, ...] | None = None,
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
        a: httpx.AsyncClient | None = None
        s: httpx.Client | None = None
        for c in clients:
            if c is None:
                continue
            if isinstance(c, httpx.AsyncClient):
                a = c
            elif isinstance(c, httpx.Client):
                s = c
            else:
                raise ConfigurationError(
                    f"http_client must be an httpx.Client or httpx.AsyncClient, got {type(c).__name__}"
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

    def get_sync_client(self) -> httpx.Client:
        """The user's ``httpx.Client``, else one owned by these options (created once)."""
        if self.sync_client is not None:
            return self.sync_client
        if self._own_sync is None:
            self._own_sync = httpx.Client(timeout=self.timeout, verify=shared_ssl_context())
        return self._own_sync

    def async_pool(self) -> _AsyncPool:
        """The pool of ``httpx.AsyncClient`` objects these options send through on the running
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

    def get_async_client(self) -> httpx.AsyncClient:
        """The user's ``httpx.AsyncClient``, else the first client of :meth:`async_pool` (for
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


_SSL_LOCK = threading.Lock()
_SSL: list[ssl.SSLContext] = []


def shared_ssl_context() -> ssl.SSLContext:
    """The TLS context of every client the options create, built once per process by
    ``httpx.create_ssl_context()`` (certifi's CA bundle, or ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR`` as httpx reads them). Loading a CA bundle costs about 800 KB of memory,
    so one context per client would cost that per backend object."""
    if not _SSL:
        with _SSL_LOCK:
            if not _SSL:
                _SSL.append(httpx.create_ssl_context())
    return _SSL[0]


class _AsyncPool:
    """The own async clients of the :class:`HttpOptions` sharing one setting on one event
    loop (:func:`shared_pool`): up to
    ``max_connections`` requests in flight (the rest wait in a :class:`~._gate.SlotGate`, first
    come first served, each until its first-byte deadline), spread over ``httpx.AsyncClient`` objects of
    :data:`SHARD_CONNECTIONS` connections each, created as the load grows. httpcore's pool
    scans its connections on every request and release (and counts the idle ones once per
    idle connection), so one client holding thousands of connections would cost
    O(connections) to O(connections squared) per request; small shards keep that scan short."""

    __slots__ = ("_busy", "_clients", "_key", "_timeout", "gate", "users")

    def __init__(self, timeout: Any, max_connections: int | None, key: Any = None) -> None:
        self._timeout = timeout
        self._clients: list[httpx.AsyncClient] = []
        self._busy: list[int] = []
        self.gate = SlotGate(max_connections) if max_connections is not None else None
        """The wait for a slot (``None``: no limit); :meth:`acquire` is ``gate.acquire()`` then
        :meth:`take`."""
        self._key = key
        self.users = 0
        """How many :class:`HttpOptions` send through this pool (see :meth:`leave`)."""

    def client(self, i: int) -> httpx.AsyncClient:
        """Shard ``i`` (created when ``i`` is the next index)."""
        if i == len(self._clients):
            limits = httpx.Limits(
                max_connections=SHARD_CONNECTIONS, max_keepalive_connections=SHARD_CONNECTIONS
            )
            self._clients.append(
                httpx.AsyncClient(
                    timeout=self._timeout, limits=limits, verify=shared_ssl_context(), cookies=_NoCookies()
                )
            )
            self._busy.append(0)
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
        busy = self._busy
        i = 0
        while i < len(busy) and busy[i] >= SHARD_CONNECTIONS:
            i += 1
        self.client(i)
        busy[i] += 1
        return i

    def release(self, i: int) -> None:
        """Give back the slot taken by :meth:`acquire`."""
        self._busy[i] -= 1
        if self.gate is not None:
            self.gate.release()

    async def aclose(self) -> None:
        """Close every client (requests still in flight fail)."""
        clients, self._clients, self._busy = self._clients, [], []
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


def join_url(base_url: str, path: str, *, version_prefix: str | None = None) -> str:
    """``base_url`` + ``path``. With ``version_prefix="/v1"`` the prefix is added unless the base
    already ends with it: ``join_url("http://h:8080", "/chat/completions", version_prefix="/v1")``
    and ``join_url("http://h:8080/v1/", ...)`` both give ``http://h:8080/v1/chat/completions``."""
    base = base_url.rstrip("/")
    if version_prefix and not base.endswith(version_prefix):
        base += version_prefix
    return base + path


# --------------------------------------------------------------------------------------------
# error text


def error_text(status: int, body: bytes | str, *, secrets: tuple[str | None, ...] = ()) -> str:
    """Clean provider text for an HTTP error ``status`` with ``body``.

    Reads the ``message`` of an OpenAI (``{"error": {"message", "type", "code"}}``), Anthropic
    (``{"type": "error", "error": {"type", "message"}}``) or llama.cpp error object and appends
    the code/type in parentheses with the status: ``"<message> (code: context_length_exceeded,
    HTTP 400)"``. A non-JSON body is quoted (first 1,000 characters); an empty body gives
    ``"<status> status code (no body)"`` (the Cerebras/Mistral overflow shape, docs/concepts.md: Context overflow).
    Secrets are redacted.
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes | bytearray) else body
    text = text.strip()
    if not text:
        return redact(f"{status} status code (no body)", *secrets)
    message: str | None = None
    tags: list[str] = []
    try:
        doc = _JSON_DECODER.decode(text)
    except msgspec.DecodeError:
        doc = None
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):
        doc = doc[0]
    if isinstance(doc, dict):
        err = doc.get("error", doc)
        if isinstance(err, str):
            message = err
        elif isinstance(err, dict):
            m = err.get("message") or err.get("msg") or err.get("detail")
            message = m if isinstance(m, str) else (None if m is None else str(m))
            for field in ("code", "type", "param"):
                v = err.get(field)
                if v not in (None, "", status) and field != "param":
                    tags.append(f"{field}: {v}")
        if message is None and isinstance(doc.get("message"), str):
            message = doc["message"]
    if message is None:
        message = text[:1000]
    tags.append(f"HTTP {status}")
    return redact(f"{message} ({', '.join(tags)})", *secrets)


def _header_seconds(headers: httpx.Headers) -> float | None:
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


def retry_delay(attempt: int, headers: httpx.Headers | None, opts: HttpOptions) -> float:
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


# --------------------------------------------------------------------------------------------
# POST + SSE


def _request_headers(opts: HttpOptions, headers: Mapping[str, str]) -> dict[str, str]:
    h = {"Accept": "text/event-stream", "Content-Type": "application/json"}
    h.update(headers)
    h.update(opts.headers)
    return h


def _status_error(status: int, raw: bytes, opts: HttpOptions) -> HttpStreamError:
    """The error for an HTTP error ``status`` whose body is ``raw`` (secrets masked in the
    text); retryable for the statuses in ``RETRY_STATUSES``."""
    return HttpStreamError(
        error_text(status, raw, secrets=opts.secrets()),
        status_code=status,
        retryable=status in RETRY_STATUSES,
    )


def _connect_error(exc: Exception, opts: HttpOptions) -> HttpStreamError:
    kind = type(exc).__name__
    return HttpStreamError(opts.redact(f"connection failed ({kind}): {exc}"), retryable=True)


def _is_json(resp: httpx.Response) -> bool:
    return "json" in resp.headers.get("content-type", "")


def _mid_stream_error(exc: Exception, opts: HttpOptions) -> HttpStreamError:
    if isinstance(exc, httpx.TimeoutException):
        msg = f"stream timed out ({type(exc).__name__}): {exc}"
    elif isinstance(exc, SSEError):
        msg = f"malformed event stream: {exc}"
    else:
        msg = f"connection dropped mid-stream ({type(exc).__name__}): {exc}"
    return HttpStreamError(opts.redact(msg))


_STREAM_ERRORS = (httpx.TransportError, httpx.StreamError, SSEError, UnicodeDecodeError)
_RETRY_EXC = (
    httpx.ConnectError,
    httpx.TimeoutException,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)
"""Transport failures retried when no event was yielded yet (connect, timeouts, resets)."""


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

    def started(self, resp: httpx.Response) -> None:
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


def _is_cert_error(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) is a TLS certificate verification failure: final,
    never retried (the same certificate fails the same way)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


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
    deadline. With only a user ``httpx.AsyncClient`` configured, the request goes through that
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
        # An AsyncClient's pooled connections belong to the event loop that opened them, and this
        # private loop ends with the call: ask for the connection to be closed after the answer
        # so none is left in the pool bound to a dead loop.
        once = {**headers, "Connection": "close"}
        yield from _sync_iter(lambda: astream_events(opts, url, body, once))
        return
    client = opts.get_sync_client()
    content = body if isinstance(body, bytes) else msgspec.json.encode(body)
    hdrs = _request_headers(opts, headers)
    clock = _Clock(opts)
    attempt = 0
    while True:
        clock.new_attempt()
        watch = _Watch(clock)
        started = yielded = False
        wait: float | None = None
        resp: httpx.Response | None = None
        try:
            watch.arm(clock.first_due, "first_byte" if clock.first_due < clock.end else "deadline")
            with client.stream(
                "POST",
                url,
                content=content,
                headers=hdrs,
                timeout=clock.httpx_timeout(),
                extensions={"trace": watch.trace},
            ) as resp:
                watch.started(resp)
                started = True
                if resp.status_code >= 400:
                    err = _status_error(resp.status_code, resp.read(), opts)
                    wait = _retry_wait(err, attempt, resp.headers, clock, opts)
                    if wait is None:
                        raise err
                else:
                    if _is_json(resp):
                        raw = resp.read()
                        clock.check()
                        yield SseEvent("json", raw.decode("utf-8", "replace"))
                        return
                    _check_event_stream(resp, opts)
                    events = EventSource(resp).iter_sse()
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
            failure = _attempt_error(exc, clock, opts, attempt, started, yielded)
            if failure is not None:
                raise failure from None
            wait = _retry_wait(None, attempt, None, clock, opts)
            if wait is None:
                raise (clock.error() if clock.expired else _connect_error(exc, opts)) from None
        finally:
            watch.disarm()
            if resp is not None:
                _unlink(resp)
        time.sleep(wait)
        attempt += 1


_SPENT = httpx.ByteStream(b"")


def _unlink(resp: httpx.Response) -> None:
    """Break the reference cycle of a closed ``resp`` (httpx binds a response's body stream to
    the response itself), so the response, its request and the transport's per-request
    objects are freed at once by reference counting instead of waiting, as cyclic garbage,
    for a full (slow, generation-2) garbage collection. An open response is left alone."""
    if resp.is_closed:
        resp.stream = _SPENT


def _retry_wait(
    err: HttpStreamError | None, attempt: int, headers: httpx.Headers | None, clock: _Clock, opts: HttpOptions
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
    answer, :class:`_ReadDeadline`). With only a user ``httpx.Client`` configured, the request
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
    while True:
        clock.new_attempt()
        started = yielded = False
        wait: float | None = None
        shard = -1
        try:
            try:
                if pool is not None:
                    gate = pool.gate
                    if gate is not None and not gate.try_take():
                        # one future per waiting request (thousands may wait); the first-byte deadline runs
                        slot = gate.wait(loop, clock.loop_due(loop, clock.first_due))
                        try:
                            await slot
                        except BaseException as exc:
                            _left_queue(gate, slot, exc, clock)
                            raise
                    shard = pool.take()
                    resp = await _send(pool.client(shard), clock, loop, url, content, hdrs)
                else:
                    assert client is not None
                    resp = await _send(client, clock, loop, url, content, hdrs)
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
                        events = EventSource(resp).aiter_sse()
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
            failure = _attempt_error(exc, clock, opts, attempt, started, yielded)
            if failure is not None:
                raise failure from None
            wait = _retry_wait(None, attempt, None, clock, opts)
            if wait is None:
                raise (clock.error() if clock.expired else _connect_error(exc, opts)) from None
        await asyncio.sleep(wait)
        attempt += 1


DRAIN_SECONDS = 0.25
"""Longest wait, after a stream's last event, for the rest of its body (see ``final``)."""


async def _send(
    client: httpx.AsyncClient,
    clock: _Clock,
    loop: asyncio.AbstractEventLoop,
    url: str,
    content: bytes,
    hdrs: Mapping[str, str],
) -> httpx.Response:
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
    resp: httpx.Response, end: float | None, attempt: int, clock: _Clock, opts: HttpOptions
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


def _check_event_stream(resp: httpx.Response, opts: HttpOptions) -> None:
    ctype = resp.headers.get("content-type", "")
    if ctype and "event-stream" not in ctype and not ctype.startswith("text/plain"):
        raise HttpStreamError(
            opts.redact(f"unexpected content type {ctype!r} (expected text/event-stream)"),
            status_code=resp.status_code,
        )


# --------------------------------------------------------------------------------------------
# the error tail and timing


def error_items(
    detail: str, model: ModelId, provider: str, usage: UsageReport | None = None
) -> list[Stream[Any, Any]]:
    """The contract's failure tail (backends/base.py, rule 4): an Assistant message with a fresh
    id, empty text, ``StopReason.Error`` and ``detail`` in ``error_detail`` (usage so far
    attached), then ``Stream.Pending(ModelState.Error(detail))``."""
    msg = AssistantMessage(
        model=model,
        content=TextContent(""),
        usage=usage if usage is not None else UsageReport(),
        stop_reason=StopReason.Error(),
        provider=provider,
        error_detail=detail,
    )
    return [Stream.Next(msg), Stream.Pending(ModelState.Error(detail))]


class Timer(msgspec.Struct, gc=False):
    """Wall-clock timing of one generation (``time.perf_counter``; seconds).

    ``start()`` when the request is sent, ``first()`` at the first output (idempotent),
    ``metadata(output_tokens)`` for the ``GenerationMetadata.Timing`` to attach. Holds two
    floats: not tracked by the cycle collector (msgspec ``gc=False``).
    """

    t0: float = msgspec.field(default_factory=time.perf_counter)
    t_first: float | None = None

    def start(self) -> None:
        """Restart the clock (call right before sending the request)."""
        self.t0 = time.perf_counter()
        self.t_first = None

    def first(self) -> None:
        """Mark the first output token (only the first call counts)."""
        if self.t_first is None:
            self.t_first = time.perf_counter()

    def metadata(self, output_tokens: float | None) -> GenerationMetadata:
        """``GenerationMetadata.Timing``: time to first token, output tokens per second after the
        first token (``None`` when unknown or no time elapsed), total duration."""
        now = time.perf_counter()
        ttft = None if self.t_first is None else self.t_first - self.t0
        tps = None
        if self.t_first is not None and output_tokens:
            gen = now - self.t_first
            if gen > 0:
                tps = float(output_tokens) / gen
        return GenerationMetadata.Timing(
            time_to_first_token=ttft, tokens_per_second=tps, duration=now - self.t0
        )
