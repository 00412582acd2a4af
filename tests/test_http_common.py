"""The shared HTTP layer (backends/_http.py) against the loopback fixture server."""

from __future__ import annotations

import time

import httpx
import pytest

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
from foundation_ai.errors import ConfigurationError
from foundation_ai.types import GenerationMetadata

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
    assert retry_delay(0, httpx.Headers({"retry-after": "3"}), o) == 3.0
    assert retry_delay(0, httpx.Headers({"retry-after": "300"}), o) == 5.0
    assert retry_delay(0, httpx.Headers({"retry-after-ms": "250"}), o) == 0.25
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
