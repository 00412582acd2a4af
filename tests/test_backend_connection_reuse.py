"""The async path of the HTTP backends keeps its connection between requests: a stream is read
to its end (past OpenAI's ``data: [DONE]``, for a bounded time) so the pooled keep-alive
connection goes back to the pool instead of being closed and opened again on the next turn.

The server is a real HTTP/1.1 keep-alive server on 127.0.0.1 that counts the TCP connections
it accepts."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from foundation_ai.backends import openai_chat
from foundation_ai.types import Messages, ModelInteraction
from tests._backend_helpers import outputs

CHUNKS = [
    {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]},
    {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}},
]  # fmt: skip
BODY = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in CHUNKS) + b"data: [DONE]\n\n"


class _KeepAlive(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        server: Any = self.server
        with server.lock:
            server.connections += 1

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for part in (BODY[:40], BODY[40:]):  # [DONE] and the end of the body in separate writes
            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Any]:
    srv: Any = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeepAlive)
    srv.daemon_threads = True
    srv.lock = threading.Lock()
    srv.connections = 0
    thread = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _ask() -> ModelInteraction:
    return ModelInteraction(messages=[Messages.user("Hi")])


def _text(items: list[Any]) -> str:
    return "".join(m.text() for m in outputs(items))


def test_openai_chat_async_streams_reuse_one_connection(server: Any) -> None:
    model = openai_chat("m", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="k")

    async def three() -> list[str]:
        return [_text([item async for item in model.astream(_ask())]) for _ in range(3)]

    assert asyncio.run(three()) == ["Hi", "Hi", "Hi"]
    assert server.connections == 1
