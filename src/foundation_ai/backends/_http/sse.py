"""Server-sent events from the bytes of a response (:class:`SseDecoder`), per the WHATWG
``text/event-stream`` rules (https://html.spec.whatwg.org/multipage/server-sent-events.html):
lines end with CRLF, LF or CR; a blank line ends an event; ``event`` names it (``"message"`` when
absent), ``data`` lines join with LF, ``id`` and ``retry`` are read and not kept, a line
starting with ``:`` is a comment, one space after a field's colon is dropped; an event not ended
by a blank line when the body ends is dropped.

It works on bytes and decodes each event's text once (UTF-8, bad bytes replaced), with no
per-line ``str`` work: the stream backends read whole chunks through it (several events a chunk),
so the read deadline is armed per chunk rather than per event.
"""

from __future__ import annotations

from httpx2 import SSEError

from .events import SseEvent

__all__ = ["SseDecoder", "check_sse_content_type"]


def check_sse_content_type(content_type: str) -> None:
    """Refuse a response that is not ``text/event-stream``.

    Raises:
        httpx2.SSEError: another content type (read as a malformed event stream).
    """
    kind = content_type.partition(";")[0].strip().lower()
    if kind != "text/event-stream":
        raise SSEError(f"Expected response with content type 'text/event-stream', got {kind!r}.")


class SseDecoder:
    """Feeds of bytes in, completed :class:`~.events.SseEvent` items out.

    ``max_event_size``: the most bytes of one event's lines (and of a line not yet ended);
    more raises ``httpx2.SSEError``.
    """

    __slots__ = ("_cr", "_data", "_event", "_max", "_parts", "_pending", "_size")

    def __init__(self, max_event_size: int) -> None:
        self._max = max_event_size
        self._parts: list[bytes] = []  # the line not ended yet
        self._cr = False  # the last feed ended with CR: an LF may follow
        self._event = b""
        self._data: list[bytes] = []
        self._pending = False  # a field of the current event was seen
        self._size = 0  # bytes of the current event's lines

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events ``chunk`` completes (often none, often several).

        Raises:
            httpx2.SSEError: an event larger than ``max_event_size``.
        """
        if self._cr:
            chunk = b"\r" + chunk
            self._cr = False
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                self._cr = True
                chunk = chunk[:-1]
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in chunk:
            if chunk:
                self._parts.append(chunk)
                self._check(sum(map(len, self._parts)))
            return []
        lines = chunk.split(b"\n")
        if self._parts:
            self._parts.append(lines[0])
            lines[0] = b"".join(self._parts)
            self._parts = []
        tail = lines.pop()
        if tail:
            self._parts.append(tail)
        out = self._lines(lines)
        if tail:
            self._check(len(tail))
        return out

    def flush(self) -> list[SseEvent]:
        """The events left when the body ends (those ended by a blank line)."""
        rest = b"".join(self._parts)
        self._parts = []
        lines = rest.split(b"\n") if rest else []
        if self._cr:
            self._cr = False
            lines.append(b"")
        return self._lines(lines)

    def _lines(self, lines: list[bytes]) -> list[SseEvent]:
        out: list[SseEvent] = []
        data = self._data
        for line in lines:
            if not line:
                self._size = 0
                if self._pending:
                    out.append(
                        SseEvent(
                            self._event.decode("utf-8", "replace") or "message",
                            b"\n".join(data).decode("utf-8", "replace"),
                        )
                    )
                    data = self._data = []
                    self._event = b""
                    self._pending = False
                continue
            if line[0] == 58:  # b":": a comment
                continue
            self._size += len(line)
            if self._size > self._max:
                self._check(0)
            if line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
                self._pending = True
                continue
            name, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if name == b"event":
                self._event = value
                self._pending = True
            elif name == b"data":  # "data" without a colon: an empty data line
                data.append(value)
                self._pending = True
            elif name == b"id":
                if b"\0" not in value:
                    self._pending = True
            elif name == b"retry":
                try:
                    int(value)
                except ValueError:
                    continue
                self._pending = True
        return out

    def _check(self, pending: int) -> None:
        if self._size + pending > self._max:
            raise SSEError(f"Server-sent event exceeded the {self._max} byte limit.")
