"""The shared HTTP layer (backends/_http/) against the loopback fixture server."""

from __future__ import annotations

import asyncio
import http.server
import json
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, ClassVar

import httpx2
import pytest

from foundation_ai import AgentSession, Messages
from foundation_ai.backends import anthropic, openai_chat, openai_responses
from foundation_ai.backends._http import (
    HttpOptions,
    HttpStreamError,
    Timer,
    astream_events,
    error_text,
    join_url,
    redact,
    resolve_api_key,
    retry_delay,
    stream_events,
)
from foundation_ai.errors import ConfigurationError, TurnFailedError
from foundation_ai.types import (
    AssistantMessage,
    GenerationMetadata,
    ModelInteraction,
    ModelState,
    StopReason,
    Stream,
    TextContent,
)

try:
    from tests._fixture_server import Canned, FixtureServer, sse
except ImportError:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from _fixture_server import Canned, FixtureServer, sse  # type: ignore[no-redef]

KEY = "sk-test-SECRET-0123456789"


@pytest.fixture
def srv() -> FixtureServer:
    with FixtureServer() as s:
        yield s


def opts(srv: FixtureServer, **kw: object) -> HttpOptions:
    base = dict(api_key=KEY, base_url=srv.base_url, max_retries=2, retry_base_delay=0.01, timeout=10.0)
    base.update(kw)
    return HttpOptions(**base)  # type: ignore[arg-type]


def events(o: HttpOptions, url: str) -> list[tuple[str, str]]:
    return [(e.event, e.data) for e in stream_events(o, url, {"x": 1}, {"Authorization": f"Bearer {KEY}"})]


def test_events_and_request_body(srv: FixtureServer) -> None:
    srv.queue(Canned(chunks=sse([{"a": 1}, "[DONE]"])))
    got = events(opts(srv), srv.base_url + "/v1/x")
    assert got == [("message", '{"a":1}'), ("message", "[DONE]")]
    assert srv.requests[0].json() == {"x": 1}
    assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_async_events_named(srv: FixtureServer) -> None:
    srv.queue(Canned(chunks=[b"event: ping\ndata: {}\n\n", b"data: 2\n\n"]))
    o = opts(srv)
    got = [(e.event, e.data) async for e in astream_events(o, srv.base_url + "/x", b"{}", {})]
    assert got == [("ping", "{}"), ("message", "2")]


def test_json_answer_is_one_event(srv: FixtureServer) -> None:
    srv.queue(Canned(body=b'{"id":"c"}', content_type="application/json"))
    assert events(opts(srv), srv.base_url + "/x") == [("json", '{"id":"c"}')]


def test_retry_on_429_honours_retry_after(srv: FixtureServer) -> None:
    srv.queue(
        Canned(status=429, headers={"Retry-After": "0"}, body=b'{"error":{"message":"slow down"}}'),
        Canned(status=503, headers={"retry-after-ms": "10"}, body=b"busy"),
        Canned(chunks=sse(["ok"])),
    )
    assert events(opts(srv), srv.base_url + "/x") == [("message", "ok")]
    assert len(srv.requests) == 3


async def test_retries_exhausted_gives_last_error(srv: FixtureServer) -> None:
    srv.queue(Canned(status=500, body=b'{"error":{"message":"boom","type":"server_error"}}'))
    o = opts(srv, max_retries=1)
    with pytest.raises(HttpStreamError) as ei:
        _ = [e async for e in astream_events(o, srv.base_url + "/x", b"{}", {})]
    assert ei.value.status_code == 500
    assert "boom" in ei.value.detail and "HTTP 500" in ei.value.detail
    assert len(srv.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403])
def test_no_retry_on_client_and_auth_errors(srv: FixtureServer, status: int) -> None:
    body = f'{{"error":{{"message":"Incorrect API key provided: {KEY}","code":"invalid_api_key"}}}}'
    srv.queue(Canned(status=status, body=body.encode()))
    with pytest.raises(HttpStreamError) as ei:
        events(opts(srv), srv.base_url + "/x")
    assert len(srv.requests) == 1
    assert KEY not in ei.value.detail and KEY not in str(ei.value) and KEY not in repr(ei.value)
    assert "invalid_api_key" in ei.value.detail


def test_no_retry_after_first_event(srv: FixtureServer) -> None:
    srv.queue(Canned(chunks=sse([{"a": 1}, {"a": 2}]), drop_after=1), Canned(chunks=sse(["never"])))
    got: list[str] = []
    with pytest.raises(HttpStreamError) as ei:
        for e in stream_events(opts(srv), srv.base_url + "/x", b"{}", {}):
            got.append(e.data)
    assert got == ['{"a":1}']
    assert "dropped mid-stream" in ei.value.detail
    assert len(srv.requests) == 1


def test_connection_refused_retried_then_error() -> None:
    with FixtureServer() as s:
        url = s.base_url
    o = HttpOptions(api_key=KEY, base_url=url, max_retries=1, retry_base_delay=0.01)
    with pytest.raises(HttpStreamError) as ei:
        list(stream_events(o, url + "/x", b"{}", {}))
    assert "connection failed" in ei.value.detail


def test_wrong_content_type_is_error(srv: FixtureServer) -> None:
    srv.queue(Canned(body=b"<html>", content_type="text/html"))
    with pytest.raises(HttpStreamError, match="unexpected content type"):
        events(opts(srv), srv.base_url + "/x")


def test_error_text_shapes() -> None:
    openai = b'{"error":{"message":"This model\'s maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}'
    t = error_text(400, openai)
    assert t.startswith("This model's maximum context length is 8192 tokens.")
    assert "code: context_length_exceeded" in t and "HTTP 400" in t
    anthropic = b'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}'
    assert error_text(400, anthropic).startswith("prompt is too long: 213462 tokens")
    assert error_text(413, b"") == "413 status code (no body)"
    assert error_text(502, b"Bad gateway") == "Bad gateway (HTTP 502)"


def test_key_resolution_and_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAI_TEST_KEY", KEY)
    assert resolve_api_key(None, "FAI_TEST_KEY", required=True) == KEY
    assert resolve_api_key("given", "FAI_TEST_KEY", required=True) == "given"
    monkeypatch.delenv("FAI_TEST_KEY")
    with pytest.raises(ConfigurationError, match="FAI_TEST_KEY"):
        resolve_api_key(None, "FAI_TEST_KEY", required=True)
    assert resolve_api_key(None, "FAI_TEST_KEY", required=False) is None
    assert redact(f"Bearer {KEY} x", KEY) == "Bearer *** x"
    o = HttpOptions(api_key=KEY, base_url="http://127.0.0.1:1")
    assert KEY not in repr(o) and "***" in repr(o)


def test_retry_delay_rules() -> None:
    o = HttpOptions(api_key=None, base_url="http://127.0.0.1:1", retry_base_delay=1.0, max_retry_delay=5.0)
    assert retry_delay(0, httpx2.Headers({"retry-after": "3"}), o) == 3.0
    assert retry_delay(0, httpx2.Headers({"retry-after": "300"}), o) == 5.0
    assert retry_delay(0, httpx2.Headers({"retry-after-ms": "250"}), o) == 0.25
    assert 0.75 <= retry_delay(0, None, o) <= 1.25
    assert 1.5 <= retry_delay(1, None, o) <= 2.5
    assert retry_delay(9, None, o) == 5.0


def test_join_url_v1() -> None:
    for base in ("http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/"):
        assert join_url(base, "/chat/completions", version_prefix="/v1") == "http://h:1/v1/chat/completions"
    assert join_url("https://openrouter.ai/api/v1", "/chat/completions", version_prefix="/v1").endswith(
        "/api/v1/chat/completions"
    )


def test_timer_metadata() -> None:
    t = Timer()
    t.start()
    time.sleep(0.01)
    t.first()
    time.sleep(0.01)
    m = t.metadata(10)
    assert isinstance(m, GenerationMetadata.Timing)
    assert m.time_to_first_token is not None and m.time_to_first_token > 0
    assert m.tokens_per_second is not None and m.tokens_per_second > 0
    assert m.duration is not None and m.duration >= m.time_to_first_token


def test_drop_before_first_event_is_retried(srv: FixtureServer) -> None:
    srv.queue(Canned(chunks=sse(["never"]), drop_after=0), Canned(chunks=sse(["ok"])))
    assert events(opts(srv), srv.base_url + "/x") == [("message", "ok")]
    assert len(srv.requests) == 2


async def test_async_no_retry_after_first_event(srv: FixtureServer) -> None:
    srv.queue(Canned(chunks=sse(["one", "two"]), drop_after=1), Canned(chunks=sse(["never"])))
    got: list[str] = []
    with pytest.raises(HttpStreamError, match="dropped mid-stream"):
        async for e in astream_events(opts(srv), srv.base_url + "/x", b"{}", {}):
            got.append(e.data)
    assert got == ["one"] and len(srv.requests) == 1


# --------------------------------------------------------------------------------------------
# regressions from the tester's report (defects 1-4)

_BACKENDS: dict[str, Callable[..., Any]] = {
    "openai_chat": lambda **kw: openai_chat("gpt-4o-mini", base_url="http://127.0.0.1:1/v1", **kw),
    "anthropic": lambda **kw: anthropic("claude-x", base_url="http://127.0.0.1:1", **kw),
    "openai_responses": lambda **kw: openai_responses("gpt-4o", base_url="http://127.0.0.1:1/v1", **kw),
}


def _assistant(m: object) -> AssistantMessage:
    assert isinstance(m, AssistantMessage), m
    return m


def _echo_401(calls: list[httpx2.Request]) -> httpx2.MockTransport:
    """A transport that records each request and answers 401 with the request's headers in the
    message (a server echoing a credential back)."""

    def handler(req: httpx2.Request) -> httpx2.Response:
        calls.append(req)
        echo = "; ".join(f"{k}={v}" for k, v in req.headers.items())
        return httpx2.Response(401, json={"error": {"message": f"from-mock {echo}", "type": "auth"}})

    return httpx2.MockTransport(handler)


@pytest.mark.parametrize("streaming", [True, False])
@pytest.mark.parametrize("kind", ["Client", "AsyncClient", "both"])
@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("backend", sorted(_BACKENDS))
async def test_single_http_client_serves_both_paths(
    backend: str, path: str, kind: str, streaming: bool
) -> None:
    """Defect 1: a caller's client is never bypassed. base_url is 127.0.0.1:1, so a connection of
    our own would fail with "connection failed"; the mock's answer proves its client was used."""
    calls: list[httpx2.Request] = []
    sync_c = httpx2.Client(transport=_echo_401(calls))
    async_c = httpx2.AsyncClient(transport=_echo_401(calls))
    client: object = {"Client": sync_c, "AsyncClient": async_c, "both": (sync_c, async_c)}[kind]
    m = _BACKENDS[backend](api_key=KEY, http_client=client, streaming=streaming, max_retries=0)
    inter = ModelInteraction(messages=[Messages.user("hi")])
    if path == "sync":
        out = await asyncio.to_thread(m.generate, inter)
    else:
        out = await m.agenerate(inter)
    last = out[-1]
    assert isinstance(last, AssistantMessage) and isinstance(last.stop_reason, StopReason.Error)
    assert last.error_detail is not None and last.error_detail.startswith("from-mock"), last.error_detail
    assert len(calls) == 1 and calls[0].url.host == "127.0.0.1"
    assert m.options._own_sync is None and not m.options._own_async  # no client of our own
    assert KEY not in last.error_detail


@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
def test_agent_session_uses_the_only_client(kind: str) -> None:
    """Defect 1 as the tester met it: AgentSession (async path) with only an httpx2.Client."""
    calls: list[httpx2.Request] = []
    client: httpx2.Client | httpx2.AsyncClient = (
        httpx2.Client(transport=_echo_401(calls))
        if kind == "Client"
        else httpx2.AsyncClient(transport=_echo_401(calls))
    )
    m = anthropic("claude-x", api_key=KEY, http_client=client, base_url="http://127.0.0.1:1", max_retries=0)
    with pytest.raises(TurnFailedError) as caught:  # run_turn raises on a failed turn
        AgentSession.builder(m).build().run_turn("hi")
    turn = caught.value.turn
    assert calls, "the caller's client was bypassed"
    assert "from-mock" in str(turn.error)


async def test_sync_client_from_async_closes_stream_early() -> None:
    """Breaking out of the async iteration over a sync-only client closes the sync stream."""
    body = b'data: {"a":1}\n\ndata: {"a":2}\n\ndata: [DONE]\n\n'
    client = httpx2.Client(
        transport=httpx2.MockTransport(
            lambda r: httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})
        )
    )
    o = HttpOptions(api_key=None, base_url="http://127.0.0.1:1", sync_client=client)
    agen = astream_events(o, "http://127.0.0.1:1/x", b"{}", {})
    first = await agen.__anext__()
    await agen.aclose()  # type: ignore[attr-defined]
    assert first.data == '{"a":1}'


_BAD_WAITS = ["NaN", "nan", "inf", "-inf", "Infinity", "-5", "1e400", "garbage", ""]


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
@pytest.mark.parametrize("value", _BAD_WAITS)
def test_retry_delay_invalid_header_falls_back(header: str, value: str) -> None:
    """Defect 2: NaN / inf / negative / garbage waits fall back to the normal backoff."""
    o = HttpOptions(api_key=None, base_url="http://127.0.0.1:1", retry_base_delay=1.0, max_retry_delay=5.0)
    d = retry_delay(0, httpx2.Headers({header: value}), o)
    assert math.isfinite(d) and 0.75 <= d <= 1.25


@pytest.mark.parametrize("header,value", [("retry-after", "1e300"), ("retry-after-ms", "99999999999999")])
def test_retry_delay_huge_header_is_capped(header: str, value: str) -> None:
    o = HttpOptions(api_key=None, base_url="http://127.0.0.1:1", max_retry_delay=5.0)
    assert retry_delay(0, httpx2.Headers({header: value}), o) == 5.0


def test_retry_delay_bad_options_stay_finite() -> None:
    o = HttpOptions(
        api_key=None, base_url="http://127.0.0.1:1", retry_base_delay=math.nan, max_retry_delay=math.inf
    )
    for attempt in (0, 5, 10_000):
        d = retry_delay(attempt, None, o)
        assert math.isfinite(d) and 0.0 <= d <= 60.0


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
@pytest.mark.parametrize("value", ["NaN", "inf", "-1"])
@pytest.mark.parametrize("backend", sorted(_BACKENDS))
async def test_nan_retry_after_does_not_crash(backend: str, header: str, value: str) -> None:
    """Defect 2 end to end: a 503 with a NaN wait is retried (backoff), then the 401 is reported."""
    calls: list[httpx2.Request] = []

    def handler(req: httpx2.Request) -> httpx2.Response:
        calls.append(req)
        if len(calls) % 2 == 1:  # each generate: first a 503, then the 401
            return httpx2.Response(503, headers={header: value}, json={"error": {"message": "busy"}})
        return httpx2.Response(401, json={"error": {"message": "second answer"}})

    for client in (
        httpx2.Client(transport=httpx2.MockTransport(handler)),
        httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    ):
        calls.clear()
        m = _BACKENDS[backend](api_key=KEY, http_client=client, max_retries=1, retry_base_delay=0.001)
        inter = ModelInteraction(messages=[Messages.user("hi")])
        for out in (await asyncio.to_thread(m.generate, inter), await m.agenerate(inter)):
            last = out[-1]
            assert isinstance(last, AssistantMessage)
            assert last.error_detail is not None and last.error_detail.startswith("second answer")
        assert len(calls) == 4


_AZ = "az-SECRET-key-0001"
_TOK = "tok-SECRET-0002"
_PW = "pw-SECRET-0003"


def test_options_secrets_and_repr() -> None:
    """Defect 3: credential-like header values and base-URL userinfo are secrets; repr hides them."""
    o = HttpOptions(
        api_key=KEY,
        base_url=f"http://alice:{_PW}@127.0.0.1:1/v1",
        headers={"api-key": _AZ, "X-Auth-Token": _TOK, "anthropic-beta": "tools-2024"},
    )
    secrets = o.secrets()
    for s in (KEY, _AZ, _TOK, _PW):
        assert s in secrets
    assert "tools-2024" not in secrets
    r = repr(o)
    assert "SECRET" not in r and "alice" not in r and "127.0.0.1:1/v1" in r
    assert o.redact(f"x {_AZ} y Bearer {_TOK} alice:{_PW}") == "x *** y Bearer *** ***"


@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
@pytest.mark.parametrize("backend", sorted(_BACKENDS))
def test_echoed_custom_header_secret_is_masked(backend: str, kind: str) -> None:
    """Defect 3: a server echoing every request header (Azure ``api-key``, a token header, the
    Basic auth httpx derives from ``user:password@`` in the base URL) leaks none of them."""
    calls: list[httpx2.Request] = []
    client: httpx2.Client | httpx2.AsyncClient = (
        httpx2.Client(transport=_echo_401(calls))
        if kind == "Client"
        else httpx2.AsyncClient(transport=_echo_401(calls))
    )
    base = {"openai_chat": "/v1", "anthropic": "", "openai_responses": "/v1"}[backend]
    factories: dict[str, Callable[..., Any]] = {
        "openai_chat": openai_chat,
        "anthropic": anthropic,
        "openai_responses": openai_responses,
    }
    factory = factories[backend]
    m = factory(
        "some-model",
        api_key=KEY,
        base_url=f"http://alice:{_PW}@127.0.0.1:1{base}",
        headers={"api-key": _AZ, "x-auth-token": _TOK},
        http_client=client,
        max_retries=0,
    )
    assert "SECRET" not in repr(m) and "alice" not in repr(m)
    attrs = repr(vars(m))  # no attribute holds the key or a header secret in clear
    assert KEY not in attrs and _AZ not in attrs and _TOK not in attrs
    out = m.generate(ModelInteraction(messages=[Messages.user("hi")]))
    detail = _assistant(out[-1]).error_detail
    assert detail is not None and detail.startswith("from-mock") and calls
    assert _AZ in calls[0].headers.values()  # the header was really sent (and echoed)
    for s in (KEY, _AZ, _TOK, _PW):
        assert s not in detail
    basic = calls[0].headers.get("authorization", "")
    if basic.startswith("Basic "):
        assert basic.split()[1] not in detail


def test_connection_error_text_masks_url_password() -> None:
    """Defect 3: a connection failure to ``user:password@host`` never shows the password."""
    m = openai_chat("m", api_key=KEY, base_url=f"http://alice:{_PW}@127.0.0.1:1/v1", max_retries=0)
    detail = _assistant(m.generate(ModelInteraction(messages=[Messages.user("hi")]))[-1]).error_detail
    assert detail is not None and "connection failed" in detail and _PW not in detail


def test_openai_chat_max_retry_delay() -> None:
    """Defect 4: openai_chat takes ``max_retry_delay`` like the other HTTP backends."""
    m = openai_chat("m", base_url="http://127.0.0.1:1/v1", max_retry_delay=0.5)
    assert m.options.max_retry_delay == 0.5
    assert retry_delay(0, httpx2.Headers({"retry-after": "30"}), m.options) == 0.5


# --------------------------------------------------------------------------------------------
# defect 5: a stream dropped mid-answer


def _sse(d: object, name: str | None = None) -> bytes:
    return ((f"event: {name}\n" if name else "") + f"data: {json.dumps(d)}\n\n").encode()


_PARTIAL = {
    "openai_chat": [
        _sse(
            {
                "id": "c1",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": "Hello"}}],
            }
        ),
        _sse(
            {
                "id": "c1",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": " wor"}}],
            }
        ),
    ],
    "anthropic": [
        _sse(
            {
                "type": "message_start",
                "message": {
                    "id": "m1",
                    "type": "message",
                    "role": "assistant",
                    "model": "c",
                    "content": [],
                    "usage": {"input_tokens": 5, "output_tokens": 1},
                },
            },
            "message_start",
        ),
        _sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        ),
        _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello wor"}},
            "content_block_delta",
        ),
    ],
    "openai_responses": [
        _sse(
            {"type": "response.created", "response": {"id": "r1", "status": "in_progress", "output": []}},
            "response.created",
        ),
        _sse(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "message", "id": "msg1", "role": "assistant", "content": []},
            },
            "response.output_item.added",
        ),
        _sse(
            {
                "type": "response.output_text.delta",
                "output_index": 0,
                "content_index": 0,
                "item_id": "msg1",
                "delta": "Hello wor",
            },
            "response.output_text.delta",
        ),
    ],
}


class _DropAfter(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """Sends ``chunks`` then fails like a peer closing the connection."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        raise httpx2.ReadError("peer closed connection")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c
        raise httpx2.ReadError("peer closed connection")


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("backend", sorted(_BACKENDS))
async def test_dropped_stream_keeps_partial_then_error_last(backend: str, path: str) -> None:
    """Defect 5 (kept as the contract in backends/base.py rule 4 says): the partial text stays
    (its id unchanged), the error message follows it immediately with a fresh id, the stream ends
    with ``ModelState.Error`` and the assembled answer has the error LAST. The partial chunk keeps
    the in-progress placeholder stop reason: the agent loop treats any ``StopReason.Error``
    message as the failure itself, so relabelling the partial would drop its text."""

    def handler(req: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_DropAfter(_PARTIAL[backend])
        )

    transport = httpx2.MockTransport(handler)
    client: httpx2.Client | httpx2.AsyncClient = (
        httpx2.Client(transport=transport) if path == "sync" else httpx2.AsyncClient(transport=transport)
    )
    m = _BACKENDS[backend](api_key=KEY, http_client=client, max_retries=0)
    inter = ModelInteraction(messages=[Messages.user("hi")])
    if path == "sync":
        items = await asyncio.to_thread(lambda: list(m.stream(inter)))
        out = await asyncio.to_thread(m.generate, inter)
    else:
        items = [i async for i in m.astream(inter)]
        out = await m.agenerate(inter)
    nexts = [i.value for i in items if isinstance(i, Stream.Next)]
    assert isinstance(items[-1], Stream.Pending) and isinstance(items[-1].value, ModelState.Error)
    assert "connection dropped mid-stream" in items[-1].value.message
    err = nexts[-1]
    assert isinstance(err.stop_reason, StopReason.Error) and err.content == TextContent("")
    assert err.error_detail is not None and "connection dropped mid-stream" in err.error_detail
    partial = nexts[-2]
    assert partial.content == TextContent("Hello wor") and partial.id != err.id
    assert not isinstance(partial.stop_reason, StopReason.Error)
    msgs = [_assistant(o) for o in out]
    assert [type(o.content).__name__ for o in msgs] == ["TextContent", "TextContent"]
    assert msgs[0].content == TextContent("Hello wor")
    assert isinstance(msgs[-1].stop_reason, StopReason.Error)


class _KeepAliveHandler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive: one JSON answer per POST, the connection left open."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.seen.append(self.headers.get("connection", ""))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_async_client_from_sync_calls_against_keep_alive_server() -> None:
    """Defect 1 follow-up: a real ``httpx2.AsyncClient`` (only) driven by repeated sync calls, each
    on a fresh private loop, against a keep-alive server: no pooled connection is left bound to a
    closed loop ("Event loop is closed" on the next call)."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeepAliveHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    _KeepAliveHandler.seen.clear()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1/x"
        o = HttpOptions(api_key=None, base_url=url, async_client=httpx2.AsyncClient(), max_retries=0)
        for _ in range(3):
            assert [(e.event, e.data) for e in stream_events(o, url, {"x": 1}, {})] == [
                ("json", '{"ok": true}')
            ]
        assert _KeepAliveHandler.seen == ["close"] * 3
        assert o._own_sync is None
    finally:
        srv.shutdown()
        srv.server_close()


class _BlockingStream(httpx2.SyncByteStream):
    """One SSE event, then a read that blocks until ``release`` is set; records ``close``."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.closed = threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        yield b"data: 1\n\n"
        self.release.wait()
        yield b"data: 2\n\n"

    def close(self) -> None:
        self.closed.set()


async def test_cancel_async_over_sync_client_does_not_wait_for_blocked_read() -> None:
    """Cancelling the async iteration over a sync-only client while its read is blocked returns
    without waiting for that read; the stream is closed once the read ends."""
    body = _BlockingStream()
    client = httpx2.Client(
        transport=httpx2.MockTransport(
            lambda r: httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=body)
        )
    )
    o = HttpOptions(api_key=None, base_url="http://127.0.0.1:1", sync_client=client, max_retries=0)
    got: list[str] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for ev in astream_events(o, "http://127.0.0.1:1/x", b"{}", {}):
            got.append(ev.data)
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    await asyncio.sleep(0.05)  # let the next (blocking) read start in its thread
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert got == ["1"] and not body.release.is_set()  # we did not wait for the blocked read
    body.release.set()
    assert await asyncio.to_thread(body.closed.wait, 10.0)  # closed in the background


def test_a_retry_after_beyond_max_retry_delay_ends_the_retries_at_once(srv: FixtureServer) -> None:
    srv.queue(Canned(status=429, headers={"Retry-After": "3600"}, body=b'{"error":{"message":"quota"}}'))
    with pytest.raises(HttpStreamError) as caught:
        events(opts(srv, max_retry_delay=5.0), srv.base_url + "/v1/x")
    assert caught.value.status_code == 429 and "quota" in caught.value.detail
    assert len(srv.requests) == 1, "no retry when the server asks for more than max_retry_delay"
    with FixtureServer() as other:  # within the cap it is honoured as before
        other.queue(
            Canned(status=429, headers={"Retry-After": "0.05"}, body=b'{"error":{"message":"quota"}}')
        )
        other.queue(Canned(chunks=sse([{"a": 1}, "[DONE]"])))
        assert events(opts(other, max_retry_delay=5.0), other.base_url + "/v1/x")[0] == ("message", '{"a":1}')
        assert len(other.requests) == 2


def test_a_long_retry_after_hands_the_turn_to_the_fallback_model_at_once(srv: FixtureServer) -> None:
    from foundation_ai.agentic import InMemorySessionStore, ScriptedModel, say

    srv.queue(Canned(status=429, headers={"Retry-After": "3600"}, body=b'{"error":{"message":"quota"}}'))
    primary = openai_chat("gpt-x", base_url=srv.base_url + "/v1", api_key=KEY, max_retries=3)
    agent = (
        AgentSession.builder(primary)
        .with_fallback_models(ScriptedModel([say("from the fallback")]))
        .with_store(InMemorySessionStore())
        .build()
    )
    assert agent.run_turn("hi").text() == "from the fallback"
    assert len(srv.requests) == 1
