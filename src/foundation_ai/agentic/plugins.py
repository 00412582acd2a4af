"""How the layers above the agent loop plug into every session a builder makes, without the session
importing them (docs/concepts.md: Layers).

Memory (``foundation_ai.memory``) and tracing (``foundation_ai.telemetry``) sit above ``agentic``: they
use its tools and hooks. The builder and the session know them only through the protocols below and
through the hooks the loop already has (the context assembler, phase hooks, the step runner). The
builder's ``with_memory()`` and ``with_tracing()`` without an object of their own look up the default
implementation by name (:func:`default`), on first use, as the root package loads its lazy names.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from ..types import SessionRecord
from .turn.hooks import StepRunner

__all__ = ["MemoryPlugin", "SessionMemory", "TracingPlugin", "WrappingSteps", "default"]

DEFAULTS = {
    "memory": ("foundation_ai.memory.manager", "MemoryConfig"),
    "tracing": ("foundation_ai.telemetry", "session_tracing"),
}
"""The default plugin of each kind: module and attribute, imported when first asked for."""


class SessionMemory(Protocol):
    """The memory of one session, as the builder and the session use it
    (``foundation_ai.memory.MemoryManager`` is one)."""

    def assembler(self, then: Any = None) -> Any:
        """A context assembler that adds the memories, calling ``then`` (the one it replaces)."""
        ...

    def tools(self) -> list[Any]:
        """The tools it adds to the session (``memory``, ``search_context``)."""
        ...

    def bind(self, session: Any) -> None:
        """Attach to the session just built."""
        ...

    def restore(self, records: Sequence[SessionRecord]) -> None:
        """Rebuild its state from a resumed session's records."""
        ...

    def wrap_turn(self, turn: AsyncIterator[Any], state: Any, emit: bool) -> AsyncIterator[Any]:
        """Stream a turn's items, then absorb its records and run the due passes."""
        ...


class MemoryPlugin(Protocol):
    """What ``with_memory(config)`` takes: it makes one :class:`SessionMemory` per session
    (``foundation_ai.memory.MemoryConfig`` is one)."""

    def manager(self) -> SessionMemory:
        """A fresh memory for one session."""
        ...


class TracingPlugin(Protocol):
    """What ``with_tracing`` installs: phase hooks (spans per turn and model call) that also wrap the
    step runner (spans per tool call); ``foundation_ai.telemetry.Tracing`` is one (a ``PhaseHooks``)."""

    def steps(self, inner: StepRunner) -> StepRunner:
        """A step runner that adds its spans around ``inner``'s steps."""
        ...


class WrappingSteps(Protocol):
    """A step runner that wraps another (tracing's tool spans): ``with_step_runner`` keeps it around
    the new runner."""

    def around(self, inner: StepRunner) -> StepRunner:
        """The same wrapper around ``inner``."""
        ...


def default(kind: str) -> Any:
    """The default plugin factory of ``kind`` (``"memory"``: ``MemoryConfig``; ``"tracing"``:
    ``session_tracing``), imported on first use.

    Raises:
        KeyError: an unknown kind.
        ImportError: its module cannot be imported.
    """
    module, name = DEFAULTS[kind]
    return getattr(importlib.import_module(module), name)
