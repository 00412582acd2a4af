"""HTTP plumbing shared by the endpoints: authentication, bounded JSON bodies, SSE framing
(https://html.spec.whatwg.org/multipage/server-sent-events.html)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from starlette.requests import Request

from ..types import from_json
from .errors import ApiError, error_body

log = logging.getLogger(__name__)

__all__ = [
    "LOCAL_OWNER",
    "StreamGuard",
    "json_bytes",
    "owner_of",
    "read_json",
    "revoked_sse",
    "sse",
    "sse_data",
    "sse_data_bytes",
    "sse_event_bytes",
    "state_of",
]

LOCAL_OWNER = "local"
"""The key id every request acts as when the server runs with ``no_auth``."""


def state_of(request: Request) -> Any:
    """The server state (``app.state.serve``): manager, config, keys."""
    return request.app.state.serve


def owner_of(request: Request) -> str:
    """The key id of the request's ``Authorization: Bearer`` key.

    Raises:
        ApiError: (401) no key, or an unknown one (with ``no_auth``: never; the owner is
            :data:`LOCAL_OWNER`).
    """
    st = state_of(request)
    if st.config.no_auth:
        return LOCAL_OWNER
    auth = request.headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            401,
            "missing API key: send Authorization: Bearer <key>",
            type="authentication_error",
            code="missing_api_key",
        )
    owner: str | None = st.config.keys.verify(token.strip())
    if owner is None:
        raise ApiError(401, "invalid API key", type="authentication_error", code="invalid_api_key")
    return owner


async def read_json(request: Request) -> dict[str, Any]:
    """The request body as a JSON object, read up to ``limits.max_body_bytes``.

    The body must be declared ``Content-Type: application/json`` (parameters such as
    ``charset=utf-8`` allowed): a browser page of another site can send ``text/plain`` or form
    bodies without a CORS preflight, never ``application/json`` (the Fetch standard's
    CORS-safelisted request headers, https://fetch.spec.whatwg.org/#cors-safelisted-request-header).

    Raises:
        ApiError: (415 ``unsupported_media_type``) another or no content type; (413) the body is
            larger; (400) not JSON, or not an object.
    """
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise ApiError(
            415,
            f"the request body must be sent as Content-Type: application/json, not {media[:60]!r}",
            code="unsupported_media_type",
        )
    cap = state_of(request).config.limits.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise ApiError(413, f"the request body is larger than {cap} bytes", code="body_too_large")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise ApiError(413, f"the request body is larger than {cap} bytes", code="body_too_large")
        chunks.append(chunk)
    try:
        value: Any = from_json(b"".join(chunks) or b"null", Any)  # nesting capped (MAX_NESTING)
    except ValueError:
        raise ApiError(400, "the request body is not valid JSON", code="invalid_json") from None
    if not isinstance(value, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    return value


def sse_data(payload: Any) -> str:
    """One SSE message with only a ``data`` line (Chat Completions framing)."""
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"


def sse(event: str, payload: Any) -> str:
    """One SSE message with ``event`` and ``data`` lines (Responses and sessions framing)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"event: {event}\ndata: {data}\n\n"


_encode = msgspec.json.Encoder().encode


def json_bytes(value: Any) -> bytes:
    """Compact JSON (UTF-8 bytes) of a plain value (``dict``, ``list``, ``str``, numbers,
    ``None``), keys in insertion order, non-ASCII text as UTF-8 rather than ``\\u`` escapes
    (https://jcristharif.com/msgspec/api.html#msgspec.json.Encoder).

    Raises:
        TypeError: a value JSON cannot hold.
    """
    return _encode(value)


def sse_data_bytes(data: bytes) -> bytes:
    """One SSE message with only a ``data`` line, from JSON bytes (a single line)."""
    return b"data: " + data + b"\n\n"


def sse_event_bytes(event: bytes, data: bytes) -> bytes:
    """One SSE message with ``event`` and ``data`` lines, from an event name and JSON bytes."""
    return b"event: " + event + b"\ndata: " + data + b"\n\n"


class StreamGuard:
    """Ends the open streams of a revoked key within :attr:`interval` seconds (and aborts the
    key's running turns): a watcher task checks the keys while any guarded stream is open.

    Args:
        keys: the server's key store (``list()`` gives the valid key ids); ``None`` with
            ``no_auth`` (nothing to revoke: streams pass through unguarded).
        on_revoked: called with a revoked key id (the manager's ``abort_turns_of``).
    """

    interval = 0.25
    """Seconds between two checks of the keys (a revocation reaches open streams within it,
    plus one lookup)."""

    def __init__(self, keys: Any, on_revoked: Any = None) -> None:
        self.keys = keys
        self.on_revoked = on_revoked
        self._open: dict[object, tuple[str, asyncio.Event]] = {}
        self._watcher: asyncio.Task[None] | None = None

    def guard(self, owner: str, body: AsyncIterator[bytes], farewell: bytes) -> AsyncIterator[bytes]:
        """``body``'s chunks until it ends or ``owner``'s key is revoked; then ``farewell`` (an
        SSE error message) and the end. Closing the result closes ``body``. Without keys
        (``no_auth``: nothing to revoke) the result is ``body`` itself (no hop per chunk)."""
        if self.keys is None:
            return body
        return self._guarded(owner, body, farewell)

    async def _guarded(self, owner: str, body: AsyncIterator[bytes], farewell: bytes) -> AsyncIterator[bytes]:
        revoked = asyncio.Event()
        token = object()
        self._open[token] = (owner, revoked)
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch(), name="key-watcher")
        it = body.__aiter__()
        waiter = asyncio.ensure_future(revoked.wait())
        nxt: asyncio.Future[bytes] | None = None
        try:
            while True:
                nxt = asyncio.ensure_future(it.__anext__())
                await asyncio.wait({nxt, waiter}, return_when=asyncio.FIRST_COMPLETED)
                # A revocation wins over a chunk ready at the same moment: the watcher aborts the
                # key's turns right after it sets ``revoked``, and that abort may end the body
                # before this loop runs again (the stream must still end with the farewell).
                if revoked.is_set():
                    await _cancel(nxt)
                    yield farewell
                    return
                try:
                    chunk = nxt.result()
                except StopAsyncIteration:
                    return
                yield chunk
        finally:
            waiter.cancel()
            self._open.pop(token, None)
            if nxt is not None and not nxt.done():  # this stream was cancelled (client gone)
                await _cancel(nxt)
            aclose = getattr(body, "aclose", None)
            if aclose is not None:
                await aclose()

    def revoke(self, owner: str) -> None:
        """End ``owner``'s open streams now, with the farewell (another watcher, such as the
        manager's check of running turns, found the key revoked before this guard's did:
        called before that watcher aborts the key's turns, so their streams end as revoked,
        never as a normal end)."""
        for who, event in list(self._open.values()):
            if who == owner:
                event.set()

    async def _watch(self) -> None:
        while self._open:
            await asyncio.sleep(self.interval)
            try:
                valid = {k["id"] for k in await asyncio.to_thread(self.keys.list)}
            except Exception:  # the key store is unreachable: keep streams, try again
                log.warning("could not read the API keys to check for revocations", exc_info=True)
                continue
            gone = {owner for owner, _ in self._open.values() if owner not in valid}
            for owner, event in list(self._open.values()):
                if owner in gone:
                    event.set()
            for owner in gone:
                if self.on_revoked is not None:
                    self.on_revoked(owner)


async def _cancel(fut: asyncio.Future[Any]) -> None:
    fut.cancel()
    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
        await fut  # a body that failed as it was stopped: the farewell says why it ends


def revoked_sse(event: str | None = None) -> bytes:
    """The SSE message ending a revoked key's stream: an OpenAI error object (``authentication_error``,
    code ``key_revoked``), as a bare ``data`` line (Chat) or an ``event`` (Responses, sessions)."""
    body = error_body("the API key was revoked", "authentication_error", "key_revoked")
    if event is None:
        return sse_data_bytes(json_bytes(body))
    return sse_event_bytes(event.encode(), json_bytes({"type": "error", **body["error"]}))
