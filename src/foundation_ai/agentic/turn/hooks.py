"""The four hooks of a turn, each a no-op by default (see ``docs/turn-loop.md``).

- :class:`PhaseHooks` — ``before_phase`` / ``after_phase`` around every phase (tracing spans).
- :data:`ContextAssembler` — builds the request of each generation (memory); default: the
  session's context window, system prompt, soul and tools.
- :data:`ToolGate` — decides, per tool call, :class:`Allow`, :class:`Deny` or :class:`Ask`
  (approvals); default: allow every call.
- :class:`StepRunner` — runs each generation and each tool call as a step (durable execution);
  default :class:`InProcessSteps`: in the running task, nothing recorded.

Set them on the builder: ``with_phase_hooks``, ``with_context_assembler``, ``with_tool_gate``,
``with_step_runner`` (:class:`~foundation_ai.agentic.session.AgentSessionBuilder`).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ...types import Messages, ModelInteraction, ToolCall, ToolResultMessage

if TYPE_CHECKING:
    from .generate import Generation
    from .state import TurnState

__all__ = [
    "Allow",
    "Ask",
    "ChainedPhaseHooks",
    "ContextAssembler",
    "ContextRequest",
    "Deny",
    "GateDecision",
    "GateRequest",
    "InProcessSteps",
    "Phase",
    "PhaseHooks",
    "SpendCheck",
    "SpendRequest",
    "StepRunner",
    "ToolGate",
    "TurnHooks",
]


class Phase(enum.Enum):
    """The named phases of a turn, in the order they usually run (``docs/turn-loop.md``)."""

    OPEN = "open"
    PROMPT = "prompt"
    DRAIN_STEERING = "drain_steering"
    ADMIT = "admit"
    ASSEMBLE_CONTEXT = "assemble_context"
    GENERATE = "generate"
    DECIDE = "decide"
    FOLLOW_UPS = "follow_ups"
    EXECUTE_TOOLS = "execute_tools"
    FINISH = "finish"


class PhaseHooks:
    """Called around every phase; subclass and override what you need (both are no-ops).

    ``before_phase(phase, state)`` runs just before ``phase``; ``after_phase(phase, state,
    error)`` just after it, with ``error`` the exception that escaped the phase (``None``
    normally; a ``GeneratorExit``/``CancelledError`` when the turn was abandoned inside it).
    ``state`` is the live :class:`~foundation_ai.agentic.turn.state.TurnState`: read it, do
    not change it. A hook that raises ends the turn like any other error.
    """

    def before_phase(self, phase: Phase, state: TurnState) -> None:
        """Called before ``phase`` runs."""

    def after_phase(self, phase: Phase, state: TurnState, error: BaseException | None) -> None:
        """Called after ``phase`` ran (``error``: what escaped it, else ``None``)."""


class ChainedPhaseHooks(PhaseHooks):
    """Several :class:`PhaseHooks` as one: ``before_phase`` in order, ``after_phase`` in reverse
    order (like nested spans). What ``with_phase_hooks`` builds when called more than once."""

    __slots__ = ("hooks",)

    def __init__(self, *hooks: PhaseHooks) -> None:
        self.hooks = tuple(hooks)

    def before_phase(self, phase: Phase, state: TurnState) -> None:
        for h in self.hooks:
            h.before_phase(phase, state)

    def after_phase(self, phase: Phase, state: TurnState, error: BaseException | None) -> None:
        for h in reversed(self.hooks):
            h.after_phase(phase, state, error)


@dataclass(frozen=True, slots=True)
class ContextRequest:
    """What a :data:`ContextAssembler` receives before each generation.

    ``interaction``: the request the loop would send (the context window oldest-first, system
    prompt, soul, tools, tool choice); ``history``: the whole conversation of the session,
    oldest first (do not mutate it); ``model``: the model about to be called; ``state``: the turn.
    """

    session_id: str
    interaction: ModelInteraction
    history: Sequence[Messages]
    model: Any
    state: TurnState


ContextAssembler: TypeAlias = Callable[[ContextRequest], ModelInteraction | Awaitable[ModelInteraction]]
"""``assembler(request) -> ModelInteraction`` (or an awaitable of it): the request to send.
Return ``request.interaction`` unchanged for the default behaviour, or a copy
(``msgspec.structs.replace``) with other ``messages`` / ``system_prompt``. Called in the
``assemble_context`` phase, once per generation (retries included). Raising
``foundation_ai.errors.ContextOverflowError`` ends the turn with a ``context_overflow`` failure
before the model is called."""


@dataclass(frozen=True, slots=True)
class Allow:
    """Run the call."""


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the call: it gets an error result saying ``reason`` (the model sees it)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Ask:
    """The call needs a human's approval (``question``: what to show). The turn pauses before
    any call of the response runs: it ends with outcome ``AwaitingApproval`` (the calls asked
    about are listed in ``Turn.awaiting`` and stored in the turn's ``Summary``), and
    ``AgentSession.approve``/``deny`` continue it (``docs/tools.md``)."""

    question: str = ""


GateDecision: TypeAlias = Allow | Deny | Ask
"""What a :data:`ToolGate` answers."""


@dataclass(frozen=True, slots=True)
class GateRequest:
    """What a :data:`ToolGate` receives: one ``call`` of a response (``calls``: all of them, in
    order), before any of them runs."""

    session_id: str
    call: ToolCall
    calls: Sequence[ToolCall]
    state: TurnState


ToolGate: TypeAlias = Callable[[GateRequest], GateDecision | Awaitable[GateDecision]]
"""``gate(request) -> Allow() | Deny(reason) | Ask(question)`` (or an awaitable of it). Called
in the ``execute_tools`` phase for every call of a response, in order, before any runs; while
it runs the turn can be steered or aborted."""


class StepRunner:
    """Runs the turn's side effects as steps. This base class runs them in-process (it is
    :class:`InProcessSteps`); a durable runner overrides both methods to record each step's
    result and, when replaying, return the recorded result instead of running it again.

    - ``generation(step)``: an async iterator over the stream items of one model call. It must
      leave ``step``'s result filled: by iterating ``step.stream()`` (which fills it), or by
      ``step.restore(record)`` with a record taken from ``step.snapshot()`` earlier.
      ``step.key`` (``"generation:<n>"``, n counting the turn's model calls from 1) and
      ``step.interaction`` identify it.
    - ``tool_call(call, run)``: the result of one validated, allowed tool call; ``run()`` runs
      it (exceptions and timeouts already turned into error results). ``call.id`` identifies it.
    """

    def generation(self, step: Generation) -> AsyncGenerator[Any, None]:
        """Stream one generation (default: ``step.stream()``)."""
        return step.stream()

    async def tool_call(
        self, call: ToolCall, run: Callable[[], Awaitable[ToolResultMessage]]
    ) -> ToolResultMessage:
        """Run one tool call (default: ``await run()``)."""
        return await run()


class InProcessSteps(StepRunner):
    """The default :class:`StepRunner`: every step runs in the turn's task, nothing recorded."""


IN_PROCESS = InProcessSteps()


@dataclass(frozen=True, slots=True)
class SpendRequest:
    """What a :data:`SpendCheck` receives before each generation: the request about to be sent,
    the model, the session's ledger (totals and budget) and the turn."""

    session_id: str
    interaction: ModelInteraction
    model: Any
    ledger: Any
    state: TurnState


SpendCheck: TypeAlias = Callable[[SpendRequest], "bool | str | Awaitable[bool | str | None] | None"]
"""``check(request)``: ``None`` or ``True`` lets the generation run; ``False`` or a reason (a
``str``) ends the turn with outcome ``BudgetExhausted`` before the model is called
(``toolsets.approval.estimated_spend_check`` is a ready one)."""


@dataclass(frozen=True, slots=True)
class TurnHooks:
    """The hooks of a session (all optional; ``None`` = the default behaviour).

    ``policy`` is a :class:`~foundation_ai.agentic.toolsets.policy.ToolPolicy` (``None``: the
    default policy: no retries, errors reported, loop detection at 3 identical calls);
    ``can_spend`` a :data:`SpendCheck`."""

    phases: PhaseHooks | None = None
    context: ContextAssembler | None = None
    gate: ToolGate | None = None
    steps: StepRunner = IN_PROCESS
    policy: Any = None
    can_spend: SpendCheck | None = None
