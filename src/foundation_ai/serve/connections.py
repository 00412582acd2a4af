"""Connection limits uvicorn does not have: a header read timeout, a cap on open connections,
and limits on the size and count of a request's header lines (``docs/serve.md``: Limits).

uvicorn (0.3x) offers ``timeout_keep_alive`` (idle time *between* requests), ``limit_concurrency``
(checked only once a request's headers are complete, so sockets that never finish them are
never refused nor closed) and, for its ``h11`` parser only, ``h11_max_incomplete_event_size``;
its default ``httptools`` parser buffers a header line of any size
(https://www.uvicorn.org/settings/#resource-limits). :func:`guarded_protocol` subclasses the
HTTP protocol uvicorn picks (``uvicorn.protocols.http.auto``) and, before handing bytes to it:

- refuses a connection beyond ``max_connections`` at once: ``503`` (code
  ``too_many_connections``, ``Retry-After: 1``), as nginx's ``limit_conn`` does;
- closes a connection whose request line and headers are not complete ``header_timeout``
  seconds after its first byte (or after it opened): ``408`` (nginx ``client_header_timeout``);
- refuses a request whose line and headers pass ``max_header_bytes`` or ``max_headers`` lines:
  ``431 Request Header Fields Too Large`` (RFC 6585 section 5).

A refusal is a JSON body in the OpenAI error shape with ``Connection: close``; the connection
then stops reading (what arrives is dropped) and is closed a second later, so that the client
reads the answer rather than a reset (nginx's ``lingering_close``).
"""

from __future__ import annotations

import asyncio
import json
import resource
from typing import Any

from .errors import error_body

__all__ = ["default_max_connections", "guarded_protocol"]

_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}
_LINGER = 1.0


def default_max_connections() -> int:
    """2048, or three quarters of the soft ``RLIMIT_NOFILE`` when that is lower (the rest stays
    for the store, the model and the listening socket)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 2048
    return max(8, min(2048, soft * 3 // 4))


def _refusal(status: int, message: str, code: str) -> bytes:
    body = json.dumps(error_body(message, "invalid_request_error", code)).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n"
    )
    if status == 503:
        head += "retry-after: 1\r\n"
    return head.encode() + b"\r\n" + body


def guarded_protocol(limits: Any) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class with the module's limits, for ``uvicorn.Config(http=...)``.

    Args:
        limits: a :class:`~foundation_ai.serve.config.Limits` (``header_timeout`` seconds,
            ``max_connections``, ``max_header_bytes``, ``max_headers``).
    """
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    cap = limits.max_connections if limits.max_connections is not None else default_max_connections()
    timeout = float(limits.header_timeout)
    max_bytes = int(limits.max_header_bytes)
    max_lines = int(limits.max_headers) + 1  # the request line, then one line per header

    class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        """uvicorn's protocol, guarded (see :func:`guarded_protocol`)."""

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._fa_refused = False
            self._fa_timer: asyncio.TimerHandle | None = None
            self._fa_head_start()
            if len(self.connections) > cap:
                self._fa_refuse(503, f"the server has {cap} open connections: retry", "too_many_connections")
                return
            self._fa_arm()

        def _fa_head_start(self) -> None:
            self._fa_in_head = True
            self._fa_bytes = 0
            self._fa_lines = 0
            self._fa_tail = b""

        def _fa_arm(self) -> None:
            self._fa_timer = self.loop.call_later(timeout, self._fa_too_slow)

        def _fa_disarm(self) -> None:
            if self._fa_timer is not None:
                self._fa_timer.cancel()
                self._fa_timer = None

        def _fa_too_slow(self) -> None:
            self._fa_timer = None
            if self._fa_in_head and not self._fa_refused:
                msg = f"the request headers did not arrive within {timeout:g} seconds"
                self._fa_refuse(408, msg, "header_timeout")

        def _fa_refuse(self, status: int, message: str, code: str) -> None:
            self._fa_refused = True
            self._fa_disarm()
            transport = self.transport
            if transport.is_closing():
                return
            transport.write(_refusal(status, message, code))
            if transport.can_write_eof():
                transport.write_eof()
            self.loop.call_later(_LINGER, transport.close)

        def data_received(self, data: bytes) -> None:
            if self._fa_refused:
                return  # lingering: dropped until the close
            if self._fa_in_head and not self._fa_head(data):
                return
            super().data_received(data)

        def _fa_head(self, data: bytes) -> bool:
            """Count ``data`` against the header limits; False when the request is refused."""
            if self._fa_timer is None:  # the next request of a kept-alive connection begins
                self._fa_arm()
            buf = self._fa_tail + data
            ends = [i for i in (buf.find(b"\r\n\r\n"), buf.find(b"\n\n")) if i >= 0]
            head = data if not ends else data[: max(0, min(ends) + 2 - len(self._fa_tail))]
            self._fa_bytes += len(head)
            self._fa_lines += head.count(b"\n")
            if self._fa_bytes > max_bytes or self._fa_lines > max_lines + 1:
                msg = f"the request headers pass {max_bytes} bytes or {max_lines - 1} header lines"
                self._fa_refuse(431, msg, "headers_too_large")
                return False
            if ends:
                self._fa_in_head = False
                self._fa_disarm()
            self._fa_tail = buf[-3:]
            return True

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._fa_head_start()  # the timer starts again with the next request's first byte

        def connection_lost(self, exc: Exception | None) -> None:
            self._fa_disarm()
            super().connection_lost(exc)

    return GuardedHTTPProtocol
