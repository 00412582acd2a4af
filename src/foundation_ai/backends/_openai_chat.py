"""OpenAI Chat Completions, and every OpenAI-compatible server by ``base_url``.

``openai_chat("gpt-4o-mini")`` talks to ``https://api.openai.com/v1`` with ``OPENAI_API_KEY``;
``openai_chat("smollm2", base_url="http://127.0.0.1:8080")`` talks to llama-server (likewise
OpenRouter, Ollama, vLLM, LM Studio). A base URL with no path gets ``/v1`` appended; one with a
path (``.../v1``, ``https://openrouter.ai/api/v1``) is used as given. Only OpenAI's own host
requires a key. ``OPENAI_API_KEY`` is sent only to OpenAI's host or to the host the user paired
with it in ``OPENAI_BASE_URL``; another host gets a key only when passed explicitly, so an
OpenAI key is never sent to a third party (``docs/models.md``).

Request mapping (https://platform.openai.com/docs/api-reference/chat): the system prompt plus ``soul`` is the first ``system``
message; a ``Messages.User`` with role System is a ``system`` message, role Agent (or Tool, or a
custom role) a ``user`` message with ``name`` set to the role; the Assistant outputs of one turn
become ONE assistant message (text in ``content``, every call in ``tool_calls``, ``content:
null`` when tool-only; ``""`` with ``tool_call_content=""``), arguments re-sent as the
JSON text of the original object (``{}`` for arguments that never parsed); the history is
sanitized first (``docs/sanitation.md``: call ids of at most 40 characters, every call answered);
thinking is not replayed as text (Chat Completions has no field for it; signatures of other
providers are invalid here), but the continuation tokens a compatible server documents go back
to that same server only (``Messages.Assistant.origin``): a Gemini ``thought_signature`` on its
tool call, OpenRouter ``reasoning_details``, Gemini's message ``extra_content`` and, on a turn
that called tools, ``reasoning_content`` (docs/providers.md); tool results are ``role: tool`` messages; an image in a user message
is an ``image_url`` data URL; a tool result holding an image becomes a placeholder text in the
tool message and a user message with the image after the run of tool messages.

Forced tool calls: against a loopback server (llama-server, Ollama, LM Studio on 127.0.0.1) a
``ToolChoice.Required`` / ``Function`` is sent by default as a ``response_format`` JSON Schema
``{"name", "arguments"}`` (grammar-enforced) and the answer parsed into one ``ToolCall``,
because llama-server ignores ``tool_choice`` for models whose chat template has no tool support;
``forced_tool_mode="native"`` turns this off (see :func:`openai_chat`).

Stream mapping: snapshot chunks (the whole text so far) for text and reasoning (read under
every spelling servers use, :data:`REASONING_FIELDS`); tool calls assembled by ``index`` / ``id`` and emitted once, complete, at the end of the
stream with the final stop reason and usage; usage (with
``prompt_tokens_details.cached_tokens`` as cache reads, reasoning tokens counted once, see
:func:`billed_output`) is cumulative on every chunk once known; the final chunk(s) carry
``SystemFingerprint``, ``Timing`` and, for refusals (``StopReason.REFUSAL``) or
``content_filter``, ``RefusalReason`` metadata, and the message's continuation fields in
``Messages.Assistant.signature``. Text survives a surrogate pair split over two events. Errors
follow the contract in ``base.py``: nothing a server sends makes ``stream`` raise, and a stream
of only ``data: [DONE]`` is an error.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import msgspec

from ..ids import new_call_id, new_scru128
from ..pricing import priced
from ..schema.refs import self_contained
from ..types import (
    AssistantMessage,
    GenerationMetadata,
    ImageContent,
    MessageRole,
    ModelId,
    ModelInteraction,
    ModelParams,
    ModelProviders,
    ModelState,
    OutputFormat,
    StopReason,
    Stream,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ToolCall,
    ToolChoice,
    ToolResultMessage,
    UsageReport,
    UserMessage,
)
from ..types.interaction import CacheRetention
from ._common import LOCAL_HOSTS, HttpBackend, describe, price_key
from ._http import (
    DEFAULT_DEADLINE,
    DEFAULT_FIRST_BYTE_TIMEOUT,
    MAX_CONNECTIONS,
    HttpOptions,
    HttpStreamError,
    SseEvent,
    Timer,
    WireError,
    astream_events,
    error_items,
    error_text,
    resolve_endpoint,
    stream_events,
)
from ._reasoning_tokens import billed_output
from ._responses_request import is_reasoning_model
from ._sanitize import OPENAI_CHAT, sanitize_history
from ._wire_cache import Prefix, PrefixCache
from ._wire_text import as_name, decode_event, final, has_surrogate_escape, join, join_all, visible
from .base import ModelStream

__all__ = ["OpenAIChatModel", "billed_output", "build_request", "openai_chat"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
IMAGE_PLACEHOLDER = "[The tool returned an image; it follows in the next user message.]"
_NAME_OK = re.compile(r"[^a-zA-Z0-9_-]")


def openai_chat(
    model: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 600.0,
    max_retries: int = 2,
    headers: Mapping[str, str] | None = None,
    http_client: httpx.Client | httpx.AsyncClient | tuple[Any, ...] | None = None,
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
        http_client: an ``httpx.Client``, ``httpx.AsyncClient`` or a tuple of both, used as given
            (proxies, test transports) and never closed here. A single client serves both
            paths: with only an ``httpx.Client``, ``astream``/``agenerate`` run its blocking
            calls in worker threads; with only an ``httpx.AsyncClient``, ``stream``/``generate``
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
    ep = resolve_endpoint(
        api_key=api_key,
        base_url=base_url,
        key_env="OPENAI_API_KEY",
        base_env="OPENAI_BASE_URL",
        default_base_url=OPENAI_BASE_URL,
    )
    official = ep.official
    opts = HttpOptions.create(
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
    return OpenAIChatModel(
        model,
        opts,
        official=official,
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

    ``stream`` (sync, native ``httpx.Client``) and ``astream`` (native ``httpx.AsyncClient``)
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
        (a user's ``httpx.AsyncClient`` alone is driven from a worker thread, see ``_http``)."""
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
        """Stream the answer through the async HTTP path (a user's ``httpx.Client`` alone runs
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


# ============================================================================================
# request


def _role_name(role: str) -> str:
    return _NAME_OK.sub("_", role)[:64] or "user"


def _data_url(img: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{img.mime_type.value};base64,{img.b64}"}}


def _args_text(call: ToolCall) -> str:
    if call.arguments is not None:
        return msgspec.json.encode(call.arguments).decode()
    return call.raw_arguments if call.raw_arguments is not None else "{}"


def _replay_fields(turn: dict[str, Any], m: AssistantMessage, origin: str | None) -> None:
    """Put the continuation fields the server sent on its message (kept as a JSON object in
    ``m.signature``: ``reasoning_details``, ``extra_content``, ``reasoning_content``) back on the
    wire assistant message, when ``m`` came from the server this request goes to."""
    if not m.signature or m.origin is None or m.origin != origin:
        return
    try:
        fields = msgspec.json.decode(m.signature)
    except msgspec.DecodeError:
        return
    if not isinstance(fields, dict):
        return
    for key in ("reasoning_details", "extra_content", "reasoning_content"):
        if key in fields:
            turn[key] = fields[key]


def build_messages(
    interaction: ModelInteraction, *, tool_call_content: str | None = None, origin: str | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` array for ``interaction`` (see the module docstring for the rules).

    The history first goes through the sanitation step of ``docs/sanitation.md``
    (:func:`~foundation_ai.backends._sanitize.sanitize_history` with the OpenAI Chat rules: ids
    of at most 40 characters, malformed arguments as ``{}``); then every
    assistant message with ``tool_calls`` is followed directly by one ``tool`` message per
    call (:func:`pair_tool_messages`). ``tool_call_content`` is the ``content`` of an assistant
    message holding only tool calls: ``None`` (JSON ``null``, the default) or ``""`` for
    servers that reject ``null``.

    ``origin`` is the server the request goes to (:func:`origin_of`): continuation tokens of
    messages from that same server are replayed where it expects them (a Gemini
    ``thought_signature`` in the tool call's ``extra_content``; ``reasoning_details``,
    ``extra_content`` and, on a tool-call turn, ``reasoning_content`` on the assistant message),
    and never to another server (docs/providers.md).
    """
    out: list[dict[str, Any]] = []
    system = interaction.full_system_prompt()
    if system:
        out.append({"role": "system", "content": system})
    history = sanitize_history(interaction.messages, OPENAI_CHAT)
    out.extend(wire_messages(history, tool_call_content=tool_call_content, origin=origin))
    return pair_tool_messages(out)


def wire_messages(
    history: Sequence[Any], *, tool_call_content: str | None = None, origin: str | None = None
) -> list[dict[str, Any]]:
    """The wire messages of an already sanitized slice of a history (no system prompt, before
    :func:`pair_tool_messages`); see :func:`build_messages`. A slice that starts after a user
    message maps exactly as it does inside the whole history."""
    out: list[dict[str, Any]] = []
    turn: dict[str, Any] | None = None  # the assistant message being built
    images: list[dict[str, Any]] = []  # images from tool results, flushed after the tool run

    def flush_images() -> None:
        if images:
            out.extend(images)
            images.clear()

    for m in history:
        if isinstance(m, AssistantMessage):
            flush_images()
            c = m.content
            if isinstance(m.stop_reason, StopReason.Error) and not (isinstance(c, TextContent) and c.content):
                continue  # an error record is not something the model said
            if turn is None:
                turn = {"role": "assistant", "content": None}
                out.append(turn)
            if isinstance(c, TextContent):
                if c.content:
                    turn["content"] = (turn["content"] or "") + c.content
            elif isinstance(c, ToolCall):
                call: dict[str, Any] = {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _args_text(c)},
                }
                if c.signature is not None and m.origin is not None and m.origin == origin:
                    call["extra_content"] = {"google": {"thought_signature": c.signature}}
                turn.setdefault("tool_calls", []).append(call)
            _replay_fields(turn, m, origin)
            # ThinkingContent, ImageContent, Embedding: no Chat Completions field
            continue
        if turn is not None and turn["content"] is None and "tool_calls" not in turn:
            out.pop()  # a turn of thinking only: nothing to send (the turn is always last)
        turn = None
        if isinstance(m, ToolResultMessage):
            c = m.content
            if isinstance(c, ImageContent):
                text = IMAGE_PLACEHOLDER
                images.append({"role": "user", "content": [_data_url(c)]})
            else:
                text = c.content
            if m.error_detail is not None and not text:
                text = m.error_detail
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": text})
            continue
        flush_images()
        assert isinstance(m, UserMessage)
        content: Any = _data_url(m.content) if isinstance(m.content, ImageContent) else m.content.content
        if isinstance(m.content, ImageContent):
            content = [content]
        if m.role == MessageRole.System:
            if isinstance(content, list):
                out.append({"role": "user", "name": "system", "content": content})
            else:
                out.append({"role": "system", "content": content})
        elif m.role == MessageRole.User:
            out.append({"role": "user", "content": content})
        else:  # agent, tool context, custom roles keep who spoke
            out.append({"role": "user", "name": _role_name(m.role), "content": content})
    if turn is not None and turn["content"] is None and "tool_calls" not in turn:
        out.pop()
    flush_images()
    if tool_call_content is not None:
        for msg in out:
            if msg["role"] == "assistant" and msg["content"] is None:
                msg["content"] = tool_call_content
    return out


_NOT_RUN = "No result: the tool call was not run."


def pair_tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every assistant message with ``tool_calls`` directly followed by exactly one ``tool``
    message per call, in call order (OpenAI rejects an unanswered call and a ``tool`` message
    that answers no preceding call): a missing answer becomes a ``tool`` message saying the
    call was not run; an answer to no call of the preceding assistant message (or a second
    answer) becomes ``user`` text naming the call; user messages met before the answers move
    after them."""
    out: list[dict[str, Any]] = []
    i = 0
    n = len(messages)
    while i < n:
        msg = messages[i]
        i += 1
        if msg["role"] == "tool":
            out.append(_orphan_tool(msg))
            continue
        out.append(msg)
        calls = [c["id"] for c in msg.get("tool_calls", ())] if msg["role"] == "assistant" else []
        if not calls:
            continue
        answers: dict[str, dict[str, Any]] = {}
        later: list[dict[str, Any]] = []
        while i < n and messages[i]["role"] != "assistant":
            nxt = messages[i]
            i += 1
            if nxt["role"] == "tool" and nxt["tool_call_id"] in calls and nxt["tool_call_id"] not in answers:
                answers[nxt["tool_call_id"]] = nxt
            elif nxt["role"] == "tool":
                later.append(_orphan_tool(nxt))
            else:
                later.append(nxt)
        for cid in calls:
            out.append(answers.get(cid) or {"role": "tool", "tool_call_id": cid, "content": _NOT_RUN})
        out.extend(later)
    return out


def _orphan_tool(msg: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": f"[result of tool call {msg['tool_call_id']}]\n{msg['content']}"}


def _boundary(messages: Sequence[Any], start: int) -> int:
    """The end of the longest prefix of ``messages`` (at least ``start``) that ends on a user
    message with text or an image: after it, the mapping starts afresh (no assistant message
    being built, no image waiting)."""
    for k in range(len(messages), start, -1):
        m = messages[k - 1]
        if isinstance(m, UserMessage):
            c = m.content
            if not (isinstance(c, TextContent) and not c.content.strip()):
                return k
    return start


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
        cut = _boundary(history, start)
        if cut > start:
            ids = entry.ids.child()
            fresh = wire_messages(
                sanitize_history(history[start:cut], OPENAI_CHAT, ids=ids),
                tool_call_content=tool_call_content,
                origin=origin,
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
        tail = wire_messages(
            sanitize_history(history[cut:], OPENAI_CHAT, ids=entry.ids.child()),
            tool_call_content=tool_call_content,
            origin=origin,
        )
        out.extend(entry.wire)
        out.extend(pair_tool_messages(tail))
        self._cache.keep(key, entry)
        return out


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, ToolChoice.Function):
        return {"type": "function", "function": {"name": choice.name}}
    if isinstance(choice, ToolChoice.Required):
        return "required"
    if isinstance(choice, ToolChoice.None_):
        return "none"
    return "auto"


def forced_call_schema(interaction: ModelInteraction) -> tuple[dict[str, Any], str] | None:
    """For a forcing ``tool_choice`` (``Required`` or ``Function``) with tools on offer: the JSON
    Schema of ``{"name": <tool>, "arguments": {...}}`` (one branch per allowed tool) and the
    instruction text; ``None`` otherwise."""
    choice = interaction.tool_choice
    if not isinstance(choice, ToolChoice.Required | ToolChoice.Function):
        return None
    fns = interaction.tools_shed.functions()
    if isinstance(choice, ToolChoice.Function):
        fns = [f for f in fns if f.name == choice.name]
    if not fns:
        return None
    branches = [
        {
            "type": "object",
            "properties": {"name": {"type": "string", "enum": [f.name]}, "arguments": f.parameters},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for f in fns
    ]
    schema = self_contained(branches[0] if len(branches) == 1 else {"anyOf": branches})
    lines = [
        "Call a tool now. Reply with only a JSON object "
        '{"name": "<tool name>", "arguments": {...}} and nothing else. Tools:'
    ]
    lines += [
        f"- {f.name}: {f.description} Arguments schema: {msgspec.json.encode(f.parameters).decode()}"
        for f in fns
    ]
    return schema, "\n".join(lines)


def _add_instruction(messages: list[dict[str, Any]], text: str) -> None:
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        messages[0] = {**messages[0], "content": messages[0]["content"] + "\n\n" + text}
    else:
        messages.insert(0, {"role": "system", "content": text})


def build_request(
    interaction: ModelInteraction,
    params: ModelParams,
    model: str,
    *,
    official: bool = True,
    stream: bool = True,
    emulate_forced_tools: bool = False,
    tool_call_content: str | None = None,
    origin: str | None = None,
    wire_cache: WireCache | None = None,
) -> dict[str, Any]:
    """The Chat Completions request body (a JSON-ready dict).

    With ``wire_cache``, the history's messages already sent are ``msgspec.Raw`` items taken
    from it (the same bytes once encoded with ``msgspec.json.encode``).

    ``messages`` is :func:`build_messages` (the sanitation step of ``docs/sanitation.md``
    included; ``tool_call_content`` as there; ``origin``, the server the request goes to, for
    replaying continuation tokens).

    With ``emulate_forced_tools`` and a forcing ``tool_choice``, the call is requested through
    ``response_format`` instead of ``tools`` (see ``openai_chat(forced_tool_mode=...)``).

    ``ModelParams`` mapping: ``max_tokens`` (``max_completion_tokens`` on OpenAI's host),
    ``temperature``, ``top_p`` (both left out when a reasoning effort is set, and for OpenAI
    reasoning models ``o1*``, ``o3*``, ``o4*``, ``gpt-5*``, ``codex*``, which reject them:
    https://platform.openai.com/docs/guides/reasoning), ``seed``,
    ``stop`` (first 4 of ``stop_tokens``), ``frequency_penalty``, ``presence_penalty``,
    ``logit_bias``, ``reasoning_effort`` (from ``thinking_level``), ``prompt_cache_retention``
    (``"24h"`` for ``CacheRetention.Long``, OpenAI's host only), ``response_format`` (from
    ``output_format``). ``top_k`` and ``repeat_penalty`` are not OpenAI fields: ignored (use
    ``extra_body`` for servers that take them).
    """
    forced = forced_call_schema(interaction) if emulate_forced_tools else None
    if wire_cache is not None and forced is None:
        messages = wire_cache.messages(interaction, tool_call_content=tool_call_content, origin=origin)
    else:
        messages = build_messages(interaction, tool_call_content=tool_call_content, origin=origin)
    body: dict[str, Any] = {"model": model, "messages": messages}
    fns = interaction.tools_shed.functions()
    if forced is not None:
        _add_instruction(body["messages"], forced[1])
        fns = []
    if fns:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": f.name,
                    "description": f.description,
                    "parameters": self_contained(f.parameters),
                },
            }
            for f in fns
        ]
        if interaction.tool_choice is not None:
            body["tool_choice"] = _tool_choice(interaction.tool_choice)
    body["max_completion_tokens" if official else "max_tokens"] = params.max_tokens
    effort = params.thinking_level
    if effort is not None and effort is not ThinkingLevel.Off:
        body["reasoning_effort"] = effort.value
    elif not is_reasoning_model(model):  # o1/o3/o4/gpt-5/codex answer 400 to either
        body["temperature"] = params.temperature
        body["top_p"] = params.top_p
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop_tokens:
        body["stop"] = list(params.stop_tokens[:4])
    if params.frequency_penalty is not None:
        body["frequency_penalty"] = params.frequency_penalty
    if params.presence_penalty is not None:
        body["presence_penalty"] = params.presence_penalty
    if params.logit_bias:
        body["logit_bias"] = dict(params.logit_bias)
    if official and params.cache_retention is CacheRetention.Long:
        body["prompt_cache_retention"] = "24h"
    fmt = params.output_format
    if forced is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "tool_call", "schema": forced[0], "strict": True},
        }
    elif isinstance(fmt, OutputFormat.JsonObject):
        body["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, OutputFormat.JsonSchema):
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": fmt.name, "schema": self_contained(fmt.schema), "strict": fmt.strict},
        }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


# ============================================================================================
# stream


class _Fn(msgspec.Struct, gc=False):
    name: str | None = None
    arguments: Any = None


class _ToolDelta(msgspec.Struct, gc=False):
    index: Any = None
    id: str | None = None
    function: _Fn | None = None
    extra_content: Any = None


class _Delta(msgspec.Struct, gc=False):
    content: Any = None
    refusal: Any = None
    reasoning_content: Any = None
    reasoning: Any = None
    thinking: Any = None
    reasoning_details: Any = None
    extra_content: Any = None
    tool_calls: list[_ToolDelta] | None = None


class _Choice(msgspec.Struct, gc=False):
    index: int = 0
    delta: _Delta | None = None
    message: _Delta | None = None
    finish_reason: str | None = None


class _Details(msgspec.Struct, gc=False):
    cached_tokens: float | None = None


class _OutDetails(msgspec.Struct, gc=False):
    reasoning_tokens: float | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: float | None = None
    completion_tokens: float | None = None
    total_tokens: float | None = None
    prompt_tokens_details: _Details | None = None
    completion_tokens_details: _OutDetails | None = None


class _Chunk(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    system_fingerprint: str | None = None
    error: Any = None


_CHUNK = msgspec.json.Decoder(_Chunk)


def _decode_chunk(data: str, what: str) -> _Chunk:
    """``data`` decoded as a ``chat.completion(.chunk)`` (a JSON string escape holding half of a
    surrogate pair is accepted, see ``_wire_text``).

    Raises:
        WireError: malformed JSON or a field of the wrong type (the text names ``what`` and
            quotes the first 200 characters), or an in-band ``error`` object (its provider text).
    """
    try:
        try:
            chunk = _CHUNK.decode(data)
        except msgspec.DecodeError:
            if not has_surrogate_escape(data):
                raise
            chunk = msgspec.convert(decode_event(data), _Chunk)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        raise WireError(f"malformed {what} ({exc}): {data[:200]!r}") from None
    if chunk.error is not None:
        raise WireError(
            error_text(200, msgspec.json.encode({"error": chunk.error})).replace(" (HTTP 200)", "")
        )
    return chunk


class _Call:
    __slots__ = ("args_obj", "id", "name", "parts", "signature")

    def __init__(self, call_id: str | None, name: str) -> None:
        self.id = call_id or None
        self.name = name
        self.parts: list[str] = []
        self.args_obj: dict[str, Any] | None = None
        self.signature: str | None = None


def _index_key(value: Any) -> Any:
    if isinstance(value, str):
        s = value.strip()
        return int(s) if s.lstrip("-").isdigit() else s
    if isinstance(value, int | float | bool) or value is None:
        return value
    return msgspec.json.encode(value).decode()  # unhashable (a list, an object): its JSON text


REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
"""The spellings of a message's or delta's reasoning text, in the order they are read (the first
non-empty string wins, as some servers send the same text under two names): ``reasoning_content``
(DeepSeek, vLLM before 0.10, llama.cpp server, Qwen, xAI, Moonshot), ``reasoning`` (OpenRouter,
vLLM 0.10+, Groq, Cerebras, Ollama's OpenAI endpoint), ``thinking`` (some proxies). Content parts
of type ``"thinking"`` / ``"reasoning"`` (Mistral's Magistral) are read too. Sources:
https://api-docs.deepseek.com/guides/reasoning_model,
https://openrouter.ai/docs/use-cases/reasoning-tokens,
https://docs.vllm.ai/en/latest/features/reasoning_outputs.html,
https://console.groq.com/docs/reasoning, https://docs.mistral.ai/capabilities/reasoning/."""


def _reasoning_of(d: _Delta) -> str:
    for name in REASONING_FIELDS:
        value = getattr(d, name)
        if isinstance(value, str) and value:
            return value
    return ""


def _part_text(part: Any) -> tuple[str, str]:
    """(text, reasoning) of one content part of a list-valued ``content``."""
    if isinstance(part, str):
        return part, ""
    if not isinstance(part, dict):
        return "", ""
    kind = part.get("type")
    if kind in ("thinking", "reasoning"):
        inner = part.get("thinking", part.get("reasoning", part.get("text")))
        if isinstance(inner, list):  # Magistral: a list of text chunks
            inner = "".join(
                x.get("text", "") for x in inner if isinstance(x, dict) and isinstance(x.get("text"), str)
            )
        return "", inner if isinstance(inner, str) else ""
    text = part.get("text")
    return (text if isinstance(text, str) else ""), ""


def _merge_details(into: list[dict[str, Any]], pieces: Any) -> bool:
    """Merge streamed OpenRouter ``reasoning_details`` pieces into ``into``: a piece with the
    ``index`` of an earlier one extends it (``text``, ``summary``, ``data``, ``signature``
    concatenated; other fields kept from the first piece that had them), another is appended.
    True when something changed. Source: https://openrouter.ai/docs/use-cases/reasoning-tokens
    ("Preserving reasoning blocks")."""
    if not isinstance(pieces, list):
        return False
    changed = False
    for piece in pieces:
        if not isinstance(piece, dict):
            continue
        idx = piece.get("index")
        cur = next((d for d in into if idx is not None and d.get("index") == idx), None)
        if cur is None:
            into.append(dict(piece))
            changed = True
            continue
        for k, v in piece.items():
            if k in ("text", "summary", "data", "signature") and isinstance(v, str):
                if v:
                    cur[k] = (
                        (cur.get(k) or "") + v if isinstance(cur.get(k), str) or cur.get(k) is None else v
                    )
                    changed = True
            elif v is not None and cur.get(k) in (None, ""):
                cur[k] = v
                changed = True
    return changed


def _merge_extra(into: dict[str, Any], extra: Any) -> None:
    """Merge a (streamed) ``extra_content`` object into ``into``, one level deep."""
    if not isinstance(extra, dict):
        return
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            into[k] = {**into[k], **v}
        else:
            into[k] = v


def _google_signature(extra: Any) -> str | None:
    google = extra.get("google") if isinstance(extra, dict) else None
    sig = as_name(google.get("thought_signature")) if isinstance(google, dict) else ""
    return sig or None


def split_json_objects(text: str) -> list[Any] | None:
    """Split ``'{"q":"a"}{"q":"b"}'`` into its top-level JSON values; ``None`` when the
    text is not a sequence of complete JSON values."""
    dec = msgspec.json.Decoder()
    out: list[Any] = []
    depth = 0
    start = None
    in_str = esc = False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            if depth == 0:
                start = i
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0 and start is not None:
                try:
                    out.append(dec.decode(text[start : i + 1]))
                except msgspec.DecodeError:
                    return None
                start = None
        elif depth == 0 and not ch.isspace():
            return None
    return out if depth == 0 and not in_str and out else None


def _split_names(name: str, known: Sequence[str], n: int | None = None) -> list[str] | None:
    """Split a concatenation of known tool names (``"searchsearch"``), longest match first;
    ``None`` unless every piece is a known name (and there are ``n`` of them, when given)."""
    names = sorted(set(known), key=len, reverse=True)
    out: list[str] = []
    rest = name
    while rest:
        for k in names:
            if k and rest.startswith(k):
                out.append(k)
                rest = rest[len(k) :]
                break
        else:
            return None
    return out if out and (n is None or len(out) == n) else None


def _parse_args(text: str) -> tuple[dict[str, Any] | None, str | None, list[Any] | None]:
    """(arguments, raw_arguments, several objects) for the argument text of one call."""
    if not text.strip():
        return {}, None, None
    try:
        value = msgspec.json.decode(text)
    except RecursionError:  # nested past msgspec's depth limit (~1,000): kept as text, never run
        return None, text, None
    except msgspec.DecodeError:
        many = split_json_objects(text)
        if many and len(many) > 1 and all(isinstance(v, dict) for v in many):
            return None, text, many
        return None, text, None
    if isinstance(value, dict):
        return value, None, None
    if isinstance(value, str):  # double-encoded arguments: a JSON string holding the object
        try:
            inner = msgspec.json.decode(value)
            if isinstance(inner, dict):
                return inner, None, None
        except (msgspec.DecodeError, RecursionError):
            pass
    return None, text, None


_FINISH = {
    "stop": StopReason.STOP,
    "length": StopReason.LENGTH,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
}


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


class ChatStreamParser(msgspec.Struct, gc=False):
    """Turns Chat Completions stream events (or one whole ``chat.completion`` JSON answer) into
    ``Stream`` items. ``feed`` per event, then ``finish`` (or ``fail`` with an error text).
    Made as ``ChatStreamParser(model_id, price_key, tool_names, emulated_call=..., origin=...)``;
    the other fields are its running state.

    ``origin`` names the server (its host) for continuation tokens: a message that carries one
    (a Gemini ``thought_signature``, OpenRouter ``reasoning_details``) gets
    ``Messages.Assistant.origin = origin`` (docs/providers.md).

    The parser holds only the stream's data and nothing that refers back to it, so it is not
    tracked by the cycle collector (msgspec ``gc=False``; the lists and dicts it holds still
    are): a process with thousands of streams in flight scans fewer objects.
    """

    model_id: ModelId
    price_key: tuple[str | None, str | None] | None
    tool_names: Sequence[str]
    emulated_call: bool = False
    """True when the text answer is a JSON tool call (``forced_tool_mode``): not streamed
    as text, parsed into one ``ToolCall`` at the end."""
    origin: str | None = None
    timer: Timer = msgspec.field(default_factory=Timer)
    text: str = ""
    text_id: str | None = None
    thinking: str = ""
    thinking_id: str | None = None
    last: str | None = None
    """``"text"`` or ``"thinking"``: the output streamed last."""
    calls: tuple[_Call, ...] = ()
    """The streamed tool calls (a tuple, grown per new call: most answers have none)."""
    by_index: dict[Any, _Call] = msgspec.field(default_factory=dict)
    usage: UsageReport = msgspec.field(default_factory=UsageReport)
    finish_reason: str | None = None
    refusal: str = ""
    fingerprint: str | None = None
    details: list[dict[str, Any]] | None = None
    """OpenRouter ``reasoning_details``, merged across deltas (``None`` until the first)."""
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    """The message's ``extra_content`` (Gemini: ``{"google": {"thought_signature"}}``)."""
    reasoning_content: str = ""
    """The reasoning text when sent as ``reasoning_content``, for replay (see
    :meth:`message_fields`)."""
    done: bool = False
    events: int = 0

    # -- events ----------------------------------------------------------------------------

    def feed(self, ev: SseEvent) -> list[ModelStream] | None:
        """Items for one event. Raises ``WireError`` for malformed data (never another
        exception: anything a server sends ends, at worst, in the contract's error tail)."""
        try:
            return self._feed(ev)
        except WireError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
            raise WireError(
                f"malformed stream event ({type(exc).__name__}: {exc}): {ev.data[:200]!r}"
            ) from None

    def _feed(self, ev: SseEvent) -> list[ModelStream] | None:
        data = ev.data
        if ev.event == "json":
            return self._whole(data)
        if data == "[DONE]":
            self.done = True
            return None
        if not data:
            return None
        chunk = _decode_chunk(data, "stream event")
        self.events += 1
        out: list[ModelStream] | None = None
        if isinstance(chunk.system_fingerprint, str) and chunk.system_fingerprint:
            self.fingerprint = as_name(chunk.system_fingerprint)
        if chunk.usage is not None:
            self._set_usage(chunk.usage)
            out = [Stream.Pending(ModelState.GeneratingTokens(self.usage))]
        if chunk.choices:
            for choice in chunk.choices:
                if choice.index != 0:
                    continue  # n > 1 is not requested; only the first choice is read
                if choice.finish_reason:
                    self.finish_reason = as_name(choice.finish_reason)
                d = choice.delta or choice.message
                if d is None:
                    continue
                items = self._delta(d)
                if items:
                    out = items if out is None else out + items
        return out

    def _msg(
        self,
        content: Any,
        msg_id: str,
        stop: StopReason = StopReason.STOP,
        meta: Any = None,
        signature: str | None = None,
    ) -> ModelStream:
        token = (
            signature is not None
            or getattr(content, "signature", None) is not None
            or isinstance(content, ThinkingContent)
        )
        return Stream.Next(
            AssistantMessage(
                id=msg_id,
                model=self.model_id,
                content=content,
                usage=self.usage,
                stop_reason=stop,
                provider=ModelProviders.OpenAI,
                metadata=meta,
                signature=signature,
                origin=self.origin if token else None,
            )
        )

    def _thinking_item(self) -> ModelStream:
        if self.thinking_id is None:
            self.thinking_id = new_scru128()
        self.last = "thinking"
        return self._msg(ThinkingContent(visible(self.thinking)), self.thinking_id)

    def _delta(self, d: _Delta) -> list[ModelStream]:
        content = d.content
        if (
            type(content) is str
            and d.reasoning_content is None
            and d.reasoning is None
            and d.thinking is None
            and d.reasoning_details is None
            and d.extra_content is None
            and d.refusal is None
            and d.tool_calls is None
        ):
            return self._text_delta(content)  # the common chunk: text only
        items: list[ModelStream] = []
        reasoning = _reasoning_of(d)
        if reasoning and reasoning is d.reasoning_content:
            self.reasoning_content = join(self.reasoning_content, reasoning)
        content = d.content
        text = ""
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):  # a list of parts (some compatible servers)
            for part in content:
                t, r = _part_text(part)
                text += t
                reasoning += r
        if d.reasoning_details is not None:
            if self.details is None:
                self.details = []
            if _merge_details(self.details, d.reasoning_details):
                self.timer.first()
        _merge_extra(self.extra, d.extra_content)
        if reasoning:
            self.timer.first()
            if self.last == "text":  # reasoning again after text: a new output (ids never return)
                self.thinking, self.thinking_id = "", None
            self.thinking = join(self.thinking, reasoning)
            items.append(self._thinking_item())
        if text:
            self.timer.first()
            if self.last == "thinking" and self.text_id is not None:  # text again after reasoning
                self.text, self.text_id = "", None
            self.text = join(self.text, text)
            if not self.emulated_call:
                if self.text_id is None:
                    self.text_id = new_scru128()
                self.last = "text"
                items.append(self._msg(TextContent(visible(self.text)), self.text_id))
        if isinstance(d.refusal, str) and d.refusal:
            self.timer.first()
            self.refusal = join(self.refusal, d.refusal)
        if d.tool_calls:
            self.timer.first()
            for tc in d.tool_calls:
                self._tool_fragment(tc)
        return items

    def _text_delta(self, text: str) -> list[ModelStream]:
        """:meth:`_delta` of a chunk holding only ``content`` text (same items, fewer checks:
        this runs once per streamed token)."""
        if not text:
            return []
        self.timer.first()
        if self.last == "thinking" and self.text_id is not None:  # text again after reasoning
            self.text, self.text_id = "", None
        self.text = join(self.text, text)
        if self.emulated_call:
            return []
        if self.text_id is None:
            self.text_id = new_scru128()
        self.last = "text"
        return [
            Stream.Next(
                AssistantMessage(
                    id=self.text_id,
                    model=self.model_id,
                    content=TextContent(visible(self.text)),
                    usage=self.usage,
                    stop_reason=StopReason.STOP,
                    provider=ModelProviders.OpenAI,
                )
            )
        ]

    def _tool_fragment(self, tc: _ToolDelta) -> None:
        fn = tc.function
        name = as_name(fn.name) if fn is not None else ""
        call_id = as_name(tc.id) or None
        args = fn.arguments if fn is not None else None
        key = _index_key(tc.index)
        cur = self.by_index.get(key) if key is not None else (self.calls[-1] if self.calls else None)
        new = cur is None
        if not new and call_id and cur is not None and cur.id and call_id != cur.id:
            new = True  # a new id at a used index starts a new call
        if (
            not new
            and isinstance(args, dict)
            and args
            and cur is not None
            and (cur.args_obj is not None or cur.parts)
        ):
            new = True  # a complete object after the current call's arguments: another call
        if new:
            cur = _Call(call_id, name)
            self.calls += (cur,)
            if key is not None:
                self.by_index[key] = cur
        else:
            assert cur is not None
            if call_id and not cur.id:
                cur.id = call_id
            if name and name != cur.name:
                cur.name += name  # streamed in pieces; concatenated repeats are split in _calls()
        sig = _google_signature(tc.extra_content)
        if sig is not None:
            cur.signature = sig
        if isinstance(args, dict):
            if args or (cur.args_obj is None and not cur.parts):  # an empty final {} erases nothing
                cur.args_obj = args
        elif isinstance(args, str):
            if args:
                cur.parts.append(args)
        elif args is not None:
            cur.parts.append(msgspec.json.encode(args).decode())

    def _set_usage(self, u: _Usage) -> None:
        prompt = _num(u.prompt_tokens)
        cached = _num(u.prompt_tokens_details.cached_tokens) if u.prompt_tokens_details else 0.0
        reasoning = _num(u.completion_tokens_details.reasoning_tokens) if u.completion_tokens_details else 0.0
        total = _num(u.total_tokens) if u.total_tokens is not None else None
        output = billed_output(_num(u.completion_tokens), reasoning, prompt, total)
        if total is None or output != _num(u.completion_tokens):
            total = prompt + output
        report = UsageReport(
            input=max(prompt - cached, 0.0), output=output, cache_read=cached, total_tokens=total
        )
        self.usage = priced(self.model_id.name(), report, self.price_key)

    def _whole(self, data: str) -> list[ModelStream] | None:
        """A non-streamed ``chat.completion`` answer (a server that ignored ``stream``): the
        whole answer arrived at once, so that is its time to first token."""
        chunk = _decode_chunk(data, "response")
        for choice in chunk.choices or []:
            if choice.index == 0 and choice.message is not None and choice.message.tool_calls:
                for i, tc in enumerate(choice.message.tool_calls):
                    if tc.index is None:
                        tc.index = i
        out = self._feed(SseEvent("message", data))
        if chunk.choices:
            self.timer.first()
        self.done = True
        return out

    # -- the end ---------------------------------------------------------------------------

    def _stop(self, has_calls: bool) -> tuple[StopReason, list[Any]]:
        meta: list[Any] = []
        fr = self.finish_reason
        if fr is None:
            stop = StopReason.TOOL_USE if has_calls else StopReason.STOP
        else:
            stop = _FINISH.get(fr) or StopReason.parse(fr)
            if has_calls and stop == StopReason.STOP:
                stop = StopReason.TOOL_USE  # "stop" although tools were called
        refusal = final(self.refusal)
        if refusal and not has_calls and stop == StopReason.STOP:
            stop = StopReason.REFUSAL  # the model declined: a typed outcome (docs/providers.md)
        if fr == "content_filter":
            meta.append(GenerationMetadata.RefusalReason(reason="content_filter"))
        if refusal:
            meta.append(GenerationMetadata.RefusalReason(reason=refusal))
        if self.fingerprint:
            meta.append(GenerationMetadata.SystemFingerprint(value=self.fingerprint))
        meta.append(self.timer.metadata(self.usage.output or None))
        return stop, meta

    def message_fields(self) -> str | None:
        """The continuation fields of the answer's message, as the JSON text of an object
        (``reasoning_details``, ``extra_content``), ``None`` when there are none. Kept in the
        final output's ``Messages.Assistant.signature`` and sent back on that assistant
        message to the same server (docs/providers.md)."""
        fields: dict[str, Any] = {}
        if self.reasoning_content and self.calls:  # DeepSeek / Moonshot: needed on tool-call turns
            fields["reasoning_content"] = final(self.reasoning_content)
        if self.details:
            fields["reasoning_details"] = self.details
        if self.extra:
            fields["extra_content"] = self.extra
        if not fields:
            return None
        try:
            return msgspec.json.encode(fields).decode()
        except UnicodeEncodeError:  # a lone surrogate inside: not a token any server issued
            return None

    def _tool_calls(self) -> list[ToolCall]:
        out: list[ToolCall] = []
        seen: set[str] = set()
        for c in self.calls:
            if c.args_obj is not None:
                parsed: list[tuple[dict[str, Any] | None, str | None]] = [(c.args_obj, None)]
                if c.parts:  # an object plus string fragments: keep the text as received
                    parsed = [(None, msgspec.json.encode(c.args_obj).decode() + join_all(c.parts))]
                names = [c.name]
            else:
                args, raw, many = _parse_args(join_all(c.parts))
                if many is not None:  # several calls glued together at one index
                    split = _split_names(c.name, self.tool_names, len(many))
                    if split is None:
                        one = _split_names(c.name, self.tool_names, 1)
                        base = one[0] if one else c.name
                        split = [base] * len(many)
                    parsed = [(v, None) for v in many]
                    names = split
                else:
                    parsed = [(args, raw)]
                    names = [c.name]
            if len(names) == 1 and names[0] not in self.tool_names and self.tool_names:
                # a name repeated by a server that re-sends it on every fragment
                rep = _split_names(names[0], self.tool_names)
                if rep and len(set(rep)) == 1:
                    names = [rep[0]]
            for i, (args, raw) in enumerate(parsed):
                cid = (
                    c.id if (i == 0 and c.id and c.id not in seen) else new_call_id()
                )  # empty or repeated ids
                seen.add(cid)
                sig = c.signature if i == 0 else None
                out.append(ToolCall(id=cid, name=names[i], arguments=args, raw_arguments=raw, signature=sig))
        return out

    def _emulated_call(self) -> ToolCall:
        """The JSON answer of ``forced_tool_mode="json_schema"`` as one call (arguments ``None``
        and the text in ``raw_arguments`` when it is not the expected object)."""
        text = final(self.text)
        try:
            doc = msgspec.json.decode(text)
        except (msgspec.DecodeError, RecursionError):
            doc = None
        name = doc.get("name") if isinstance(doc, dict) else None
        args = doc.get("arguments") if isinstance(doc, dict) else None
        if not isinstance(name, str):
            name = self.tool_names[0] if len(self.tool_names) == 1 else ""
        if isinstance(args, dict):
            return ToolCall(id=new_call_id(), name=name, arguments=args)
        return ToolCall(id=new_call_id(), name=name, arguments=None, raw_arguments=text)

    def finish(self) -> list[ModelStream]:
        """The final items of a stream that ended normally (or an error if it ended early, or
        when it held no chunk at all: a bare ``data: [DONE]`` is not an answer)."""
        try:
            return self._finish()
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
            return self.fail(f"malformed stream ({type(exc).__name__}: {exc})")

    def _finish(self) -> list[ModelStream]:
        if self.finish_reason is None and not self.done:
            return self.fail("stream ended before completion (no finish_reason and no [DONE])")
        if self.events == 0:
            return self.fail("the stream held no completion chunk (only [DONE])")
        calls = self._tool_calls()
        if self.emulated_call and not calls:
            calls = [self._emulated_call()]
        stop, meta = self._stop(bool(calls))
        fields = self.message_fields()
        if fields is not None:
            self.timer.first()
        out: list[ModelStream] = []
        if calls:
            for i, tc in enumerate(calls):
                last = i == len(calls) - 1
                out.append(self._msg(tc, new_scru128(), stop, meta, fields if last else None))
        elif self.last == "thinking" and self.thinking_id is not None:
            thinking = ThinkingContent(final(self.thinking))
            out.append(self._msg(thinking, self.thinking_id, stop, meta, fields))
        else:
            text = TextContent(final(self.text))
            out.append(self._msg(text, self.text_id or new_scru128(), stop, meta, fields))
        out.append(Stream.Pending(ModelState.Finished()))
        return out

    def fail(self, detail: str) -> list[ModelStream]:
        """The error tail (partial output already streamed stays valid)."""
        return error_items(detail, self.model_id, ModelProviders.OpenAI, self.usage)
