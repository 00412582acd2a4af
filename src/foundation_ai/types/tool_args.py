"""``ToolArgs``: typed readers over a tool call's JSON arguments (docs/concepts.md: Tools).

    args = ToolArgs(call.arguments)
    q = args.str("q")                 # raises ToolArgumentError if missing or not a string
    limit = args.opt_usize("limit")   # None when absent; error when present but not >= 0
    query = args.parse(SearchQuery)   # a whole msgspec Struct / dataclass / TypedDict

Every failure raises :class:`~foundation_ai.errors.ToolArgumentError` naming the field and what
was expected, so a tool runner can send it back to the model.
"""

from __future__ import annotations

import builtins
import re
from typing import Any, TypeVar

import msgspec

from ..errors import ToolArgumentError

__all__ = ["ToolArgs"]

T = TypeVar("T")
_MISSING: Any = object()
_BAD_FIELD = re.compile(r"at `\$\.?([^`]*)`")
_EXPECTED_GOT = re.compile(r"Expected `([^`]+)`, got `([^`]+)`")


def _describe(value: Any) -> builtins.str:
    if value is _MISSING:
        return "missing"
    if value is None:
        return "null"
    if isinstance(value, builtins.bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, int | float):
        return f"number {value!r}"
    if isinstance(value, builtins.str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {shown!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class ToolArgs:
    """Typed access to ``ToolArguments`` (a JSON object). ``None`` counts as ``{}``."""

    __slots__ = ("_args",)

    def __init__(self, arguments: dict[builtins.str, Any] | None) -> None:
        self._args: dict[builtins.str, Any] = arguments or {}

    @property
    def raw(self) -> dict[builtins.str, Any]:
        """The underlying JSON object."""
        return self._args

    def _get(self, name: builtins.str) -> Any:
        return self._args.get(name, _MISSING)

    # -- required readers -------------------------------------------------------------------

    def str(self, name: builtins.str) -> builtins.str:
        """A required string.

        Raises:
            ToolArgumentError: missing or not a string.
        """
        v = self._get(name)
        if isinstance(v, builtins.str):
            return v
        raise ToolArgumentError(name, "a string", _describe(v))

    def i64(self, name: builtins.str) -> int:
        """A required integer in the signed 64-bit range (``3.0`` is accepted as 3).

        Raises:
            ToolArgumentError: missing, not an integer, or out of range.
        """
        v = self._get(name)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, int) and not isinstance(v, builtins.bool) and -(2**63) <= v < 2**63:
            return v
        raise ToolArgumentError(name, "an integer (64-bit)", _describe(v))

    def usize(self, name: builtins.str) -> int:
        """A required non-negative integer.

        Raises:
            ToolArgumentError: missing, not an integer, or negative.
        """
        v = self._get(name)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, int) and not isinstance(v, builtins.bool) and 0 <= v < 2**64:
            return v
        raise ToolArgumentError(name, "a non-negative integer", _describe(v))

    def f64(self, name: builtins.str) -> float:
        """A required number (integers are accepted).

        Raises:
            ToolArgumentError: missing or not a number.
        """
        v = self._get(name)
        if isinstance(v, int | float) and not isinstance(v, builtins.bool):
            return float(v)
        raise ToolArgumentError(name, "a number", _describe(v))

    def bool(self, name: builtins.str) -> builtins.bool:
        """A required boolean.

        Raises:
            ToolArgumentError: missing or not a boolean.
        """
        v = self._get(name)
        if isinstance(v, builtins.bool):
            return v
        raise ToolArgumentError(name, "a boolean", _describe(v))

    # -- optional readers: None when absent or null, an error when present but mistyped -----

    def _opt(self, name: builtins.str) -> builtins.bool:
        return self._args.get(name) is not None

    def opt_str(self, name: builtins.str) -> builtins.str | None:
        """An optional string (``None`` when absent or null)."""
        return self.str(name) if self._opt(name) else None

    def opt_i64(self, name: builtins.str) -> int | None:
        """An optional 64-bit integer."""
        return self.i64(name) if self._opt(name) else None

    def opt_usize(self, name: builtins.str) -> int | None:
        """An optional non-negative integer."""
        return self.usize(name) if self._opt(name) else None

    def opt_f64(self, name: builtins.str) -> float | None:
        """An optional number."""
        return self.f64(name) if self._opt(name) else None

    def opt_bool(self, name: builtins.str) -> builtins.bool | None:
        """An optional boolean."""
        return self.bool(name) if self._opt(name) else None

    def opt_value(self, name: builtins.str) -> Any | None:
        """Any JSON value, or ``None`` when absent."""
        return self._args.get(name)

    # -- whole struct --------------------------------------------------------------------------

    def parse(self, into: type[T]) -> T:
        """Convert the whole object into ``into`` (a ``msgspec.Struct``, dataclass, TypedDict, …).

        Raises:
            ToolArgumentError: naming the first field that is missing or mistyped.
        """
        try:
            return msgspec.convert(self._args, into, strict=False)
        except msgspec.ValidationError as exc:
            msg = builtins.str(exc)
            m = _BAD_FIELD.search(msg)
            field = m.group(1) if m else ""
            missing = re.search(r"missing required field `([^`]+)`", msg)
            if missing:
                name = f"{field}.{missing.group(1)}" if field else missing.group(1)
                raise ToolArgumentError(name, "a value", "missing") from exc
            reason = msg.split(" - at ")[0]
            typed = _EXPECTED_GOT.match(reason)
            if typed:
                raise ToolArgumentError(field or "$", typed.group(1), typed.group(2)) from exc
            raise ToolArgumentError(
                field or "$", reason.replace("Expected ", "").strip(), "a mismatch"
            ) from exc

    def __repr__(self) -> builtins.str:
        return f"ToolArgs({self._args!r})"
