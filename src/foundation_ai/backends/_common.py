"""Plumbing shared by the HTTP backends (``openai_chat``, ``anthropic``, ``openai_responses``).

- :func:`price_key` / :func:`describe`: how genai-prices finds a model's prices and the
  :class:`~foundation_ai.backends.base.ModelDescriptor` carrying them.
- :class:`HttpBackend`: ``close`` and a key-free ``repr`` over an :class:`~._http.HttpOptions`.
- :class:`SnapshotParser`: the common state and chunk building of the SSE-event parsers.
- :class:`SnapshotHttpModel`: ``stream`` / ``astream`` / ``generate`` / ``agenerate`` for a
  backend whose parser is fed one SSE event at a time (Anthropic Messages, OpenAI Responses),
  following the Model contract of ``backends/base.py`` (rule 4: provider and network failures
  end the stream with an error message, they are never raised).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping
from contextlib import aclosing, closing
from typing import Any, ClassVar, NamedTuple, cast
from urllib.parse import urlsplit

from ..errors import ProviderError
from ..pricing import model_prices
from ..types import (
    AssistantMessage,
    Messages,
    ModelId,
    ModelInteraction,
    ModelParams,
    StopReason,
    Stream,
    UsageReport,
)
from ._http import (
    Endpoint,
    HttpOptions,
    SseEvent,
    Timer,
    astream_events,
    error_items,
    resolve_endpoint,
    stream_events,
)
from ._wire_clock import ChunkClock
from .base import BaseModel, ModelDescriptor, ModelStream

__all__ = [
    "ProviderHost",
    "endpoint_options",
    "LOCAL_HOSTS",
    "HttpBackend",
    "SnapshotHttpModel",
    "SnapshotParser",
    "describe",
    "keep",
    "price_key",
]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})
"""Loopback host names: a server there is local (no prices; emulated forced tool calls)."""

PriceKey = tuple[str | None, str | None]
"""(genai-prices provider id, API URL): exactly one of the two is set."""

_NEXT = Stream.Next
_EMPTY_USAGE = UsageReport()


def price_key(base_url: str, provider_id: str, *, official: bool) -> PriceKey | None:
    """How genai-prices finds this model's prices: by provider id for the provider's own host
    (``official``), by API URL for another host, not at all for a loopback server (local models
    cost nothing we can price)."""
    if official:
        return (provider_id, None)
    if (urlsplit(base_url).hostname or "") in LOCAL_HOSTS:
        return None
    return (None, base_url)


def describe(
    model: str,
    provider: str,
    key: PriceKey | None,
    *,
    context_window: int | None,
    max_output_tokens: int | None,
) -> ModelDescriptor:
    """The descriptor of ``model``: token limits as given, prices (USD per million tokens) from
    genai-prices looked up by ``key`` (none when ``key`` is None or the model is unknown)."""
    prices = model_prices(model, provider_id=key[0], api_url=key[1]) if key else None
    return ModelDescriptor(
        name=model,
        provider=provider,
        context_window=context_window,
        max_output_tokens=max_output_tokens,
        input_price=prices.input if prices else None,
        output_price=prices.output if prices else None,
        cache_read_price=prices.cache_read if prices else None,
        cache_write_price=prices.cache_write if prices else None,
    )


def keep(got: dict[str, Messages], items: list[ModelStream]) -> None:
    """Snapshot assembly: the last chunk of each output id wins, outputs in first-seen order."""
    for item in items:
        if type(item) is _NEXT:
            msg = item.value
            got[msg.id] = msg


class HttpBackend(BaseModel):
    """A backend talking HTTP through ``options``: ``close`` and a ``repr`` without the key."""

    options: HttpOptions

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.descriptor.name!r}, options={self.options!r})"

    def close(self) -> None:
        """Close the HTTP clients this backend created (a user-supplied client is left open;
        async clients are closed by :meth:`aclose`)."""
        self.options.close()

    async def aclose(self) -> None:
        """Close the HTTP clients this backend created, the async ones of the running event
        loop included, with their kept-alive connections (a user-supplied client is left
        open). The backend stays usable: the next request opens new clients."""
        await self.options.aclose()


class SnapshotParser:
    """Base of the pure SSE-event parsers of the snapshot backends (Anthropic Messages, OpenAI
    Responses): the model id, the provider named in every chunk (``default_provider`` unless
    given), the time-to-first-token ``timer``, the cumulative ``usage`` (priced by
    ``price_key``: genai-prices provider id, API URL) and the building of one chunk. A subclass
    sets up its own state in ``_init_state`` and gives ``feed`` / ``finish`` / ``flush``.
    The chunks' timestamps come from the parser's ``clock`` (:class:`~._wire_clock.ChunkClock`)."""

    default_provider: ClassVar[str]

    def __init__(
        self,
        model: ModelId,
        *,
        provider: str | None = None,
        timer: Timer | None = None,
        price_key: PriceKey | None = None,
    ) -> None:
        self.model = model
        self.price_key = price_key
        self.provider = provider if provider is not None else self.default_provider
        self.timer = timer if timer is not None else Timer()
        self.usage = _EMPTY_USAGE
        self.finished = False
        self.clock = ChunkClock()
        self._init_state()

    def _init_state(self) -> None:
        """Set up the subclass's own parsing state (called last by ``__init__``)."""

    def flush(self) -> list[ModelStream]:
        """The outputs held back so far (e.g. a tool call not yet emitted), for the error tail."""
        raise NotImplementedError

    def _next(
        self,
        mid: str,
        content: Any,
        stop: Any = StopReason.STOP,
        meta: list[Any] | None = None,
        signature: str | None = None,
    ) -> ModelStream:
        """One chunk: output ``mid`` holding ``content`` with the usage so far."""
        return Stream.Next(
            AssistantMessage(
                id=mid,
                model=self.model,
                content=content,
                usage=self.usage,
                stop_reason=stop,
                provider=self.provider,
                metadata=meta,
                signature=signature,
                timestamp=self.clock.now(),
            )
        )


class SnapshotHttpModel(HttpBackend):
    """``stream`` / ``astream`` / ``generate`` / ``agenerate`` over SSE events for a snapshot
    backend. A subclass sets ``url`` and ``error_provider`` and gives ``request_body``,
    ``_headers``, ``_parser``, ``_feed`` (one event -> items, raising
    :class:`~foundation_ai.errors.ProviderError` on bad data) and ``_tail`` (the items at the
    end of the stream, raising ``ProviderError`` when it was cut short)."""

    url: str
    error_provider: ClassVar[str]
    """The provider named in the error tail (``ModelProviders.*``)."""

    def request_body(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def wire_body(self, interaction: ModelInteraction, params: ModelParams) -> bytes | dict[str, Any]:
        """The body actually sent: :meth:`request_body` by default; a subclass may return the
        same JSON already encoded (bytes), e.g. from a per-session cache of the history."""
        return self.request_body(interaction, params)

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _parser(self) -> SnapshotParser:
        raise NotImplementedError

    def _feed(self, parser: Any, ev: SseEvent) -> list[ModelStream]:
        raise NotImplementedError

    def _tail(self, parser: Any, params: ModelParams) -> list[ModelStream]:
        raise NotImplementedError

    def _failure(self, parser: SnapshotParser, exc: ProviderError) -> list[ModelStream]:
        """Held-back outputs, then the contract's error tail (the key redacted from the text)."""
        detail = self.options.redact(exc.detail)
        return [*parser.flush(), *error_items(detail, self.model_id, self.error_provider, parser.usage)]

    def _batches(
        self, interaction: ModelInteraction, params: ModelParams | None
    ) -> Generator[list[ModelStream], None, None]:
        """The stream in batches: ``[Init]``, the items of each SSE event, then the tail (the
        end of the stream, or held-back outputs and the error tail on a ``ProviderError``)."""
        p = params or ModelParams()
        body = self.wire_body(interaction, p)
        parser = self._parser()
        yield [Stream.Init()]
        try:
            for ev in stream_events(self.options, self.url, body, self._headers()):
                yield self._feed(parser, ev)
            tail = self._tail(parser, p)
        except ProviderError as exc:
            tail = self._failure(parser, exc)
        yield tail

    async def _abatches(
        self, interaction: ModelInteraction, params: ModelParams | None
    ) -> AsyncGenerator[list[ModelStream], None]:
        """Async :meth:`_batches`."""
        p = params or ModelParams()
        body = self.wire_body(interaction, p)
        parser = self._parser()
        yield [Stream.Init()]
        try:
            async for ev in astream_events(self.options, self.url, body, self._headers()):
                yield self._feed(parser, ev)
            tail = self._tail(parser, p)
        except ProviderError as exc:
            tail = self._failure(parser, exc)
        yield tail

    def stream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> Iterator[ModelStream]:
        """Stream the answer synchronously (no worker thread: the sync httpx client is used)."""
        with closing(self._batches(interaction, params)) as batches:
            for batch in batches:
                yield from batch

    async def astream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> AsyncIterator[ModelStream]:
        """Stream the answer asynchronously; closing the iterator closes the HTTP response."""
        async with aclosing(self._abatches(interaction, params)) as batches:
            async for batch in batches:
                for item in batch:
                    yield item

    def generate(self, interaction: ModelInteraction, params: ModelParams | None = None) -> list[Messages]:
        """The assembled answer: exactly :func:`~foundation_ai.backends.base.assemble` of
        ``stream`` (one message per output, its last chunk), the events' items folded in as
        they come (the loop of :meth:`_batches` without its generator)."""
        p = params or ModelParams()
        body = self.wire_body(interaction, p)
        parser = self._parser()
        feed = self._feed
        got: dict[str, Messages] = {}
        try:
            events = stream_events(self.options, self.url, body, self._headers())
            with closing(cast(Generator[SseEvent, None, None], events)) as evs:
                for ev in evs:
                    for item in feed(parser, ev):  # keep(got, ...), inlined: once per event
                        if type(item) is _NEXT:
                            got[item.value.id] = item.value
            tail = self._tail(parser, p)
        except ProviderError as exc:
            tail = self._failure(parser, exc)
        keep(got, tail)
        return list(got.values())

    async def agenerate(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> list[Messages]:
        """Async :meth:`generate`."""
        p = params or ModelParams()
        body = self.wire_body(interaction, p)
        parser = self._parser()
        feed = self._feed
        got: dict[str, Messages] = {}
        try:
            events = astream_events(self.options, self.url, body, self._headers())
            async with aclosing(cast(AsyncGenerator[SseEvent, None], events)) as evs:
                async for ev in evs:
                    for item in feed(parser, ev):  # keep(got, ...), inlined: once per event
                        if type(item) is _NEXT:
                            got[item.value.id] = item.value
            tail = self._tail(parser, p)
        except ProviderError as exc:
            tail = self._failure(parser, exc)
        keep(got, tail)
        return list(got.values())


class ProviderHost(NamedTuple):
    """Where a provider's HTTP backend goes by default and which environment variables name its
    key and base URL (``docs/models.md``, the key rule)."""

    key_env: str
    base_env: str
    default_base_url: str


def endpoint_options(
    host: ProviderHost,
    *,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    max_retries: int,
    headers: Mapping[str, str] | None,
    http_client: Any,
    retry_base_delay: float,
    max_retry_delay: float,
    deadline: float | None,
    first_byte_timeout: float | None,
    max_connections: int | None,
) -> tuple[Endpoint, HttpOptions]:
    """The endpoint (base URL and key, :func:`~._http.resolve_endpoint`) and the
    :class:`~._http.HttpOptions` of one HTTP backend: the plumbing the factories ``openai_chat``,
    ``openai_responses`` and ``anthropic`` share (their arguments of these names, in seconds).

    Raises:
        ConfigurationError: the provider's own host and no key; ``max_connections`` not a
            positive integer or ``None``; ``http_client`` of another type.
    """
    ep = resolve_endpoint(
        api_key=api_key,
        base_url=base_url,
        key_env=host.key_env,
        base_env=host.base_env,
        default_base_url=host.default_base_url,
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
        max_connections=max_connections,
    )
    return ep, options
