"""The Anthropic Messages API backend: :func:`anthropic` and :class:`AnthropicModel`.

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version`` headers, streamed
over SSE (or, with ``streaming=False``, one JSON response turned into the same items). The
request mapping lives in ``_anthropic_request.py``, the stream mapping in
``_anthropic_stream.py``; HTTP, retries and error text in ``_http/``. Sources: Anthropic
Messages API reference, https://docs.anthropic.com/en/api/messages, docs/concepts.md: Messages, Requests, parameters and usage, The stream contract.

Usage::

    from foundation_ai.backends import anthropic
    model = anthropic("claude-sonnet-4-5", context_window=200_000)   # key from ANTHROPIC_API_KEY
    for item in model.stream(ModelInteraction(messages=[Messages.user("Hi")])):
        ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx2
import msgspec

from ..errors import ProviderError
from ..types import (
    AssistantMessage,
    ImageContent,
    ModelInteraction,
    ModelParams,
    ModelProviders,
    StopReason,
    Stream,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._anthropic_request import (
    ANTHROPIC_VERSION,
    build_request,
    check_output_format,
    merge_turns,
    missing_results,
    pair_step,
    strip_prefill,
    wire_messages,
)
from ._anthropic_stream import AnthropicStreamParser, parse_message
from ._common import ProviderHost, SnapshotHttpModel, describe, endpoint_options, price_key
from ._http import (
    DEFAULT_DEADLINE,
    DEFAULT_FIRST_BYTE_TIMEOUT,
    MAX_CONNECTIONS,
    HttpOptions,
    SseEvent,
    Timer,
    error_items,
    join_url,
)
from ._sanitize import ANTHROPIC, anthropic_accepts_thinking, sanitize_history
from ._wire_cache import Prefix, PrefixCache
from ._wire_text import decode_event
from .base import ModelDescriptor, ModelStream

__all__ = ["DEFAULT_BASE_URL", "AnthropicModel", "AnthropicWireCache", "anthropic"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
"""Anthropic's API host; the backend adds ``/v1/messages``."""
ANTHROPIC_HOST = ProviderHost("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", DEFAULT_BASE_URL)
"""The key and base-URL variables of this backend (``docs/models.md``, the key rule)."""

_DECODE = decode_event  # msgspec, tolerating half a surrogate pair per event (see _wire_text)


class _Closed(Prefix):
    """A cached prefix that ends where a wire message ends for good (the next message of the
    history surely starts a message of the other role), with the role of its last wire
    message and the ``tool_use`` ids that message left for the next one to answer."""

    __slots__ = ("expected", "role")

    def __init__(self) -> None:
        super().__init__(ANTHROPIC.id_max)
        self.expected: list[str] = []
        self.role: str | None = None

    def continues(self, history: list[Any]) -> bool:
        """Whether ``history`` (which starts with this prefix's messages) goes on with a message
        that surely starts a wire message of the other role, so the prefix's messages are final
        (a history cut back to the prefix, or going on with the same role, is not)."""
        k = len(self.messages)
        if k == 0:
            return True
        role = _sure_role(history[k]) if len(history) > k else None
        return role is not None and role != self.role


def _sure_role(m: Any) -> str | None:
    """The wire role of a message that sends something whatever its sanitation (a tool result,
    a call, non-blank text or an image from the user), else ``None``."""
    if isinstance(m, ToolResultMessage):
        return "user"
    if isinstance(m, AssistantMessage):
        c = m.content
        if isinstance(m.stop_reason, StopReason.Error):
            return None
        if isinstance(c, ToolCall) or (isinstance(c, TextContent) and c.content.strip()):
            return "assistant"
        return None
    if isinstance(m, UserMessage):
        u = m.content
        if isinstance(u, ImageContent) or u.content.strip():
            return "user"
    return None


def _open_start(history: list[Any], start: int) -> int:
    """Where the history's open wire message surely starts, looking back to ``start``: the last
    message that sends something under another role than the message before it (the wire
    messages before it are final); ``start`` when there is none after it."""
    for i in range(len(history) - 1, start, -1):
        role = _sure_role(history[i])
        if role is not None:
            before = _sure_role(history[i - 1])
            if before is not None and before != role:
                return i
    return start


class AnthropicWireCache:
    """The Messages ``messages`` array of each session's history, the part that cannot change
    any more kept encoded (``msgspec.Raw``), so a request maps and encodes only the history's
    last wire message and what was added since (see ``backends/_wire_cache.py``).

    A wire message is final once the history holds a later message surely sent under the other
    role (adjacent same-role messages merge; tool results are paired against the assistant
    message before them only); the last wire message is remapped on every request (results paired,
    trailing whitespace of a prefill stripped; ``cache_control`` is then set on a copy by
    :func:`~foundation_ai.backends._anthropic_request.build_request`). Keyed by the first
    message's id and ``keep_thinking``; up to ``size`` sessions kept. The output encodes to
    the bytes of :func:`~foundation_ai.backends._anthropic_request.wire_messages`
    (``tests/test_history_cache.py``). Thread-safe.
    """

    def __init__(self, size: int = 64) -> None:
        self._cache: PrefixCache[_Closed] = PrefixCache(size)

    def messages(self, history: list[Any], *, keep_thinking: bool = True) -> list[Any]:
        """:func:`~foundation_ai.backends._anthropic_request.wire_messages` of ``history``,
        the part sent before as ``msgspec.Raw`` items (the last item, if any, is a dict)."""
        if not history:
            return wire_messages(history, keep_thinking=keep_thinking)
        key = (history[0].id, keep_thinking)
        entry = self._cache.take(key, history)
        if entry is None or not entry.continues(history):
            entry = _Closed()
        cut = _open_start(history, len(entry.messages))
        start = len(entry.messages)
        if cut > start:
            closed = merge_turns(
                sanitize_history(history[start:cut], ANTHROPIC, keep_thinking=keep_thinking, ids=entry.ids)
            )
            for msg in closed:
                sent, entry.expected = pair_step(msg, entry.expected)
                entry.extend_wire(sent)
                entry.role = sent[-1]["role"]
            entry.extend_messages(history, cut)
        tail: list[dict[str, Any]] = []
        expected = entry.expected
        open_history = sanitize_history(
            history[cut:], ANTHROPIC, keep_thinking=keep_thinking, ids=entry.ids.child()
        )
        for msg in merge_turns(open_history):
            sent, expected = pair_step(msg, expected)
            tail += sent
        if expected:
            tail.append({"role": "user", "content": missing_results(expected, {})})
        out: list[Any] = [*entry.wire, *strip_prefill(tail)]
        self._cache.keep(key, entry)
        return out


class AnthropicModel(SnapshotHttpModel):
    """A model served by the Anthropic Messages API (or a server speaking it, such as
    llama.cpp's ``/v1/messages``). ``chunk_mode`` is ``"snapshot"``.

    Build it with :func:`anthropic`. ``stream`` and ``astream`` never raise for provider or
    network failures: those end the stream with an error message (backends/base.py, rule 4).
    """

    chunk_mode = "snapshot"
    error_provider = ModelProviders.Anthropic

    def __init__(
        self,
        descriptor: ModelDescriptor,
        options: HttpOptions,
        *,
        anthropic_version: str = ANTHROPIC_VERSION,
        streaming: bool = True,
        price_key: tuple[str | None, str | None] | None = None,
    ) -> None:
        self.descriptor = descriptor
        self.price_key = price_key
        self.options = options
        self.anthropic_version = anthropic_version
        self.streaming = streaming
        self.url = join_url(options.base_url, "/messages", version_prefix="/v1")
        self._wire_cache: AnthropicWireCache | None = AnthropicWireCache()

    def _parser(self) -> AnthropicStreamParser:
        return AnthropicStreamParser(self.model_id, timer=Timer(), price_key=self.price_key)

    def _headers(self) -> dict[str, str]:
        h = {"anthropic-version": self.anthropic_version}
        if self.options.api_key:
            h["x-api-key"] = self.options.api_key
        return h

    def request_body(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> dict[str, Any]:
        """The JSON body this model would send for ``interaction`` (for inspection and tests)."""
        return build_request(
            interaction, params or ModelParams(), self.descriptor.name, stream=self.streaming
        )

    def wire_body(self, interaction: ModelInteraction, params: ModelParams) -> bytes | dict[str, Any]:
        """:meth:`request_body` encoded, the history's part sent before taken from the
        per-session cache (:class:`AnthropicWireCache`): the same bytes."""
        if self._wire_cache is None:
            return self.request_body(interaction, params)
        name = self.descriptor.name
        messages = self._wire_cache.messages(
            interaction.messages, keep_thinking=anthropic_accepts_thinking(name)
        )
        body = build_request(interaction, params, name, stream=self.streaming, messages=messages)
        return msgspec.json.encode(body)

    def _feed(self, parser: AnthropicStreamParser, ev: SseEvent) -> list[ModelStream]:
        if ev.event == "json":  # one JSON document: no time to first token to measure
            try:
                doc = _DECODE(ev.data)
            except msgspec.DecodeError as exc:
                raise ProviderError(f"malformed JSON response: {exc}") from None
            items = parse_message(
                doc, parser.model, provider=parser.provider, timer=parser.timer, price_key=parser.price_key
            )
            nexts: list[Any] = [it for it in items if isinstance(it, Stream.Next)]
            parser.finished = True
            parser.usage = nexts[-1].value.usage
            parser.stop_reason = nexts[-1].value.stop_reason
            parser.texts = [
                m.value.content.content for m in nexts if isinstance(m.value.content, TextContent)
            ]
            return nexts
        return parser.feed_data(ev.event, ev.data)

    def _tail(self, parser: AnthropicStreamParser, params: ModelParams) -> list[ModelStream]:
        items = parser.finish()
        if parser.stop_reason.is_refusal():  # a refusal is the answer: no JSON to check
            return items
        problem = check_output_format("".join(parser.texts), params.output_format)
        if problem is not None:
            return error_items(problem, self.model_id, ModelProviders.Anthropic, parser.usage)
        return items


def anthropic(
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
    anthropic_version: str = ANTHROPIC_VERSION,
    streaming: bool = True,
    retry_base_delay: float = 0.5,
    max_retry_delay: float = 60.0,
    deadline: float | None = DEFAULT_DEADLINE,
    first_byte_timeout: float | None = DEFAULT_FIRST_BYTE_TIMEOUT,
    max_connections: int | None = MAX_CONNECTIONS,
) -> AnthropicModel:
    """An Anthropic Messages API model.

    Args:
        model: the model name sent to the API, e.g. ``"claude-sonnet-4-5"``.
        api_key: the key. Default: ``ANTHROPIC_API_KEY``, sent only to Anthropic's own host or to
            the host named by ``ANTHROPIC_BASE_URL`` (the key rule of ``docs/models.md``).
            Required for Anthropic's host; optional for another server (e.g. llama.cpp).
        base_url: the API host, with or without ``/v1``; default ``ANTHROPIC_BASE_URL`` from the
            environment, else ``https://api.anthropic.com``.
        timeout: seconds for connect / read / write (an ``httpx`` timeout).
        max_retries: retries of 429 / 5xx / 529 / connection failures before any output,
            honouring ``Retry-After``; auth and request errors are never retried.
        headers: extra headers on every request (e.g. ``anthropic-beta``); values of
            credential-like headers (``*key*``, ``*token*``, ``*secret*``, ``Authorization``)
            are masked in reprs and error texts.
        http_client: an ``httpx2.Client``, ``httpx2.AsyncClient`` or a tuple of both, used as given
            (proxies, test transports) and never closed by the backend. A single client serves
            both paths: with only an ``httpx2.Client``, ``astream``/``agenerate`` run its blocking
            calls in worker threads; with only an ``httpx2.AsyncClient``, ``stream``/``generate``
            drive it on a private event loop in a worker thread (pass a tuple of both for native
            I/O on each path). Without one the backend owns its clients.
        context_window: tokens the model accepts, when known (for ``is_context_overflow``).
        max_output_tokens: the model's output cap in tokens, when known.
        anthropic_version: the ``anthropic-version`` header.
        streaming: ``False`` sends ``stream: false`` and maps the whole JSON response.
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
        ConfigurationError: no API key for the default Anthropic host; ``max_connections`` not a positive
            integer or ``None``.
    """
    ep, options = endpoint_options(
        ANTHROPIC_HOST,
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
    key = price_key(ep.base_url, "anthropic", official=ep.official)
    descriptor = describe(
        model,
        ModelProviders.Anthropic,
        key,
        context_window=context_window,
        max_output_tokens=max_output_tokens,
    )
    return AnthropicModel(
        descriptor, options, anthropic_version=anthropic_version, streaming=streaming, price_key=key
    )
