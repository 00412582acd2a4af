"""HTTP plumbing shared by the endpoints: authentication, bounded JSON bodies, SSE framing
(https://html.spec.whatwg.org/multipage/server-sent-events.html)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from starlette.requests import Request

from ..types import from_json
from .errors import ApiError

__all__ = [
    "LOCAL_OWNER",
    "json_bytes",
    "owner_of",
    "read_json",
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

    Raises:
        ApiError: (413) the body is larger; (400) not JSON, or not an object.
    """
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
