"""The exception hierarchy. Every exception the library raises derives from :class:`FoundationAIError`.

Errors are values at the lower layers: a provider error is a ``Messages.Assistant`` with
``StopReason.Error`` and ``error_detail`` (what a model's ``stream``/``generate`` return), a failed
tool is a ``Messages.ToolResult`` with ``error_detail``, and a streamed turn ends with a
``TurnEvent.Failed``. The convenience calls of a session (``run_turn``, ``ask`` and their async
twins) raise :class:`~foundation_ai.agentic.errors.TurnFailedError` instead (it carries the
``Turn``, so it lives with the agent layer; reachable here by name too), so a failure cannot pass unnoticed. Other
exceptions are for misuse and for conditions a caller has to handle in code.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

__all__ = [
    "ArgumentValidationError",
    "ConfigurationError",
    "ContextOverflowError",
    "EmptyPromptError",
    "FoundationAIError",
    "InvalidChoiceError",
    "JsonFormatError",
    "ModelNotFoundError",
    "ProviderError",
    "SchemaViolation",
    "ToolArgumentError",
    "ToolChoiceError",
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


_AGENT_ERRORS = ("TurnFailedError", "OutputValidationError", "RefusalError")


def __getattr__(name: str) -> Any:
    """``TurnFailedError``, ``OutputValidationError`` and ``RefusalError`` carry a ``Turn``, so they
    live with the agent layer (:mod:`foundation_ai.agentic.errors`, docs/concepts.md: Layers); they
    stay reachable here by name, looked up on first use (this module imports nothing above it)."""
    if name in _AGENT_ERRORS:
        value = getattr(importlib.import_module("foundation_ai.agentic.errors"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
