"""Choices given as plain strings: ``tool_choice="required"``, ``thinking_level="high"``, …

Every place that takes a choice accepts the typed value or its obvious string, and raises
:class:`~foundation_ai.errors.InvalidChoiceError` (for tools :class:`~foundation_ai.errors.ToolChoiceError`)
on anything else, so a misspelt option never silently does nothing.

- ``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` (any case), or the name of a tool on
  offer (-> ``ToolChoice.Function(name)``); a ``ToolChoice`` as is.
- an ``enum.Enum`` option (``ThinkingLevel``, ``CacheRetention``): the member, its value or its
  name, any case (``"high"``, ``"High"``; ``"none"`` for ``CacheRetention.None_``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, TypeVar

from ..errors import InvalidChoiceError, ToolChoiceError
from .tools import ToolChoice

__all__ = ["enum_choice", "tool_choice_of"]

E = TypeVar("E", bound=enum.Enum)

_FIXED: dict[str, type[ToolChoice]] = {
    "auto": ToolChoice.Auto,
    "none": ToolChoice.None_,
    "required": ToolChoice.Required,
}


def tool_choice_of(value: object, offered: Iterable[str] | None = None) -> ToolChoice | None:
    """``value`` as a ``ToolChoice`` (``None`` stays ``None``: the provider default).

    Args:
        value: a ``ToolChoice``, ``"auto"`` / ``"none"`` / ``"required"`` (any case, spaces
            ignored) or a tool name.
        offered: the function names on offer. When given, a tool name (string or
            ``ToolChoice.Function``) must be one of them.

    Raises:
        ToolChoiceError: an unknown string, a name not on offer, or a value of another type.
    """
    if value is None:
        return None
    names = None if offered is None else list(offered)
    if isinstance(value, ToolChoice):
        if isinstance(value, ToolChoice.Function) and names is not None and value.name not in names:
            raise ToolChoiceError(value, names)
        return value
    if not isinstance(value, str):
        raise ToolChoiceError(value, names or ())
    key = value.strip()
    fixed = _FIXED.get(key.lower())
    if fixed is not None:
        return fixed()
    if key and (names is None or key in names):
        return ToolChoice.Function(key)
    raise ToolChoiceError(value, names or ())


def enum_choice(field: str, value: Any, kind: type[E]) -> E:
    """``value`` as a member of ``kind``: the member itself, its value or its name (any case; a
    trailing ``_`` of the name is optional, so ``"none"`` finds ``None_``).

    Raises:
        InvalidChoiceError: no member matches.
    """
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        key = value.strip().lower()
        for member in kind:
            if key in (str(member.value).lower(), member.name.lower(), member.name.lower().rstrip("_")):
                return member
    raise InvalidChoiceError(field, value, [str(m.value) for m in kind])
