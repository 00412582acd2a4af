"""Errors the server sends to clients, in the OpenAI error shape.

Every error response is JSON ``{"error": {"message", "type", "param", "code"}}`` with an HTTP
status, as the OpenAI API documents it (https://platform.openai.com/docs/guides/error-codes):
the official SDKs raise ``AuthenticationError`` (401), ``PermissionDeniedError`` (403),
``NotFoundError`` (404), ``ConflictError`` (409), ``UnprocessableEntityError`` (422),
``RateLimitError`` (429), ``InternalServerError`` (5xx) from it. Never a stack trace.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from ..errors import FoundationAIError

__all__ = ["ApiError", "error_body", "error_response", "turn_error"]


class ApiError(FoundationAIError):
    """A request the server refuses: HTTP ``status`` plus the OpenAI error fields.

    Args:
        status: the HTTP status (400, 401, 404, 409, 413, 429, 502, ...).
        message: one line for the client (never a stack trace or a secret).
        type: the OpenAI error type: ``invalid_request_error``, ``authentication_error``,
            ``permission_error``, ``not_found_error``, ``rate_limit_error``, ``server_error``.
        code: a short machine-readable code, e.g. ``"model_not_found"``.
        param: the request field at fault, when one is.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": {...}}``."""
        return error_body(self.message, self.type, self.code, self.param)


def error_body(message: str, type: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}`` (the OpenAI error object)."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_response(exc: ApiError) -> JSONResponse:
    """The JSON response for ``exc`` (``Retry-After: 1`` on 429)."""
    headers = {"Retry-After": "1"} if exc.status == 429 else None
    return JSONResponse(exc.body(), status_code=exc.status, headers=headers)


def turn_error(error: Any) -> ApiError:
    """The HTTP error of a turn that failed (its ``AgenticError``), as the OpenAI API answers
    the same conditions (https://platform.openai.com/docs/guides/error-codes): a prompt over the
    model's context window ``400 context_length_exceeded``; the provider's rate limit ``429``;
    anything else ``502`` (the upstream model or a tool broke; not the client's fault) with the
    error's ``kind`` as code. The same error is sent whether the request streams or not (a
    stream that fails before its first output byte gets it as its HTTP answer)."""
    message = f"the turn failed: {error.message}"
    if error.kind == "context_overflow":
        return ApiError(400, message, code="context_length_exceeded", param="messages")
    if error.kind == "rate_limited":
        return ApiError(429, message, type="rate_limit_error", code="rate_limit_exceeded")
    return ApiError(502, message, type="server_error", code=error.kind or "turn_failed")
