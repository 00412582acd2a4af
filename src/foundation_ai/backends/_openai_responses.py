"""The OpenAI Responses API backend: :func:`openai_responses` and :class:`OpenAIResponsesModel`.

``POST {base_url}/responses`` (the base given with or without ``/v1``) with
``Authorization: Bearer <key>``, streamed over SSE (or, with ``streaming=False``, one JSON
response turned into the same items). The request mapping lives in ``_responses_request.py``,
the stream mapping in ``_responses_stream.py``; HTTP, retries and error text in ``_http/``.
Sources: OpenAI Responses API reference, https://platform.openai.com/docs/api-reference/responses, docs/concepts.md: Messages, Requests, parameters and usage, The stream contract.

Usage::

    from foundation_ai.backends import openai_responses
    model = openai_responses("gpt-5-mini")            # key from OPENAI_API_KEY
    messages = model.generate(ModelInteraction(messages=[Messages.user("Hi")]))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx2
import msgspec

from ..errors import ProviderError
from ..types import ModelInteraction, ModelParams, ModelProviders, Stream, ThinkingLevel
from ._common import ProviderHost, SnapshotHttpModel, describe, endpoint_options, price_key
from ._http import (
    DEFAULT_DEADLINE,
    DEFAULT_FIRST_BYTE_TIMEOUT,
    MAX_CONNECTIONS,
    HttpOptions,
    SseEvent,
    Timer,
    join_url,
)
from ._responses_request import (
    MappedInput,
    Pairing,
    UserItem,
    accepts_reasoning,
    add_items,
    build_request,
    input_items,
    message_items,
    pair_outputs,
)
from ._responses_stream import ResponsesStreamParser, parse_response
from ._sanitize import OPENAI_RESPONSES, IdMapping, mergeable_users, sanitize_history
from ._wire_cache import Prefix, PrefixCache
from ._wire_text import decode_event
from .base import ModelDescriptor, ModelStream

__all__ = ["DEFAULT_BASE_URL", "OpenAIResponsesModel", "ResponsesWireCache", "openai_responses"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""OpenAI's API base; the backend adds ``/responses``."""
OPENAI_HOST = ProviderHost("OPENAI_API_KEY", "OPENAI_BASE_URL", DEFAULT_BASE_URL)
"""The key and base-URL variables of this backend (``docs/models.md``, the key rule)."""

_DECODE = decode_event  # msgspec, tolerating half a surrogate pair per event (see _wire_text)


class _Paired(Prefix):
    """A cached prefix whose calls all have their output (or a "not run" one): its
    :class:`~foundation_ai.backends._responses_request.Pairing` and whether it holds a
    reasoning item."""

    __slots__ = ("pairing", "reasoning")

    def __init__(self) -> None:
        super().__init__(OPENAI_RESPONSES.id_max)
        self.pairing = Pairing()
        self.reasoning = False


def _items_by_message(
    history: list[Any], start: int, ids: IdMapping, store: bool | None, keep: bool
) -> tuple[list[dict[str, Any]], list[int], IdMapping]:
    """The unpaired input items of ``history[start:]``, sanitized through a child of ``ids``
    (returned; ``ids`` is left unchanged), and for each message boundary from ``start`` on the
    number of items before it."""
    probe = ids.child()
    sources: list[int] = []
    sanitized = sanitize_history(
        history[start:], OPENAI_RESPONSES, keep_thinking=keep, ids=probe, sources=sources
    )
    items: list[dict[str, Any]] = []
    last: UserItem | None = None
    ends = [0]
    k = 0
    for j in range(len(history) - start):
        if k < len(sources) and sources[k] == j:  # a message sanitation dropped maps to nothing
            last = add_items(items, last, sanitized[k], message_items(sanitized[k], store, keep))
            k += 1
        else:
            last = None  # user messages join only where they were next to each other
        ends.append(len(items))
    return items, ends, probe


class ResponsesWireCache:
    """The Responses ``input`` array of each session's history, the part that cannot change any
    more kept encoded (``msgspec.Raw``), so a request maps and encodes only what follows it
    (see ``backends/_wire_cache.py``).

    A prefix is final where no function call in it waits for its output: every call is
    answered in it, or was given a "not run" output because a later item came first. Should a
    later message answer such a call after all, the whole history is mapped afresh. Keyed by the
    first message's id, ``store`` and whether reasoning is kept; up to ``size`` sessions kept.
    The output encodes to the bytes of
    :func:`~foundation_ai.backends._responses_request.input_items`
    (``tests/test_history_cache.py``). Thread-safe.
    """

    def __init__(self, size: int = 64) -> None:
        self._cache: PrefixCache[_Paired] = PrefixCache(size)

    def items(
        self, history: list[Any], *, store: bool | None = None, keep_reasoning: bool = True
    ) -> MappedInput:
        """:func:`~foundation_ai.backends._responses_request.input_items` of ``history``, the
        part sent before as ``msgspec.Raw`` items, with whether any item is reasoning."""
        if not history:
            items = input_items(history, store=store, keep_reasoning=keep_reasoning)
            return MappedInput(items, False)
        key = (history[0].id, store, keep_reasoning)
        entry = self._cache.take(key, history) or _Paired()
        start = len(entry.messages)
        if 0 < start < len(history) and mergeable_users(history[start - 1], history[start]):
            entry = _Paired()  # the prefix ends on a user message the next one joins
        fresh, ends, probe = _items_by_message(history, len(entry.messages), entry.ids, store, keep_reasoning)
        out, marks, conflict = pair_outputs(fresh, entry.pairing, into=entry.pairing)
        if conflict:  # a call of the prefix given a "not run" output is answered now
            entry = _Paired()
            fresh, ends, probe = _items_by_message(history, 0, entry.ids, store, keep_reasoning)
            out, marks, _ = pair_outputs(fresh, entry.pairing, into=entry.pairing)
        start = len(entry.messages)
        last = max(j for j, end in enumerate(ends) if marks[end] >= 0)  # ends[0] == 0 is final
        cut, done = start + last, marks[ends[last]]
        if cut > start:
            if cut == len(history):  # all of it is final: ids and calls are already in
                probe.commit()
            else:
                sanitize_history(
                    history[start:cut], OPENAI_RESPONSES, keep_thinking=keep_reasoning, ids=entry.ids
                )
                pair_outputs(fresh[: ends[last]], entry.pairing, into=entry.pairing)
            entry.extend_wire(out[:done])
            entry.reasoning = entry.reasoning or any(it["type"] == "reasoning" for it in out[:done])
            entry.extend_messages(history, cut)
        tail = out[done:]
        reasoning = entry.reasoning or any(it["type"] == "reasoning" for it in tail)
        mapped = MappedInput([*entry.wire, *tail], reasoning)
        self._cache.keep(key, entry)
        return mapped


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
        self._wire_cache: ResponsesWireCache | None = ResponsesWireCache()

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

    def wire_body(self, interaction: ModelInteraction, params: ModelParams) -> bytes | dict[str, Any]:
        """:meth:`request_body` encoded, the history's part sent before taken from the
        per-session cache (:class:`ResponsesWireCache`): the same bytes."""
        if self._wire_cache is None:
            return self.request_body(interaction, params)
        name = self.descriptor.name
        level = params.thinking_level
        keep = (level is not None and level is not ThinkingLevel.Off) or accepts_reasoning(name)
        mapped = self._wire_cache.items(interaction.messages, store=self.store, keep_reasoning=keep)
        body = build_request(
            interaction, params, name, stream=self.streaming, store=self.store, mapped=mapped
        )
        return msgspec.json.encode(body)

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
    http_client: httpx2.AsyncClient | httpx2.Client | tuple[Any, ...] | None = None,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    streaming: bool = True,
    store: bool | None = None,
    retry_base_delay: float = 0.5,
    max_retry_delay: float = 60.0,
    deadline: float | None = DEFAULT_DEADLINE,
    first_byte_timeout: float | None = DEFAULT_FIRST_BYTE_TIMEOUT,
    max_connections: int | None = MAX_CONNECTIONS,
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
        http_client: an ``httpx2.Client``, ``httpx2.AsyncClient`` or a tuple of both, used as given
            (proxies, test transports) and never closed by the backend. A single client serves
            both paths: with only an ``httpx2.Client``, ``astream``/``agenerate`` run its blocking
            calls in worker threads; with only an ``httpx2.AsyncClient``, ``stream``/``generate``
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
        max_connections: requests of this backend's own async clients in flight at once
            (default 1,000; ``None``: no limit); more wait their turn, the wait counting toward
            ``first_byte_timeout``. Shared by every backend with the same ``timeout`` and
            ``max_connections`` on an event loop (``docs/scaling.md``, "Many sessions in one
            process"); a client given as ``http_client`` keeps its own limits.
        retry_base_delay: seconds of the first backoff step.
        max_retry_delay: cap in seconds on any single wait between retries; a ``Retry-After``
            asking for longer ends the retries at once (the 429 is returned, a fallback model
            can take over).

    Raises:
        ConfigurationError: no API key for the default OpenAI base URL; ``max_connections`` not a positive
            integer or ``None``.
    """
    ep, options = endpoint_options(
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
    key = price_key(ep.base_url, "openai", official=ep.official)
    descriptor = describe(
        model,
        ModelProviders.OpenAIResponses,
        key,
        context_window=context_window,
        max_output_tokens=max_output_tokens,
    )
    return OpenAIResponsesModel(descriptor, options, streaming=streaming, store=store, price_key=key)
