"""The HTTP layer shared by the three HTTP backends (OpenAI Chat, OpenAI Responses, Anthropic).

What a backend gets from here (issue 3, "Failure"; wire-notes sections 2-4):

- :class:`HttpOptions`: api key, base URL, timeout (seconds), ``max_retries``, extra headers and
  optional user-supplied ``httpx.Client`` / ``httpx.AsyncClient``. Its ``repr`` never shows a
  credential. Build it with :meth:`HttpOptions.create`, which takes the key from the argument or
  an environment variable and accepts ``http_client`` as either kind of client (or a tuple of
  both). A user's client is never bypassed: given only a sync client, the async functions run
  its blocking calls in worker threads; given only an async client, the sync functions drive it
  on a private event loop in a worker thread. Only with no client at all do the options open
  their own connections.
- :func:`resolve_api_key` and :func:`redact` / :meth:`HttpOptions.redact`: the key from the
  argument or the environment; any text (error bodies, exception messages) scrubbed of every
  configured credential (the key, credential-like header values such as Azure's ``api-key``,
  the base URL's ``user:password``) before it leaves the layer.
- :func:`stream_events` (sync) and :func:`astream_events` (async): POST a JSON body and yield
  :class:`SseEvent` items (``event``, ``data`` as ``str``). Retries happen *inside*, before the
  first event: 429, 5xx (and 408/409/529), connection errors, timeouts and a connection dropped
  before any event are retried up to ``max_retries``
  times, honouring ``Retry-After`` / ``retry-after-ms`` (capped by ``max_retry_delay``), else
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
import email.utils
import math
import os
import random
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

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
from .base import _sync_iter

__all__ = [
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
    "redact",
    "resolve_api_key",
    "resolve_endpoint",
    "retry_delay",
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
            ``key_env``, never a key).
    """
    env = os.environ if env is None else env
    env_base = (env.get(base_env) or "").strip() or None
    chosen = (base_url or "").strip() or env_base or default_base_url
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


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with every secret of 4 or more characters replaced by ``***`` (longest first, so
    a secret containing another is masked whole; ``Bearer <secret>`` becomes ``Bearer ***``)."""
    for s in sorted((s for s in secrets if s and len(s) >= 4), key=len, reverse=True):
        if s in text:
            text = text.replace(s, "***")
    return text


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


def url_secrets(url: str) -> list[str]:
    """The userinfo of ``url`` (``http://user:pass@host``): ``user:pass``, the password, and the
    base64 ``user:pass`` httpx would send as Basic auth."""
    parts = urlsplit(url)
    if not parts.username and not parts.password:
        return []
    userinfo = parts.netloc.rpartition("@")[0]
    out = [userinfo, unquote(userinfo)]
    if parts.password:
        out += [parts.password, unquote(parts.password)]
    plain = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    out.append(base64.b64encode(plain.encode()).decode())
    return out


def mask_url(url: str) -> str:
    """``url`` with any userinfo replaced: ``http://u:pw@h/v1`` -> ``http://***@h/v1``."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


class HttpOptions:
    """Connection options of one HTTP backend.

    ``repr`` shows ``api_key='***'``, header names only and the base URL without its userinfo;
    :meth:`secrets` lists every configured credential (the key, credential-like header values,
    the base URL's userinfo) for :func:`redact`, which every error text here goes through.

    Attributes:
        api_key: the key or ``None`` (local servers need none).
        base_url: the base URL without a trailing ``/``.
        timeout: seconds for connect / read / write / pool (``httpx.Timeout``).
        max_retries: retries after the first attempt (0 disables retrying).
        headers: extra headers sent on every request.
        async_client / sync_client: user-supplied clients (used as given, never closed here).
        retry_base_delay: seconds of the first backoff step (doubles each retry, with jitter).
        max_retry_delay: the cap on any wait, including ``Retry-After``, in seconds.
    """

    __slots__ = (
        "_own_async",
        "_own_sync",
        "api_key",
        "async_client",
        "base_url",
        "headers",
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
    ) -> None:
        self.api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.headers = dict(headers or {})
        self.async_client = async_client
        self.sync_client = sync_client
        self.retry_base_delay = retry_base_delay
        self.max_retry_delay = max_retry_delay
        self._own_sync: httpx.Client | None = None
        self._own_async: dict[int, tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]] = {}

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
            self._own_sync = httpx.Client(timeout=self.timeout)
        return self._own_sync

    def get_async_client(self) -> httpx.AsyncClient:
        """The user's ``httpx.AsyncClient``, else one owned by these options for the running
        event loop (an async client's pool is bound to the loop that used it)."""
        if self.async_client is not None:
            return self.async_client
        loop = asyncio.get_running_loop()
        found = self._own_async.get(id(loop))
        if found is not None and found[0] is loop:
            return found[1]
        for k, (lp, _c) in list(self._own_async.items()):
            if lp.is_closed():
                del self._own_async[k]
        client = httpx.AsyncClient(timeout=self.timeout)
        self._own_async[id(loop)] = (loop, client)
        return client

    def close(self) -> None:
        """Close the clients these options created (never the user's)."""
        if self._own_sync is not None:
            self._own_sync.close()
            self._own_sync = None
        self._own_async.clear()


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
    ``"<status> status code (no body)"`` (the Cerebras/Mistral overflow shape, wire-notes 1).
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


def stream_events(
    opts: HttpOptions, url: str, body: bytes | Mapping[str, Any], headers: Mapping[str, str]
) -> Iterator[SseEvent]:
    """POST ``body`` (JSON bytes or an object) to ``url`` and yield its server-sent events.

    Retries before the first event as the module docstring says; never after. With only a
    user ``httpx.AsyncClient`` configured, the request goes through that client (on a private
    event loop in a worker thread, :func:`~foundation_ai.backends.base._sync_iter`, with
    ``Connection: close`` so no pooled connection outlives that loop), never through a client of
    our own.

    Raises:
        HttpStreamError: HTTP error status, connection failure, dropped stream, bad content type.
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
    attempt = 0
    while True:
        try:
            with client.stream("POST", url, content=content, headers=hdrs, timeout=opts.timeout) as resp:
                if resp.status_code >= 400:
                    err = _status_error(resp.status_code, resp.read(), opts)
                    if err.retryable and attempt < opts.max_retries:
                        time.sleep(retry_delay(attempt, resp.headers, opts))
                        attempt += 1
                        continue
                    raise err
                if _is_json(resp):
                    yield SseEvent("json", resp.read().decode("utf-8", "replace"))
                    return
                _check_event_stream(resp, opts)
                yielded = False
                try:
                    for sse in EventSource(resp).iter_sse():
                        yielded = True
                        yield SseEvent(sse.event, sse.data)
                except _STREAM_ERRORS as exc:
                    if yielded or not isinstance(exc, _RETRY_EXC) or attempt >= opts.max_retries:
                        raise _mid_stream_error(exc, opts) from None
                    time.sleep(retry_delay(attempt, None, opts))  # dropped before any event
                    attempt += 1
                    continue
                return
        except _RETRY_EXC as exc:
            # raised before any event was yielded (mid-stream errors are converted above)
            if attempt < opts.max_retries:
                time.sleep(retry_delay(attempt, None, opts))
                attempt += 1
                continue
            raise _connect_error(exc, opts) from None
        except httpx.TransportError as exc:
            raise _connect_error(exc, opts) from None


async def astream_events(
    opts: HttpOptions, url: str, body: bytes | Mapping[str, Any], headers: Mapping[str, str]
) -> AsyncIterator[SseEvent]:
    """Async :func:`stream_events`: same events, retries and errors. With only a user
    ``httpx.Client`` configured, the request goes through that client, each blocking step in a
    worker thread (``asyncio.to_thread``), never through a client of our own."""
    if opts.async_client is None and opts.sync_client is not None:
        async for ev in _in_thread(stream_events(opts, url, body, headers)):
            yield ev
        return
    client = opts.get_async_client()
    content = body if isinstance(body, bytes) else msgspec.json.encode(body)
    hdrs = _request_headers(opts, headers)
    attempt = 0
    while True:
        try:
            async with client.stream(
                "POST", url, content=content, headers=hdrs, timeout=opts.timeout
            ) as resp:
                if resp.status_code >= 400:
                    err = _status_error(resp.status_code, await resp.aread(), opts)
                    if err.retryable and attempt < opts.max_retries:
                        await asyncio.sleep(retry_delay(attempt, resp.headers, opts))
                        attempt += 1
                        continue
                    raise err
                if _is_json(resp):
                    yield SseEvent("json", (await resp.aread()).decode("utf-8", "replace"))
                    return
                _check_event_stream(resp, opts)
                yielded = False
                try:
                    async for sse in EventSource(resp).aiter_sse():
                        yielded = True
                        yield SseEvent(sse.event, sse.data)
                except _STREAM_ERRORS as exc:
                    if yielded or not isinstance(exc, _RETRY_EXC) or attempt >= opts.max_retries:
                        raise _mid_stream_error(exc, opts) from None
                    await asyncio.sleep(retry_delay(attempt, None, opts))  # dropped before any event
                    attempt += 1
                    continue
                return
        except _RETRY_EXC as exc:
            if attempt < opts.max_retries:
                await asyncio.sleep(retry_delay(attempt, None, opts))
                attempt += 1
                continue
            raise _connect_error(exc, opts) from None
        except httpx.TransportError as exc:
            raise _connect_error(exc, opts) from None


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


class Timer:
    """Wall-clock timing of one generation (``time.perf_counter``; seconds).

    ``start()`` when the request is sent, ``first()`` at the first output (idempotent),
    ``metadata(output_tokens)`` for the ``GenerationMetadata.Timing`` to attach.
    """

    __slots__ = ("t0", "t_first")

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.t_first: float | None = None

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
