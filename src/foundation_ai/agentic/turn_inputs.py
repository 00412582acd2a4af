"""What a turn starts from, checked before anything is persisted: the prompt as messages and the tool
choice against the registered tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import (
    EmptyPromptError,
)
from ..types import (
    ImageContent,
    Messages,
)
from ..types.choices import tool_choice_of
from .steering import checked_message
from .tools import ToolRegistry

if TYPE_CHECKING:
    pass


def _prompt_messages(prompt: object) -> list[Messages]:
    """The prompt of a turn as messages: a ``str``, a ``Messages`` or a non-empty list/tuple of
    them, where an ``ImageContent`` (``Image.from_path(...)``) is a user message holding it.

    Raises:
        TypeError: anything else (e.g. ``5``, ``None``, ``b"..."``), checked before the turn
            starts so nothing unloadable is ever persisted.
        EmptyPromptError: (a ``ValueError``) an empty text, or an empty list.
    """
    if type(prompt) is str or isinstance(prompt, str | Messages | ImageContent):
        return [checked_message(prompt)]
    if isinstance(prompt, Sequence) and not isinstance(prompt, bytes | bytearray):
        if not prompt:
            raise EmptyPromptError("the prompt is empty (an empty list)")
        return [checked_message(p) for p in prompt]
    raise TypeError(
        f"the prompt must be a str, a Messages or a list of them, got {type(prompt).__name__}: {prompt!r:.60}"
    )


def _tool_choices(choice: Any, registry: ToolRegistry) -> Any:
    """A turn's tool choice checked against the registered tools: ``None``, one choice or a
    list of them, each a ``ToolChoice`` or ``"auto"`` / ``"none"`` / ``"required"`` / a tool name.

    Raises:
        ToolChoiceError: an unknown string, or a tool name that is not registered.
    """
    if choice is None:
        return None
    offered = [f.name for f in registry.declarations().functions()]
    if isinstance(choice, list | tuple):
        return [tool_choice_of(c, offered) for c in choice]
    return tool_choice_of(choice, offered)
