"""The OpenAI Responses API backend: :func:`openai_responses` and :class:`OpenAIResponsesModel`.

``POST {base_url}/responses`` (the base given with or without ``/v1``) with
``Authorization: Bearer <key>``, streamed over SSE (or, with ``streaming=False``, one JSON
response turned into the same items). The request mapping lives in ``_responses_request.py``,
the stream mapping in ``_responses_stream.py``; HTTP, retries and error text in ``_http.py``.
Sources: OpenAI Responses API reference, https://platform.openai.com/docs/api-reference/responses, docs/concepts.md: Messages, Requests, parameters and usage, The stream contract.

Usage::

    from foundation_ai.backends import openai_responses
    model = openai_responses("gpt-5-mini")            # key from OPENAI_API_KEY
    messages = model.generate(ModelInteraction(messages=[Messages.user("Hi")]))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import msgspec

from ..errors import ProviderError
from ..types import ModelInteraction, ModelParams, ModelProviders, Stream
from ._common import SnapshotHttpModel, describe, price_key
from ._http import (
    DEFAULT_DEADLINE,
    DEFAULT_FIRST_BYTE_TIMEOUT,
    HttpOptions,
    SseEvent,
    Timer,
    join_url,
    resolve_endpoint,
)
from ._responses_request import build_request
from ._responses_stream import ResponsesStreamParser, parse_response
from ._wire_text import decode_event
from .base import ModelDescriptor, ModelStream

__all__ = ["DEFAULT_BASE_URL", "OpenAIResponsesModel", "openai_responses"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""OpenAI's API base; the backend adds ``/responses``."""

_DECODE = decode_event  # msgspec, tolerating half a surrogate pair per event (see _wire_text)


class OpenAIResponsesModel(SnapshotHttpModel):
    """A model served by the OpenAI Responses API (or a server speaking it, such as llama.cpp's
    ``/v1/responses``). ``chunk_mode`` is ``"snapshot"``. Build it with :func:`openai_responses`.

    ``stream`` and ``astream`` never raise for provider or network failures: those end the
    stream with an error message (backends/base.py, rule 4).
    """

    chunk_mode = "snapshot"
    error_provider = ModelProviders.OpenAIResponses

    def __init__(
        self,
        descriptor: ModelDescriptor,
        options: HttpOptions,
        *,
        streaming: bool = True,
        store: bool | None = None,
        price_key: tuple[str | None, str | None] | None = None,
    ) -> None:
        self.descriptor = descriptor
        self.price_key = price_key
        self.options = options
        self.streaming = streaming
        self.store = store
        self.url = join_url(options.base_url, "/responses", version_prefix="/v1")

    def _parser(self) -> ResponsesStreamParser:
        return ResponsesStreamParser(self.model_id, timer=Timer(), price_key=self.price_key)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.options.api_key}"} if self.options.api_key else {}

    def request_body(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> dict[str, Any]:
        """The JSON body this model would send for ``interaction`` (for inspection and tests)."""
        return build_request(
            interaction,
            params or ModelParams(),
            self.descriptor.name,
            stream=self.streaming,
            store=self.store,
        )

    def _feed(self, parser: ResponsesStreamParser, ev: SseEvent) -> list[ModelStream]:
        data = ev.data
        if not data or data == "[DONE]":
            return []
        try:
            doc = _DECODE(data)
        except msgspec.DecodeError as exc:
            raise ProviderError(f"malformed event data ({ev.event}): {exc}: {data[:200]!r}") from None
        if ev.event == "json":  # one JSON document: no time to first token to measure
            items = parse_response(
                doc, parser.model, provider=parser.provider, timer=parser.timer, price_key=parser.price_key
            )
            parser.finished = True
            return [it for it in items if isinstance(it, Stream.Next)]
        return parser.feed(doc)

    def _tail(self, parser: ResponsesStreamParser, params: ModelParams) -> list[ModelStream]:
        return parser.finish()


def openai_responses(
    model: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 600.0,
    max_retries: int = 2,
    headers: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | httpx.Client | tuple[Any, ...] | None = None,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    streaming: bool = True,
    store: bool | None = None,
    retry_base_delay: float = 0.5,
    max_retry_delay: float = 60.0,
    deadline: float | None = DEFAULT_DEADLINE,
    first_byte_timeout: float | None = DEFAULT_FIRST_BYTE_TIMEOUT,
) -> OpenAIResponsesModel:
    """An OpenAI Responses API model.

    Args:
        model: the model name sent to the API, e.g. ``"gpt-5-mini"``.
        api_key: the key. Default: ``OPENAI_API_KEY``, sent only to OpenAI's own host or to the
            host named by ``OPENAI_BASE_URL`` (the key rule of ``docs/models.md``). Required for
            OpenAI's host; optional for another server (e.g. llama.cpp on loopback).
        base_url: the API base, with or without ``/v1``; default ``OPENAI_BASE_URL`` from the
            environment, else ``https://api.openai.com/v1``.
        timeout: seconds for connect / read / write (an ``httpx`` timeout).
        max_retries: retries of 429 / 5xx / connection failures before any output, honouring
            ``Retry-After``; auth and request errors are never retried.
        headers: extra headers on every request (e.g. ``OpenAI-Organization``, Azure's ``api-key``);
            values of credential-like headers (``*key*``, ``*token*``, ``*secret*``,
            ``Authorization``) are masked in reprs and error texts.
        http_client: an ``httpx.Client``, ``httpx.AsyncClient`` or a tuple of both, used as given
            (proxies, test transports) and never closed by the backend. A single client serves
            both paths: with only an ``httpx.Client``, ``astream``/``agenerate`` run its blocking
            calls in worker threads; with only an ``httpx.AsyncClient``, ``stream``/``generate``
            drive it on a private event loop in a worker thread (pass a tuple of both for native
            I/O on each path). Without one the backend owns its clients.
        context_window: tokens the model accepts, when known (for ``is_context_overflow``).
        max_output_tokens: the model's output cap in tokens, when known.
        streaming: ``False`` sends ``stream: false`` and maps the whole JSON response.
        store: sent as ``store`` when given. ``False`` (stateless) replays reasoning through
            ``encrypted_content`` only and drops reasoning items that have none.
        deadline: seconds the whole request may take, retries and the streamed answer included
            (default 900; ``None``: none). A server trickling bytes cannot hold a call longer.
        first_byte_timeout: seconds each attempt may wait for the response to start (default
            300; ``None``: none); an attempt that times out is retried while time is left.
        retry_base_delay: seconds of the first backoff step.
        max_retry_delay: cap in seconds on any single wait between retries.

    Raises:
        ConfigurationError: no API key for the default OpenAI base URL.
    """
    ep = resolve_endpoint(
        api_key=api_key,
        base_url=base_url,
        key_env="OPENAI_API_KEY",
        base_env="OPENAI_BASE_URL",
        default_base_url=DEFAULT_BASE_URL,
    )
    options = HttpOptions.create(
        api_key=ep.api_key,
        env_var=None,
        key_required=False,
        base_url=ep.base_url,
        timeout=timeout,
        max_retries=max_retries,
        headers=headers,
        http_client=http_client,
        retry_base_delay=retry_base_delay,
        max_retry_delay=max_retry_delay,
        deadline=deadline,
        first_byte_timeout=first_byte_timeout,
    )
    key = price_key(ep.base_url, "openai", official=ep.official)
    descriptor = describe(
        model,
        ModelProviders.OpenAIResponses,
        key,
        context_window=context_window,
        max_output_tokens=max_output_tokens,
    )
    return OpenAIResponsesModel(descriptor, options, streaming=streaming, store=store, price_key=key)
