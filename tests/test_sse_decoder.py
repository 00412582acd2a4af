"""The byte-level server-sent-events decoder of the stream backends (``backends/_http/sse.py``)
gives the events ``httpx2.EventSource`` gives for the same bytes, however they are cut into
chunks: CRLF, LF and CR line ends (a CR at the end of one chunk and the LF at the start of the
next are one line end), comments, multi-line data, event names, ``id`` / ``retry`` only events,
an unterminated last event dropped, the size limit."""

from __future__ import annotations

import asyncio
import random

import httpx2
import pytest

from foundation_ai.backends._http.events import SseEvent
from foundation_ai.backends._http.sse import SseDecoder, check_sse_content_type

STREAMS = [
    b"data: one\n\ndata: two\n\n",
    b"event: ping\r\ndata: {}\r\n\r\nevent: delta\rdata: x\r\r",
    b": a comment\ndata: a\ndata: b\n\n:\n\ndata:no space\n\ndata:  two spaces\n\n",
    b"data\n\nevent: named\n\nid: 7\n\nretry: 10\n\nretry: soon\n\nid: a\x00b\n\n",
    "data: é “q” \U0001f600\n\n".encode() + b"data: \xff bad\n\n",
    b"data: done\n\ndata: never ended",
    b"\n\n\ndata: after blanks\n\nfield: unknown\ndata: kept\n\n",
    b"data: last\n\n\r",
]


def _reference(body: bytes) -> list[SseEvent]:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    async def read() -> list[SseEvent]:
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        async with client, client.stream("GET", "http://sse.invalid/") as resp:
            return [SseEvent(e.event, e.data) async for e in httpx2.EventSource(resp)]

    return asyncio.run(read())


def _decode(chunks: list[bytes], limit: int = 1 << 20) -> list[SseEvent]:
    decoder = SseDecoder(limit)
    out: list[SseEvent] = []
    for c in chunks:
        out += decoder.feed(c)
    return out + decoder.flush()


@pytest.mark.parametrize("body", STREAMS)
def test_every_cut_of_a_stream_gives_the_events_httpx2_gives(body: bytes) -> None:
    want = _reference(body)
    assert want, body
    assert _decode([body]) == want
    for cut in range(len(body) + 1):
        assert _decode([body[:cut], body[cut:]]) == want, cut
    rng = random.Random(7)
    for _ in range(50):
        cuts = sorted(rng.sample(range(len(body) + 1), min(4, len(body))))
        parts = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
        assert _decode(parts) == want, parts


def test_a_few_named_events_and_multi_line_data() -> None:
    assert _decode([b'event: message_start\ndata: {"a":\ndata: 1}\n\n: keep-alive\n\n']) == [
        SseEvent("message_start", '{"a":\n1}')
    ]


def test_an_event_over_the_limit_is_an_sse_error_even_before_its_line_ends() -> None:
    with pytest.raises(httpx2.SSEError, match="exceeded the 16 byte limit"):
        _decode([b"data: 0123456789abcdef\n\n"], limit=16)
    decoder = SseDecoder(16)
    decoder.feed(b"data: 01234")
    with pytest.raises(httpx2.SSEError):
        decoder.feed(b"56789abcdef")  # no line end yet: the pending bytes count
    assert _decode([b"data: 0123456789\n\n"], limit=16) == [SseEvent("message", "0123456789")]


def test_only_text_event_stream_is_read_as_events() -> None:
    check_sse_content_type("text/event-stream; charset=utf-8")
    check_sse_content_type("Text/Event-Stream")
    with pytest.raises(httpx2.SSEError, match="got 'text/plain'"):
        check_sse_content_type("text/plain")
