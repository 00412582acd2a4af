"""The exception hierarchy. Every exception the library raises derives from :class:`FoundationAIError`.

Errors are values at the lower layers: a provider error is a ``Messages.Assistant`` with
``StopReason.Error`` and ``error_detail`` (what a model's ``stream``/``generate`` return), a failed
tool is a ``Messages.ToolResult`` with ``error_detail``, and a streamed turn ends with a
``TurnEvent.Failed``. The convenience calls of a session (``run_turn``, ``ask`` and their async
twins) raise :class:`TurnFailedError` instead, so a failure cannot pass unnoticed. Other
exceptions are for misuse and for conditions a caller has to handle in code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agentic.session import Turn

__all__ = [
    "ArgumentValidationError",
    "ConfigurationError",
    "ContextOverflowError",
    "EmptyPromptError",
    "FoundationAIError",
    "InvalidChoiceError",
    "JsonFormatError",
    "ModelNotFoundError",
    "OutputValidationError",
    "ProviderError",
    "RefusalError",
    "SchemaViolation",
    "ToolArgumentError",
    "ToolChoiceError",
    "TurnFailedError",
]


class FoundationAIError(Exception):
    """Root of every exception raised by foundation_ai."""


class ConfigurationError(FoundationAIError):
    """Bad configuration: a missing API key, an unknown option, an unusable model file."""


class ModelNotFoundError(ConfigurationError):
    """No provider serves the requested model id (raised by ``ProviderRouter``)."""


class ProviderError(FoundationAIError):
    """A provider failed in a way that cannot be expressed as an error message in the stream.

    Attributes:
        status_code: the HTTP status, when there was one.
        detail: the provider's error text (never contains an API key).
    """

    def __init__(self, detail: str, *, status_code: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status_code = status_code


class JsonFormatError(FoundationAIError, ValueError):
    """A JSON document does not match the foundation_ai format.

    Attributes:
        path: where the problem is, as a JSON path such as ``"$.messages[2].content.type"``
            (``"$"`` when the document itself is not JSON).
        reason: what is wrong there.
    """

    def __init__(self, reason: str, path: str = "$") -> None:
        super().__init__(f"{reason} (at {path})")
        self.reason = reason
        self.path = path


class EmptyPromptError(FoundationAIError, ValueError):
    """A prompt (or a steering / follow-up message) with no text: ``""``, only whitespace, or
    an empty list. A ``ValueError`` too, as it always was."""


class ToolArgumentError(FoundationAIError, ValueError):
    """A tool argument is missing or has the wrong type (raised by ``ToolArgs`` readers).

    Attributes:
        field: the argument's name (a dotted path for nested fields).
        expected: what was expected, e.g. ``"an integer"``.
        got: a short description of what was found (``"missing"`` when absent).
    """

    def __init__(self, field: str, expected: str, got: str) -> None:
        super().__init__(f"argument {field!r}: expected {expected}, got {got}")
        self.field = field
        self.expected = expected
        self.got = got


class SchemaViolation:
    """One JSON Schema violation: where (``path``, a JSON path like ``"$.items[0].q"``) and what."""

    __slots__ = ("message", "path", "schema_path")

    def __init__(self, path: str, message: str, schema_path: str = "") -> None:
        self.path = path
        self.message = message
        self.schema_path = schema_path

    def __repr__(self) -> str:
        return f"SchemaViolation(path={self.path!r}, message={self.message!r})"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SchemaViolation) and (self.path, self.message) == (other.path, other.message)

    def __hash__(self) -> int:
        return hash((self.path, self.message))


class ArgumentValidationError(FoundationAIError, ValueError):
    """Tool arguments failed JSON Schema validation; ``violations`` lists every one, in order."""

    def __init__(self, violations: Sequence[SchemaViolation]) -> None:
        self.violations = list(violations)
        super().__init__("; ".join(str(v) for v in self.violations) or "invalid arguments")


class InvalidChoiceError(ConfigurationError, ValueError):
    """A value for a choice (``thinking_level``, ``cache_retention``, ``output_format``, …) that is
    none of the accepted ones.

    Attributes:
        field: the option's name.
        choice: what was given.
        allowed: the accepted spellings.
    """

    def __init__(
        self, field: str, choice: object, allowed: Sequence[str], *, message: str | None = None
    ) -> None:
        self.field = field
        self.choice = choice
        self.allowed = list(allowed)
        super().__init__(
            message or f"{field}: unknown choice {choice!r} (accepted: {', '.join(map(repr, self.allowed))})"
        )


class ToolChoiceError(InvalidChoiceError):
    """A tool choice that means nothing: not ``"auto"``, ``"none"``, ``"required"``, a
    ``ToolChoice`` or the name of a tool on offer.

    Attributes:
        choice: what was given.
        offered: the tool names on offer when the choice was checked.
    """

    def __init__(self, choice: object, offered: Sequence[str] = ()) -> None:
        self.offered = list(offered)
        names = ", ".join(self.offered) or "none"
        super().__init__(
            "tool_choice",
            choice,
            ["auto", "none", "required", *self.offered],
            message=f"unknown tool choice {choice!r}: use 'auto', 'none', 'required' or the name of a"
            f" tool on offer (offered: {names})",
        )


_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")


class ContextOverflowError(FoundationAIError):
    """A request cannot fit its model's context window even with everything that may be left
    out left out. A context assembler (``with_context_assembler``; memory's, see
    ``docs/memory.md``) raises it to end the turn before the model is called: the turn fails
    with kind ``"context_overflow"`` and this message (``TurnFailedError`` from ``run_turn``).

    Attributes:
        tokens: the tokens the request needs at least.
        window: the context window, tokens.
    """

    def __init__(self, message: str, *, tokens: int, window: int) -> None:
        super().__init__(message)
        self.tokens = tokens
        self.window = window


class TurnFailedError(FoundationAIError):
    """A turn ended without an answer: raised by ``AgentSession.run_turn``, ``ask`` and their
    async twins when the turn failed (a provider error such as an HTTP 500 or 401, a refused
    connection, a context overflow that could not be trimmed, every model rate limited), ran out
    of budget or iterations, or gave no valid structured output; ``ask`` also raises (as
    :class:`RefusalError`) when the model refused.

    The value-based contract stays below the session: a model's ``stream``/``generate`` return
    an Assistant message with ``StopReason.Error``, and ``TurnStream.events()`` ends with
    ``TurnEvent.Failed``; neither raises this. An aborted turn (``abort()``) does not raise.

    Attributes:
        turn: the finished ``Turn`` (its records, outcome and usage; what it produced is kept
            and persisted).
        kind: the error kind (``AgenticError.kind``): ``"provider"``, ``"rate_limited"``,
            ``"context_overflow"``, ``"budget_exhausted"``, ``"iteration_limit"``,
            ``"output_validation"``, ``"refused"``.
        detail: the provider's text (or the loop's reason), API keys masked.
        status_code: the HTTP status named in ``detail`` (``"... (HTTP 401)"``), else ``None``.
        retryable: whether trying again later may succeed (e.g. a rate limit).
    """

    def __init__(self, turn: Turn | Any, kind: str, detail: str, *, retryable: bool = False) -> None:
        super().__init__(f"the turn failed ({kind}): {detail}")
        self.turn = turn
        self.kind = kind
        self.detail = detail
        self.retryable = retryable
        found = _HTTP_STATUS.search(detail)
        self.status_code: int | None = int(found.group(1)) if found else None


class OutputValidationError(TurnFailedError):
    """The model's answers did not match the requested ``output_type``, after every retry
    (``kind == "output_validation"``).

    Attributes:
        errors: what was wrong with the last answer, one line per problem.
        text: the last answer, as the model sent it.
    """

    def __init__(self, turn: Turn | Any, errors: Sequence[str], text: str) -> None:
        self.errors = list(errors)
        self.text = text
        super().__init__(turn, "output_validation", "; ".join(self.errors) or "invalid output")


class RefusalError(TurnFailedError):
    """The model refused to answer (``kind == "refused"``; the turn's outcome is
    ``TurnOutcome.Refused``), raised by ``ask``/``aask``, which promise an answer;
    ``run_turn`` returns the refused ``Turn`` (a typed outcome). A refusal is never retried and
    never reported as a parse error.

    Attributes:
        refusal: the provider's refusal text (or reason code).
    """

    def __init__(self, turn: Turn | Any, refusal: str) -> None:
        self.refusal = refusal
        super().__init__(turn, "refused", refusal or "the model refused")
