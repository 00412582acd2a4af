"""A tiny loopback HTTP server replaying canned responses, for wire-fixture tests.

Binds 127.0.0.1 on a free port, in a daemon thread. Each incoming request takes the next queued
:class:`Canned` response (the last one repeats when the queue runs out) and is recorded in
``server.requests`` (method, path, headers, parsed JSON body)::

    from tests._fixture_server import Canned, FixtureServer, sse

    with FixtureServer() as srv:
        srv.queue(Canned(status=429, headers={"Retry-After": "0"}, body=b'{"error":...}'),
                  Canned(chunks=sse([{"id": "c1", ...}, "[DONE]"])))
        model = openai_chat("gpt-4o-mini", base_url=srv.base_url, api_key="sk-test")
        ...
        assert len(srv.requests) == 2

Bodies are sent with ``Transfer-Encoding: chunked``, one HTTP chunk per item of ``chunks``
(``body`` is one chunk). ``drop_after=n`` sends only the first ``n`` chunks and then closes the
socket without the terminating chunk: the client sees a connection dropped mid-stream.
``delay`` (seconds) sleeps before each chunk. Only 127.0.0.1 is ever bound.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

__all__ = ["Canned", "FixtureServer", "RecordedRequest", "sse", "sse_events"]


def sse(items: Iterable[Any], *, event: str | None = None) -> list[bytes]:
    """SSE ``data:`` frames, one per item: a ``str`` is sent verbatim (e.g. ``"[DONE]"``), other
    values as compact JSON. ``event`` adds an ``event:`` line to every frame."""
    out = []
    for item in items:
        data = item if isinstance(item, str) else json.dumps(item, separators=(",", ":"))
        head = f"event: {event}\n" if event else ""
        out.append(f"{head}data: {data}\n\n".encode())
    return out


def sse_events(items: Iterable[tuple[str, Any]]) -> list[bytes]:
    """Named SSE frames (``event: name`` + ``data: json``), e.g. Anthropic's stream."""
    out = []
    for name, data in items:
        text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        out.append(f"event: {name}\ndata: {text}\n\n".encode())
    return out


@dataclass
class Canned:
    """One canned response."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    body: bytes | None = None
    content_type: str = "text/event-stream"
    drop_after: int | None = None
    delay: float = 0.0

    def frames(self) -> list[bytes]:
        return ([self.body] if self.body is not None else []) + list(self.chunks)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class _Handler(socketserver.StreamRequestHandler):
    server: _TCPServer

    def handle(self) -> None:
        line = self.rfile.readline(65537).decode("latin-1").strip()
        if not line:
            return
        method, path, _ = [*line.split(" "), "", ""][:3]
        headers: dict[str, str] = {}
        while True:
            h = self.rfile.readline(65537).decode("latin-1")
            if h in ("\r\n", "\n", ""):
                break
            k, _, v = h.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0") or 0)
        body = self.rfile.read(n) if n else b""
        owner = self.server.owner
        canned = owner._next(RecordedRequest(method, path, headers, body))
        head = [f"HTTP/1.1 {canned.status} X", "Transfer-Encoding: chunked", "Connection: close"]
        hdrs = {"Content-Type": canned.content_type, **canned.headers}
        head += [f"{k}: {v}" for k, v in hdrs.items()]
        sock = self.connection
        try:
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
            frames = canned.frames()
            for i, frame in enumerate(frames):
                if canned.drop_after is not None and i >= canned.drop_after:
                    sock.shutdown(socket.SHUT_RDWR)
                    return
                if canned.delay:
                    time.sleep(canned.delay)
                if frame:
                    sock.sendall(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
            if canned.drop_after is not None and canned.drop_after >= len(frames):
                sock.shutdown(socket.SHUT_RDWR)
                return
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: FixtureServer


class FixtureServer:
    """The loopback server (see the module docstring). Use as a context manager."""

    def __init__(self) -> None:
        self._server = _TCPServer(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._lock = threading.Lock()
        self._queue: list[Canned] = []
        self.requests: list[RecordedRequest] = []
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash, no ``/v1``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def queue(self, *responses: Canned) -> None:
        """Append responses to serve, in order."""
        with self._lock:
            self._queue.extend(responses)

    def _next(self, req: RecordedRequest) -> Canned:
        with self._lock:
            self.requests.append(req)
            if not self._queue:
                return Canned(status=500, body=b'{"error":{"message":"no canned response"}}')
            return self._queue.pop(0) if len(self._queue) > 1 else self._queue[0]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FixtureServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
