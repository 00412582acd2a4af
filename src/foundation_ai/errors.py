"""The exception hierarchy. Every exception the library raises derives from :class:`FoundationAIError`.

Errors that the library reports as values (docs/concepts.md: The stream contract) are *not* raised: a provider error is an
``Messages.Assistant`` with ``StopReason.Error`` and ``error_detail`` (docs/concepts.md: Outputs), a failed
tool is a ``Messages.ToolResult`` with ``error_detail``. Exceptions are for misuse and for
conditions a caller has to handle in code.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ArgumentValidationError",
    "ConfigurationError",
    "FoundationAIError",
    "JsonFormatError",
    "ModelNotFoundError",
    "ProviderError",
    "SchemaViolation",
    "ToolArgumentError",
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
