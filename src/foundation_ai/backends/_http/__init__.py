"""The HTTP layer shared by the three HTTP backends (OpenAI Chat, OpenAI Responses, Anthropic).

One module per concern: ``endpoint`` (endpoint and key resolution), ``secrets`` (secret masking),
``options`` (:class:`HttpOptions`), ``pool`` (the async pool), ``deadline`` (deadlines and watchdogs),
``sync_stream`` / ``async_stream`` (SSE streaming), ``retry``, ``drain``, ``failures`` (error text and
the error tail) and ``events`` (:class:`SseEvent`, :class:`Timer`). This package re-exports what the
backends use.

What a backend gets from here (sources: the error and streaming sections of
https://platform.openai.com/docs/api-reference/chat,
https://platform.openai.com/docs/api-reference/responses and
https://docs.anthropic.com/en/api/messages):

- :class:`HttpOptions`: api key, base URL, timeout (seconds), ``max_retries``, extra headers and
  optional user-supplied ``httpx2.Client`` / ``httpx2.AsyncClient``. Its ``repr`` never shows a
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

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .async_stream import astream_events
    from .drain import DRAIN_SECONDS
    from .endpoint import Endpoint, join_url, resolve_api_key, resolve_endpoint
    from .events import SseEvent, Timer
    from .failures import RETRY_STATUSES, HttpStreamError, WireError, error_items, error_text
    from .options import DEFAULT_DEADLINE, DEFAULT_FIRST_BYTE_TIMEOUT, HttpOptions
    from .pool import MAX_CONNECTIONS, SHARD_CONNECTIONS, close_pools, shared_pool, shared_ssl_context
    from .retry import retry_delay
    from .secrets import header_secrets, mask_url, redact, secret_forms, url_secrets
    from .sync_stream import stream_events

_WHERE = {
    "astream_events": "async_stream",
    "DRAIN_SECONDS": "drain",
    "Endpoint": "endpoint",
    "join_url": "endpoint",
    "resolve_api_key": "endpoint",
    "resolve_endpoint": "endpoint",
    "SseEvent": "events",
    "Timer": "events",
    "RETRY_STATUSES": "failures",
    "HttpStreamError": "failures",
    "WireError": "failures",
    "error_items": "failures",
    "error_text": "failures",
    "DEFAULT_DEADLINE": "options",
    "DEFAULT_FIRST_BYTE_TIMEOUT": "options",
    "HttpOptions": "options",
    "MAX_CONNECTIONS": "pool",
    "SHARD_CONNECTIONS": "pool",
    "close_pools": "pool",
    "shared_pool": "pool",
    "shared_ssl_context": "pool",
    "retry_delay": "retry",
    "header_secrets": "secrets",
    "mask_url": "secrets",
    "redact": "secrets",
    "secret_forms": "secrets",
    "url_secrets": "secrets",
    "stream_events": "sync_stream",
}
"""Where each re-exported name lives: imported on first use, so a caller needing only
``mask_url`` or ``resolve_endpoint`` (the CLI, model strings, the local llama.cpp backend) does
not load httpx (the cold run, `bench/cold_run.py`)."""


__getattr__ = lazy_exports(globals(), _WHERE, __name__)


__all__ = [
    "DEFAULT_DEADLINE",
    "DEFAULT_FIRST_BYTE_TIMEOUT",
    "DRAIN_SECONDS",
    "Endpoint",
    "HttpOptions",
    "HttpStreamError",
    "MAX_CONNECTIONS",
    "RETRY_STATUSES",
    "SHARD_CONNECTIONS",
    "SseEvent",
    "Timer",
    "WireError",
    "astream_events",
    "close_pools",
    "error_items",
    "error_text",
    "header_secrets",
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
    "url_secrets",
]
