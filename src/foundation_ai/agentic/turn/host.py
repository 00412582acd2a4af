"""``TurnHost``: what the turn loop needs from its session (``AgentSession`` satisfies it).

The loop never imports the session module: it reads and updates these attributes only. They
are read when the turn (or the phase) runs, so a change made between turns (a new system
prompt, ``messages`` replaced by ``resume``) is seen by the next turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ...types import Messages, ModelParams, SessionRecord, ToolCall
from ..ledger import TokenLedger
from ..steering import Steering
from ..stores import SessionHeader, SessionStore
from ..tools import ToolRegistry
from .hooks import TurnHooks
from .policy import CircuitBreaker

__all__ = ["TurnHost"]


class TurnHost(Protocol):
    """The session as the loop sees it.

    Configuration (read): ``models`` (primary first, then fallbacks), ``system_prompt``,
    ``soul``, ``chat_template``, ``params``, ``max_inner`` (model calls per round), ``max_outer``
    (follow-up rounds per turn), ``registry`` (tools), ``hooks``.
    Collaborators: ``store``, ``session_id``, ``pending_records``, ``stored_header`` and
    ``session_header()`` (persistence, see :mod:`.persist`), ``ledger`` (usage, budget),
    ``breaker`` (rate-limit circuit breakers), ``steering`` (steer / follow-up / abort queues).
    Conversation (read and updated by the loop): ``messages`` (oldest first, appended to),
    ``context_start`` and ``context_cut`` (the window sent to the model, moved on overflow; see
    :mod:`foundation_ai.agentic.context`). Approvals (written by ``execute_tools`` when a turn
    pauses): ``awaiting`` (the calls asked about) and ``paused_calls`` (all calls of the paused
    response).
    """

    models: list[Any]
    system_prompt: str | None
    soul: str | None
    chat_template: str | None
    params: ModelParams | None
    max_inner: int
    max_outer: int
    registry: ToolRegistry
    hooks: TurnHooks
    store: SessionStore
    session_id: str
    ledger: TokenLedger
    breaker: CircuitBreaker
    steering: Steering
    messages: list[Messages]
    awaiting: Sequence[ToolCall]
    paused_calls: Sequence[ToolCall]
    context_start: int
    context_cut: tuple[int, int] | None
    pending_records: list[SessionRecord]
    """Records persisted in memory but not yet written to the store (oldest first)."""
    stored_header: SessionHeader | None
    """The ``SessionHeader`` last written to the store (``None``: not yet)."""

    def _enter(self, entering: bool) -> bool:
        """The session's one-turn-at-a-time guard: ``_enter(True)`` takes it (False: a turn is
        running), ``_enter(False)`` gives it back."""
        ...

    def session_header(self) -> SessionHeader:
        """What the session records about itself now (model string, system prompt, tools)."""
        ...
