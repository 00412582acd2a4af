"""OpenAI Chat Completions, and every OpenAI-compatible server by ``base_url``.

This module holds the factory, :class:`OpenAIChatModel` and its per-session :class:`WireCache`; the
request mapping lives in ``_openai_chat_request.py``, the stream mapping in ``_openai_chat_stream.py``
(the same shape as ``_anthropic*.py`` and ``_openai_responses.py`` / ``_responses_*.py``); HTTP, retries
and error text in ``_http/``, history sanitation in ``_sanitize.py``, the prefix cache in ``_wire_cache.py``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping
from contextlib import aclosing, closing
from typing import Any, Literal, cast
from urllib.parse import urlsplit

import httpx2
import msgspec

from ..types import (
    Messages,
    ModelId,
    ModelInteraction,
    ModelParams,
    ModelProviders,
    Stream,
    ToolChoice,
)
from ._common import LOCAL_HOSTS, HttpBackend, ProviderHost, describe, endpoint_options, keep, price_key
from ._http import (
    DEFAULT_DEADLINE,
    DEFAULT_FIRST_BYTE_TIMEOUT,
    MAX_CONNECTIONS,
    HttpOptions,
    HttpStreamError,
    SseEvent,
    WireError,
    astream_events,
    stream_events,
)
from ._openai_chat_request import (
    _boundary,
    build_messages,
    build_request,
    forced_call_schema,
    pair_tool_messages,
    wire_messages,
)
from ._openai_chat_stream import ChatStreamParser
from ._sanitize import OPENAI_CHAT, mergeable_users, sanitize_history
from ._wire_cache import Prefix, PrefixCache
from .base import ModelStream

__all__ = ["OpenAIChatModel", "WireCache", "openai_chat"]

_NEXT = Stream.Next


OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENAI_HOST = ProviderHost("OPENAI_API_KEY", "OPENAI_BASE_URL", OPENAI_BASE_URL)
"""The key and base-URL variables of this backend (``docs/models.md``, the key rule)."""


def openai_chat(
    model: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 600.0,
    max_retries: int = 2,
    headers: Mapping[str, str] | None = None,
    http_client: httpx2.Client | httpx2.AsyncClient | tuple[Any, ...] | None = None,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    extra_body: Mapping[str, Any] | None = None,
    retry_base_delay: float = 0.5,
    max_retry_delay: float = 60.0,
    streaming: bool = True,
    forced_tool_mode: Literal["auto", "native", "json_schema"] = "auto",
    tool_call_content: Literal[""] | None = None,
    deadline: float | None = DEFAULT_DEADLINE,
    first_byte_timeout: float | None = DEFAULT_FIRST_BYTE_TIMEOUT,
    max_connections: int | None = MAX_CONNECTIONS,
) -> OpenAIChatModel:
    """A Chat Completions backend for ``model`` (the name sent as ``"model"``).

    Args:
        api_key: the key. Default: ``OPENAI_API_KEY``, sent only to OpenAI's own host or to the
            host named by ``OPENAI_BASE_URL`` (the key rule of ``docs/models.md``).
        base_url: another OpenAI-compatible server, with or without ``/v1``; default
            ``OPENAI_BASE_URL`` from the environment, else ``https://api.openai.com/v1``.
        timeout: seconds per connect/read/write. max_retries: retries on 429/5xx/connection
            errors before output (``Retry-After`` honoured).
        headers: extra headers on every request (e.g. OpenRouter's ``HTTP-Referer``, Azure's
            ``api-key``); values of credential-like headers are masked in reprs and errors.
        http_client: an ``httpx2.Client``, ``httpx2.AsyncClient`` or a tuple of both, used as given
            (proxies, test transports) and never closed here. A single client serves both
            paths: with only an ``httpx2.Client``, ``astream``/``agenerate`` run its blocking
            calls in worker threads; with only an ``httpx2.AsyncClient``, ``stream``/``generate``
            drive it on a private event loop in a worker thread (pass a tuple of both for native
            I/O on each path). Without one the backend owns its clients.
        context_window / max_output_tokens: tokens, for the descriptor.
        extra_body: fields merged into every request body (e.g. ``{"top_k": 20}`` for vLLM).
        retry_base_delay: seconds of the first backoff step (doubling, with jitter).
        max_retry_delay: cap in seconds on any single wait between retries; a ``Retry-After``
            asking for longer ends the retries at once (the 429 is returned, a fallback model
            can take over).
        streaming: ``False`` sends ``stream: false`` and reads the whole ``chat.completion``
            answer (for servers whose streaming is broken); the items are the same shape.
        forced_tool_mode: how a forced call (``ToolChoice.Required`` / ``Function``) is asked
            for. ``"native"``: ``tools`` + ``tool_choice``. ``"json_schema"``: no ``tools``; a
            ``response_format`` JSON Schema ``{"name", "arguments"}`` built from the tool
            schemas (grammar-enforced by llama.cpp, vLLM, LM Studio, Ollama) plus an instruction,
            and the answer is parsed into one ``ToolCall`` with a generated id. ``"auto"``:
            ``json_schema`` for a loopback server (llama-server does not enforce
            ``tool_choice`` for models whose template lacks tool support), else ``native``.
        deadline: seconds the whole request may take, retries and the streamed answer included
            (default 900; ``None``: none). A server trickling bytes cannot hold a call longer.
        first_byte_timeout: seconds each attempt may wait for the response to start (default
            300; ``None``: none); an attempt that times out is retried while time is left.
        max_connections: requests of this backend's own async clients in flight at once
            (default 1,000; ``None``: no limit); more wait their turn, the wait counting toward
            ``first_byte_timeout``. Shared by every backend with the same ``timeout`` and
            ``max_connections`` on an event loop (``docs/scaling.md``, "Many sessions in one
            process"); a client given as ``http_client`` keeps its own limits.
        tool_call_content: the ``content`` of a replayed assistant message that holds only
            tool calls: ``None`` sends JSON ``null`` (the default, what OpenAI documents);
            ``""`` for servers that reject ``null`` there (``docs/sanitation.md``).

    Raises:
        ConfigurationError: OpenAI's host and no key in the argument or ``OPENAI_API_KEY``; ``max_connections`` not a positive
            integer or ``None``.
    """
    ep, opts = endpoint_options(
        OPENAI_HOST,
        api_key=api_key,
        base_url=base_url,
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
    return OpenAIChatModel(
        model,
        opts,
        official=ep.official,
        context_window=context_window,
        max_output_tokens=max_output_tokens,
        extra_body=extra_body,
        streaming=streaming,
        forced_tool_mode=forced_tool_mode,
        tool_call_content=tool_call_content,
    )


def origin_of(base_url: str) -> str:
    """The server a base URL names, as kept in ``Messages.Assistant.origin``: its host, with
    the port when one is given (``"openrouter.ai"``, ``"127.0.0.1:8080"``); no credentials."""
    try:
        parts = urlsplit(base_url)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:  # a netloc urllib cannot split (e.g. a password holding "/"): the host part
        return base_url.partition("://")[2].rpartition("@")[2].split("/")[0].lower()
    return f"{host}:{port}" if port else host


def _endpoint(base_url: str) -> str:
    base = base_url.rstrip("/")
    if urlsplit(base).path in ("", "/"):
        base += "/v1"
    return base + "/chat/completions"


class OpenAIChatModel(HttpBackend):
    """The Chat Completions backend (see the module docstring). Build with :func:`openai_chat`.

    ``stream`` (sync, native ``httpx2.Client``) and ``astream`` (native ``httpx2.AsyncClient``)
    share one parser; ``generate`` is :func:`~foundation_ai.backends.base.assemble` of
    ``stream``. ``repr`` never shows the key.
    """

    chunk_mode = "snapshot"

    def __init__(
        self,
        model: str,
        options: HttpOptions,
        *,
        official: bool,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        streaming: bool = True,
        forced_tool_mode: Literal["auto", "native", "json_schema"] = "auto",
        tool_call_content: str | None = None,
    ) -> None:
        self.options = options
        self.tool_call_content = tool_call_content
        self.streaming = streaming
        self.official = official
        self.url = _endpoint(options.base_url)
        self.extra_body = dict(extra_body or {})
        host = urlsplit(options.base_url).hostname or ""
        self._price_key = price_key(options.base_url, "openai", official=official)
        self.descriptor = describe(
            model,
            ModelProviders.OpenAI,
            self._price_key,
            context_window=context_window,
            max_output_tokens=max_output_tokens,
        )
        self._model_id = ModelId.Name(model)
        self.origin = origin_of(options.base_url)
        self._wire_cache = WireCache()
        if forced_tool_mode == "auto":
            self.emulate_forced_tools = host in LOCAL_HOSTS
        else:
            self.emulate_forced_tools = forced_tool_mode == "json_schema"

    def _headers(self) -> dict[str, str]:
        """The auth header, built per request so no attribute holds the key in clear."""
        return {"Authorization": f"Bearer {self.options.api_key}"} if self.options.api_key else {}

    @property
    def model_id(self) -> ModelId:
        return self._model_id

    def _emulating(self, interaction: ModelInteraction) -> bool:
        return self.emulate_forced_tools and forced_call_schema(interaction) is not None

    def _body(self, interaction: ModelInteraction, params: ModelParams | None) -> bytes:
        body = build_request(
            interaction,
            params or ModelParams(),
            self.descriptor.name,
            official=self.official,
            stream=self.streaming,
            emulate_forced_tools=self.emulate_forced_tools,
            tool_call_content=self.tool_call_content,
            origin=self.origin,
            wire_cache=self._wire_cache,
        )
        if self.extra_body:
            body.update(self.extra_body)
        return msgspec.json.encode(body)

    def _parser(self, interaction: ModelInteraction) -> ChatStreamParser:
        names = tuple(f.name for f in interaction.tools_shed.functions())
        emulated = self._emulating(interaction)
        choice = interaction.tool_choice
        if emulated and isinstance(choice, ToolChoice.Function):
            names = (choice.name,)
        return ChatStreamParser(
            self._model_id, self._price_key, names, emulated_call=emulated, origin=self.origin
        )

    def stream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> Iterator[ModelStream]:
        """Stream the answer (see ``base.py`` for the item order) through the sync HTTP path
        (a user's ``httpx2.AsyncClient`` alone is driven from a worker thread, see ``_http``)."""
        body = self._body(interaction, params)
        p = self._parser(interaction)
        yield Stream.Init()
        p.timer.start()
        try:
            # after [DONE] the rest of the body is read (bounded) so the connection is reused
            for ev in stream_events(self.options, self.url, body, self._headers(), final="[DONE]"):
                out = p.feed(ev)
                if out:
                    yield from out
                if p.done:
                    break
            yield from p.finish()
        except (HttpStreamError, WireError) as exc:
            yield from p.fail(self.options.redact(exc.detail))

    async def astream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> AsyncIterator[ModelStream]:
        """Stream the answer through the async HTTP path (a user's ``httpx2.Client`` alone runs
        in worker threads, see ``_http``); closing the iterator cancels."""
        body = self._body(interaction, params)
        p = self._parser(interaction)
        yield Stream.Init()
        p.timer.start()
        try:
            # after [DONE] the rest of the body is read (bounded) so the connection is reused
            async for ev in astream_events(self.options, self.url, body, self._headers(), final="[DONE]"):
                out = p.feed(ev)
                if out:
                    for item in out:
                        yield item
            for item in p.finish():
                yield item
        except (HttpStreamError, WireError) as exc:
            for item in p.fail(self.options.redact(exc.detail)):
                yield item

    def generate(self, interaction: ModelInteraction, params: ModelParams | None = None) -> list[Messages]:
        """The assembled answer: exactly :func:`~foundation_ai.backends.base.assemble` of
        :meth:`stream` (one message per output, its last chunk), the chunks folded in as the
        events arrive instead of each passing through the stream's generator."""
        body = self._body(interaction, params)
        p = self._parser(interaction)
        got: dict[str, Messages] = {}
        p.timer.start()
        try:
            events = stream_events(self.options, self.url, body, self._headers(), final="[DONE]")
            with closing(cast(Generator[SseEvent, None, None], events)) as evs:
                for ev in evs:
                    out = p.feed(ev)
                    if out:  # keep(got, out), inlined: once per event
                        for item in out:
                            if type(item) is _NEXT:
                                got[item.value.id] = item.value
                    if p.done:
                        break
            tail = p.finish()
        except (HttpStreamError, WireError) as exc:
            tail = p.fail(self.options.redact(exc.detail))
        keep(got, tail)
        return list(got.values())

    async def agenerate(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> list[Messages]:
        """Async :meth:`generate` (:func:`~foundation_ai.backends.base.assemble` of
        :meth:`astream`), keeping only each output's last chunk, not every chunk."""
        body = self._body(interaction, params)
        p = self._parser(interaction)
        got: dict[str, Messages] = {}
        p.timer.start()
        try:
            events = astream_events(self.options, self.url, body, self._headers(), final="[DONE]")
            async with aclosing(cast(AsyncGenerator[SseEvent, None], events)) as evs:
                async for ev in evs:
                    out = p.feed(ev)
                    if out:  # keep(got, out), inlined: once per event
                        for item in out:
                            if type(item) is _NEXT:
                                got[item.value.id] = item.value
            tail = p.finish()
        except (HttpStreamError, WireError) as exc:
            tail = p.fail(self.options.redact(exc.detail))
        keep(got, tail)
        return list(got.values())


class WireCache:
    """The encoded wire messages of each session's history, so a request encodes only the
    messages it has not sent before (the history is append-only and messages are immutable;
    the shared machinery is :class:`~foundation_ai.backends._wire_cache.PrefixCache`).

    Keyed by the first message's id, the ``origin`` and ``tool_call_content`` (the only inputs
    of the mapping besides the messages); a prefix is reused when the new history starts with
    the same message objects (or equal ones). Up to ``size`` sessions are kept (least recently
    used dropped). The output is byte for byte :func:`build_messages` (tested in
    ``tests/test_history_cost.py``). Thread-safe.
    """

    def __init__(self, size: int = 64) -> None:
        self._cache: PrefixCache[Prefix] = PrefixCache(size)

    @property
    def size(self) -> int:
        """The most sessions kept."""
        return self._cache.size

    def messages(
        self,
        interaction: ModelInteraction,
        *,
        tool_call_content: str | None = None,
        origin: str | None = None,
    ) -> list[Any]:
        """:func:`build_messages` of ``interaction``, the cached prefix as ``msgspec.Raw``
        items (encode the body with ``msgspec.json.encode``)."""
        history = interaction.messages
        out: list[Any] = []
        system = interaction.full_system_prompt()
        if system:
            out.append({"role": "system", "content": system})
        if not history:
            return out
        key = (history[0].id, origin, tool_call_content)
        entry = self._cache.take(key, history) or Prefix(OPENAI_CHAT.id_max)
        start = len(entry.messages)
        if 0 < start < len(history) and mergeable_users(history[start - 1], history[start]):
            # the prefix ends on a user message the next one joins (text and an image)
            entry, start = Prefix(OPENAI_CHAT.id_max), 0
        cut = _boundary(history, start)
        if cut > start:
            ids = entry.ids.child()
            sources: list[int] = []
            fresh = wire_messages(
                sanitize_history(history[start:cut], OPENAI_CHAT, ids=ids, sources=sources),
                tool_call_content=tool_call_content,
                origin=origin,
                sources=sources,
            )
            last = next((w for w in reversed(fresh) if w["role"] == "assistant"), None)
            if last is not None and "tool_calls" in last:  # calls still being paired
                self._cache.keep(key, entry)
                out.extend(
                    build_messages(interaction, tool_call_content=tool_call_content, origin=origin)[
                        len(out) :
                    ]
                )
                return out
            ids.commit()
            entry.extend_messages(history, cut)
            entry.extend_wire(pair_tool_messages(fresh))
        sources = []
        tail = wire_messages(
            sanitize_history(history[cut:], OPENAI_CHAT, ids=entry.ids.child(), sources=sources),
            tool_call_content=tool_call_content,
            origin=origin,
            sources=sources,
        )
        out.extend(entry.wire)
        out.extend(pair_tool_messages(tail))
        self._cache.keep(key, entry)
        return out
