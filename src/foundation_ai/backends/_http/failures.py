"""What a failed HTTP call becomes: :class:`HttpStreamError` / :class:`WireError` with key-free provider text
(:func:`error_text`), and the contract's error tail (:func:`error_items`). Sources: the error sections of
https://platform.openai.com/docs/api-reference/chat and https://docs.anthropic.com/en/api/errors.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx2
import msgspec
from httpx2 import SSEError

from ...errors import ProviderError
from ...types import (
    AssistantMessage,
    ModelId,
    ModelState,
    StopReason,
    Stream,
    TextContent,
    UsageReport,
)
from .options import HttpOptions
from .secrets import redact

__all__ = ["HttpStreamError", "WireError", "error_items", "error_text"]


RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})
"""Statuses retried before output (429 rate limit, 5xx, 529 Anthropic overloaded, 408/409)."""

_JSON_DECODER = msgspec.json.Decoder()


class HttpStreamError(ProviderError):
    """An HTTP request or stream failed; ``detail`` is key-free provider text.

    Attributes:
        detail: the text for ``error_detail``.
        status_code: the HTTP status when there was a response, else ``None``.
        retryable: whether the failure is of a kind that was (or would be) retried.
    """

    def __init__(self, detail: str, *, status_code: int | None = None, retryable: bool = False) -> None:
        super().__init__(detail, status_code=status_code)
        self.retryable = retryable


class WireError(ProviderError):
    """A backend could not parse what the provider sent (malformed SSE data or JSON)."""


def error_text(status: int, body: bytes | str, *, secrets: tuple[str | None, ...] = ()) -> str:
    """Clean provider text for an HTTP error ``status`` with ``body``.

    Reads the ``message`` of an OpenAI (``{"error": {"message", "type", "code"}}``), Anthropic
    (``{"type": "error", "error": {"type", "message"}}``) or llama.cpp error object and appends
    the code/type in parentheses with the status: ``"<message> (code: context_length_exceeded,
    HTTP 400)"``. A non-JSON body is quoted (first 1,000 characters); an empty body gives
    ``"<status> status code (no body)"`` (the Cerebras/Mistral overflow shape, docs/concepts.md: Context overflow).
    Secrets are redacted.
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes | bytearray) else body
    text = text.strip()
    if not text:
        return redact(f"{status} status code (no body)", *secrets)
    message: str | None = None
    tags: list[str] = []
    try:
        doc = _JSON_DECODER.decode(text)
    except msgspec.DecodeError:
        doc = None
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):
        doc = doc[0]
    if isinstance(doc, dict):
        err = doc.get("error", doc)
        if isinstance(err, str):
            message = err
        elif isinstance(err, dict):
            m = err.get("message") or err.get("msg") or err.get("detail")
            message = m if isinstance(m, str) else (None if m is None else str(m))
            for field in ("code", "type", "param"):
                v = err.get(field)
                if v not in (None, "", status) and field != "param":
                    tags.append(f"{field}: {v}")
        if message is None and isinstance(doc.get("message"), str):
            message = doc["message"]
    if message is None:
        message = text[:1000]
    tags.append(f"HTTP {status}")
    return redact(f"{message} ({', '.join(tags)})", *secrets)


def _status_error(status: int, raw: bytes, opts: HttpOptions) -> HttpStreamError:
    """The error for an HTTP error ``status`` whose body is ``raw`` (secrets masked in the
    text); retryable for the statuses in ``RETRY_STATUSES``."""
    return HttpStreamError(
        error_text(status, raw, secrets=opts.secrets()),
        status_code=status,
        retryable=status in RETRY_STATUSES,
    )


def _connect_error(exc: Exception, opts: HttpOptions) -> HttpStreamError:
    kind = type(exc).__name__
    return HttpStreamError(opts.redact(f"connection failed ({kind}): {exc}"), retryable=True)


def _is_json(resp: httpx2.Response) -> bool:
    return "json" in resp.headers.get("content-type", "")


def _mid_stream_error(exc: Exception, opts: HttpOptions) -> HttpStreamError:
    if isinstance(exc, httpx2.TimeoutException):
        msg = f"stream timed out ({type(exc).__name__}): {exc}"
    elif isinstance(exc, SSEError):
        msg = f"malformed event stream: {exc}"
    else:
        msg = f"connection dropped mid-stream ({type(exc).__name__}): {exc}"
    return HttpStreamError(opts.redact(msg))


_STREAM_ERRORS = (httpx2.TransportError, httpx2.StreamError, SSEError, UnicodeDecodeError)


def _is_cert_error(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) is a TLS certificate verification failure: final,
    never retried (the same certificate fails the same way)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def error_items(
    detail: str, model: ModelId, provider: str, usage: UsageReport | None = None
) -> list[Stream[Any, Any]]:
    """The contract's failure tail (backends/base.py, rule 4): an Assistant message with a fresh
    id, empty text, ``StopReason.Error`` and ``detail`` in ``error_detail`` (usage so far
    attached), then ``Stream.Pending(ModelState.Error(detail))``."""
    msg = AssistantMessage(
        model=model,
        content=TextContent(""),
        usage=usage if usage is not None else UsageReport(),
        stop_reason=StopReason.Error(),
        provider=provider,
        error_detail=detail,
    )
    return [Stream.Next(msg), Stream.Pending(ModelState.Error(detail))]
