"""OpenAI Chat Completions, and every OpenAI-compatible server by ``base_url`` (issue 3).

``openai_chat("gpt-4o-mini")`` talks to ``https://api.openai.com/v1`` with ``OPENAI_API_KEY``;
``openai_chat("smollm2", base_url="http://127.0.0.1:8080")`` talks to llama-server (likewise
OpenRouter, Ollama, vLLM, LM Studio). A base URL with no path gets ``/v1`` appended; one with a
path (``.../v1``, ``https://openrouter.ai/api/v1``) is used as given. Only OpenAI's own host
requires a key. ``OPENAI_API_KEY`` is sent only to OpenAI's host or to the host the user paired
with it in ``OPENAI_BASE_URL``; another host gets a key only when passed explicitly, so an
OpenAI key is never sent to a third party (``docs/models.md``).

Request mapping (wire-notes section 2): the system prompt plus ``soul`` is the first ``system``
message; a ``Messages.User`` with role System is a ``system`` message, role Agent (or Tool, or a
custom role) a ``user`` message with ``name`` set to the role; the Assistant outputs of one turn
become ONE assistant message (text in ``content``, every call in ``tool_calls``, ``content:
null`` when tool-only, case C35; ``""`` with ``tool_call_content=""``), arguments re-sent as the
JSON text of the original object (``{}`` for arguments that never parsed); the history is
sanitized first (``docs/sanitation.md``: call ids of at most 40 characters, every call answered);
thinking is never replayed (Chat Completions has no field for it; signatures of other providers
are invalid here, case C21); tool results are ``role: tool`` messages; an image in a user message
is an ``image_url`` data URL; a tool result holding an image becomes a placeholder text in the
tool message and a user message with the image after the run of tool messages (case C38).

Forced tool calls: against a loopback server (llama-server, Ollama, LM Studio on 127.0.0.1) a
``ToolChoice.Required`` / ``Function`` is sent by default as a ``response_format`` JSON Schema
``{"name", "arguments"}`` (grammar-enforced) and the answer parsed into one ``ToolCall``,
because llama-server ignores ``tool_choice`` for models whose chat template has no tool support;
``forced_tool_mode="native"`` turns this off (see :func:`openai_chat`).

Stream mapping: snapshot chunks (the whole text so far) for text and ``reasoning_content``;
tool calls assembled by ``index`` / ``id`` (cases C07, C09, C11, C12, C14, C17, C41, C43) and
emitted once, complete, at the end of the stream with the final stop reason and usage; usage
(with ``prompt_tokens_details.cached_tokens`` as cache reads) is cumulative on every chunk once
known; the final chunk(s) carry ``SystemFingerprint``, ``Timing`` and, for refusals (C33) or
``content_filter``, ``RefusalReason`` metadata. Errors follow the contract in ``base.py``.
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
from ._sanitize import OPENAI_CHAT, sanitize_history
from .base import ModelStream

__all__ = ["OpenAIChatModel", "build_request", "openai_chat"]

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
        max_retry_delay: cap in seconds on any single wait between retries, ``Retry-After``
            included.
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
        tool_call_content: the ``content`` of a replayed assistant message that holds only
            tool calls: ``None`` sends JSON ``null`` (the default, what OpenAI documents);
            ``""`` for servers that reject ``null`` there (``docs/sanitation.md``).

    Raises:
        ConfigurationError: OpenAI's host and no key in the argument or ``OPENAI_API_KEY``.
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
        )
        if self.extra_body:
            body.update(self.extra_body)
        return msgspec.json.encode(body)

    def _parser(self, interaction: ModelInteraction) -> ChatStreamParser:
        names = [f.name for f in interaction.tools_shed.functions()]
        emulated = self._emulating(interaction)
        choice = interaction.tool_choice
        if emulated and isinstance(choice, ToolChoice.Function):
            names = [choice.name]
        return ChatStreamParser(self._model_id, self._price_key, names, emulated_call=emulated)

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
            for ev in stream_events(self.options, self.url, body, self._headers()):
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
            async for ev in astream_events(self.options, self.url, body, self._headers()):
                out = p.feed(ev)
                if out:
                    for item in out:
                        yield item
                if p.done:
                    break
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


def build_messages(
    interaction: ModelInteraction, *, tool_call_content: str | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` array for ``interaction`` (see the module docstring for the rules).

    The history first goes through the sanitation step of ``docs/sanitation.md``
    (:func:`~foundation_ai.backends._sanitize.sanitize_history` with the OpenAI Chat rules: ids
    of at most 40 characters, malformed arguments as ``{}``); then every
    assistant message with ``tool_calls`` is followed directly by one ``tool`` message per
    call (:func:`pair_tool_messages`). ``tool_call_content`` is the ``content`` of an assistant
    message holding only tool calls: ``None`` (JSON ``null``, the default) or ``""`` for
    servers that reject ``null``.
    """
    out: list[dict[str, Any]] = []
    system = interaction.full_system_prompt()
    if system:
        out.append({"role": "system", "content": system})
    turn: dict[str, Any] | None = None  # the assistant message being built
    images: list[dict[str, Any]] = []  # C38: images from tool results, flushed after the tool run

    def flush_images() -> None:
        if images:
            out.extend(images)
            images.clear()

    for m in sanitize_history(interaction.messages, OPENAI_CHAT):
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
                turn.setdefault("tool_calls", []).append(
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _args_text(c)}}
                )
            # ThinkingContent, ImageContent, Embedding: no Chat Completions field (C21)
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
    return pair_tool_messages(out)


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
    schema = branches[0] if len(branches) == 1 else {"anyOf": branches}
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
) -> dict[str, Any]:
    """The Chat Completions request body (a JSON-ready dict).

    ``messages`` is :func:`build_messages` (the sanitation step of ``docs/sanitation.md``
    included; ``tool_call_content`` as there).

    With ``emulate_forced_tools`` and a forcing ``tool_choice``, the call is requested through
    ``response_format`` instead of ``tools`` (see ``openai_chat(forced_tool_mode=...)``).

    ``ModelParams`` mapping: ``max_tokens`` (``max_completion_tokens`` on OpenAI's host),
    ``temperature``, ``top_p`` (both left out when a reasoning effort is set), ``seed``,
    ``stop`` (first 4 of ``stop_tokens``), ``frequency_penalty``, ``presence_penalty``,
    ``logit_bias``, ``reasoning_effort`` (from ``thinking_level``), ``prompt_cache_retention``
    (``"24h"`` for ``CacheRetention.Long``, OpenAI's host only), ``response_format`` (from
    ``output_format``). ``top_k`` and ``repeat_penalty`` are not OpenAI fields: ignored (use
    ``extra_body`` for servers that take them).
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": build_messages(interaction, tool_call_content=tool_call_content),
    }
    fns = interaction.tools_shed.functions()
    forced = forced_call_schema(interaction) if emulate_forced_tools else None
    if forced is not None:
        _add_instruction(body["messages"], forced[1])
        fns = []
    if fns:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": f.name, "description": f.description, "parameters": f.parameters},
            }
            for f in fns
        ]
        if interaction.tool_choice is not None:
            body["tool_choice"] = _tool_choice(interaction.tool_choice)
    body["max_completion_tokens" if official else "max_tokens"] = params.max_tokens
    effort = params.thinking_level
    if effort is not None and effort is not ThinkingLevel.Off:
        body["reasoning_effort"] = effort.value
    else:
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
            "json_schema": {"name": fmt.name, "schema": fmt.schema, "strict": fmt.strict},
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


class _Delta(msgspec.Struct, gc=False):
    content: Any = None
    refusal: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[_ToolDelta] | None = None


class _Choice(msgspec.Struct, gc=False):
    index: int = 0
    delta: _Delta | None = None
    message: _Delta | None = None
    finish_reason: str | None = None


class _Details(msgspec.Struct, gc=False):
    cached_tokens: float | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: float | None = None
    completion_tokens: float | None = None
    total_tokens: float | None = None
    prompt_tokens_details: _Details | None = None


class _Chunk(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    system_fingerprint: str | None = None
    error: Any = None


_CHUNK = msgspec.json.Decoder(_Chunk)


def _decode_chunk(data: str, what: str) -> _Chunk:
    """``data`` decoded as a ``chat.completion(.chunk)``.

    Raises:
        WireError: malformed JSON (the text names ``what`` and quotes the first 200 characters),
            or an in-band ``error`` object (its provider text).
    """
    try:
        chunk = _CHUNK.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise WireError(f"malformed {what} ({exc}): {data[:200]!r}") from None
    if chunk.error is not None:
        raise WireError(
            error_text(200, msgspec.json.encode({"error": chunk.error})).replace(" (HTTP 200)", "")
        )
    return chunk


class _Call:
    __slots__ = ("args_obj", "id", "name", "parts")

    def __init__(self, call_id: str | None, name: str) -> None:
        self.id = call_id or None
        self.name = name
        self.parts: list[str] = []
        self.args_obj: dict[str, Any] | None = None


def _index_key(value: Any) -> Any:
    if isinstance(value, str):
        s = value.strip()
        return int(s) if s.lstrip("-").isdigit() else s
    return value


def split_json_objects(text: str) -> list[Any] | None:
    """Split ``'{"q":"a"}{"q":"b"}'`` into its top-level JSON values (case C12); ``None`` when the
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
        except msgspec.DecodeError:
            pass
    return None, text, None


_FINISH = {
    "stop": StopReason.STOP,
    "length": StopReason.LENGTH,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
}


class ChatStreamParser:
    """Turns Chat Completions stream events (or one whole ``chat.completion`` JSON answer) into
    ``Stream`` items. ``feed`` per event, then ``finish`` (or ``fail`` with an error text)."""

    def __init__(
        self,
        model_id: ModelId,
        price_key: tuple[str | None, str | None] | None,
        tool_names: Sequence[str],
        *,
        emulated_call: bool = False,
    ) -> None:
        self.emulated_call = emulated_call
        """True when the text answer is a JSON tool call (``forced_tool_mode``): not streamed
        as text, parsed into one ``ToolCall`` at the end."""
        self.model_id = model_id
        self.price_key = price_key
        self.tool_names = tool_names
        self.timer = Timer()
        self.text = ""
        self.text_id: str | None = None
        self.thinking = ""
        self.thinking_id: str | None = None
        self.last: str | None = None  # "text" | "thinking": the output streamed last
        self.calls: list[_Call] = []
        self.by_index: dict[Any, _Call] = {}
        self.usage = UsageReport()
        self.finish_reason: str | None = None
        self.refusal = ""
        self.fingerprint: str | None = None
        self.done = False

    # -- events ----------------------------------------------------------------------------

    def feed(self, ev: SseEvent) -> list[ModelStream] | None:
        """Items for one event. Raises ``WireError`` for malformed data."""
        data = ev.data
        if ev.event == "json":
            return self._whole(data)
        if data == "[DONE]":
            self.done = True
            return None
        if not data:
            return None
        chunk = _decode_chunk(data, "stream event")
        out: list[ModelStream] | None = None
        if chunk.system_fingerprint:
            self.fingerprint = chunk.system_fingerprint
        if chunk.usage is not None:
            self._set_usage(chunk.usage)
            out = [Stream.Pending(ModelState.GeneratingTokens(self.usage))]
        if chunk.choices:
            for choice in chunk.choices:
                if choice.index != 0:
                    continue  # n > 1 is not requested; only the first choice is read
                if choice.finish_reason:
                    self.finish_reason = choice.finish_reason
                d = choice.delta or choice.message
                if d is None:
                    continue
                item = self._delta(d)
                if item is not None:
                    if out is None:
                        out = [item]
                    else:
                        out.append(item)
        return out

    def _msg(
        self, content: Any, msg_id: str, stop: StopReason = StopReason.STOP, meta: Any = None
    ) -> ModelStream:
        return Stream.Next(
            AssistantMessage(
                id=msg_id,
                model=self.model_id,
                content=content,
                usage=self.usage,
                stop_reason=stop,
                provider=ModelProviders.OpenAI,
                metadata=meta,
            )
        )

    def _delta(self, d: _Delta) -> ModelStream | None:
        item = None
        if d.reasoning_content:
            self.timer.first()
            self.thinking += d.reasoning_content
            if self.thinking_id is None:
                self.thinking_id = new_scru128()
            self.last = "thinking"
            item = self._msg(ThinkingContent(self.thinking), self.thinking_id)
        content = d.content
        if content:
            if not isinstance(content, str):  # a list of parts (some compatible servers)
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            self.timer.first()
            self.text += content
            if self.emulated_call:
                return item
            if self.text_id is None:
                self.text_id = new_scru128()
            self.last = "text"
            item = self._msg(TextContent(self.text), self.text_id)
        if d.refusal:
            self.refusal += d.refusal
        if d.tool_calls:
            self.timer.first()
            for tc in d.tool_calls:
                self._tool_fragment(tc)
        return item

    def _tool_fragment(self, tc: _ToolDelta) -> None:
        fn = tc.function
        name = (fn.name or "") if fn is not None else ""
        args = fn.arguments if fn is not None else None
        key = _index_key(tc.index)
        cur = self.by_index.get(key) if key is not None else (self.calls[-1] if self.calls else None)
        new = cur is None
        if not new and tc.id and cur is not None and cur.id and tc.id != cur.id:
            new = True  # C07: a new id at a used index starts a new call
        if not new and isinstance(args, dict) and cur is not None and (cur.args_obj is not None or cur.parts):
            new = True  # C11: a complete object after the current call's arguments: another call
        if new:
            cur = _Call(tc.id, name)
            self.calls.append(cur)
            if key is not None:
                self.by_index[key] = cur
        else:
            assert cur is not None
            if tc.id and not cur.id:
                cur.id = tc.id
            if name and name != cur.name:
                cur.name += name  # streamed in pieces; concatenated repeats are split in _calls()
        if isinstance(args, dict):
            cur.args_obj = args
        elif isinstance(args, str):
            if args:
                cur.parts.append(args)
        elif args is not None:
            cur.parts.append(msgspec.json.encode(args).decode())

    def _set_usage(self, u: _Usage) -> None:
        prompt = u.prompt_tokens or 0.0
        cached = (u.prompt_tokens_details.cached_tokens or 0.0) if u.prompt_tokens_details else 0.0
        output = u.completion_tokens or 0.0
        total = u.total_tokens if u.total_tokens is not None else prompt + output
        report = UsageReport(
            input=max(prompt - cached, 0.0), output=output, cache_read=cached, total_tokens=total
        )
        self.usage = priced(self.model_id.name(), report, self.price_key)

    def _whole(self, data: str) -> list[ModelStream] | None:
        """A non-streamed ``chat.completion`` answer (a server that ignored ``stream``)."""
        chunk = _decode_chunk(data, "response")
        for choice in chunk.choices or []:
            if choice.index == 0 and choice.message is not None and choice.message.tool_calls:
                for i, tc in enumerate(choice.message.tool_calls):
                    if tc.index is None:
                        tc.index = i
        out = self.feed(SseEvent("message", data))
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
                stop = StopReason.TOOL_USE  # C11: "stop" although tools were called
        if fr == "content_filter":
            meta.append(GenerationMetadata.RefusalReason(reason="content_filter"))
        if self.refusal:
            meta.append(GenerationMetadata.RefusalReason(reason=self.refusal))
        if self.fingerprint:
            meta.append(GenerationMetadata.SystemFingerprint(value=self.fingerprint))
        meta.append(self.timer.metadata(self.usage.output or None))
        return stop, meta

    def _tool_calls(self) -> list[ToolCall]:
        out: list[ToolCall] = []
        seen: set[str] = set()
        for c in self.calls:
            if c.args_obj is not None:
                parsed: list[tuple[dict[str, Any] | None, str | None]] = [(c.args_obj, None)]
                if c.parts:  # an object plus string fragments: keep the text as received
                    parsed = [(None, msgspec.json.encode(c.args_obj).decode() + "".join(c.parts))]
                names = [c.name]
            else:
                args, raw, many = _parse_args("".join(c.parts))
                if many is not None:  # C12: several calls glued together at one index
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
                cid = c.id if (i == 0 and c.id and c.id not in seen) else new_call_id()  # C41, C43
                seen.add(cid)
                out.append(ToolCall(id=cid, name=names[i], arguments=args, raw_arguments=raw))
        return out

    def _emulated_call(self) -> ToolCall:
        """The JSON answer of ``forced_tool_mode="json_schema"`` as one call (arguments ``None``
        and the text in ``raw_arguments`` when it is not the expected object)."""
        try:
            doc = msgspec.json.decode(self.text)
        except msgspec.DecodeError:
            doc = None
        name = doc.get("name") if isinstance(doc, dict) else None
        args = doc.get("arguments") if isinstance(doc, dict) else None
        if not isinstance(name, str):
            name = self.tool_names[0] if len(self.tool_names) == 1 else ""
        if isinstance(args, dict):
            return ToolCall(id=new_call_id(), name=name, arguments=args)
        return ToolCall(id=new_call_id(), name=name, arguments=None, raw_arguments=self.text)

    def finish(self) -> list[ModelStream]:
        """The final items of a stream that ended normally (or an error if it ended early)."""
        if self.finish_reason is None and not self.done:
            return self.fail("stream ended before completion (no finish_reason and no [DONE])")
        calls = self._tool_calls()
        if self.emulated_call and not calls:
            calls = [self._emulated_call()]
        stop, meta = self._stop(bool(calls))
        out: list[ModelStream] = []
        if calls:
            for tc in calls:
                out.append(self._msg(tc, new_scru128(), stop, meta))
        elif self.last == "thinking" and self.thinking_id is not None:
            out.append(self._msg(ThinkingContent(self.thinking), self.thinking_id, stop, meta))
        else:
            out.append(self._msg(TextContent(self.text), self.text_id or new_scru128(), stop, meta))
        out.append(Stream.Pending(ModelState.Finished()))
        return out

    def fail(self, detail: str) -> list[ModelStream]:
        """The error tail (partial output already streamed stays valid)."""
        return error_items(detail, self.model_id, ModelProviders.OpenAI, self.usage)
