"""``TurnState``: the one value a turn's phases pass along, and ``fail`` (how a turn fails)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...types import (
    AgenticError,
    AssistantMessage,
    SessionRecord,
    StructuredErrorTrace,
    ToolCall,
    ToolResultMessage,
)
from ..events import TurnOutcome

if TYPE_CHECKING:
    from .generate import Generation

__all__ = ["TurnState", "fail"]

_OUTCOMES = {
    "budget_exhausted": TurnOutcome.BudgetExhausted,
    "iteration_limit": TurnOutcome.IterationLimit,
    "loop_detected": TurnOutcome.LoopDetected,
}


class TurnState:
    """Everything one turn knows, passed from phase to phase (``docs/turn-loop.md``).

    Result (read by ``Turn`` once the turn is over): ``records`` (what the turn produced, in
    order), ``outcome``, ``refusal`` (the refusal text of a ``Refused`` turn), ``error``,
    ``generations`` (model calls made), ``persisted`` (messages
    persisted), ``snapshot`` (the usage of the ``Summary``).

    Progress: ``inner`` (model calls in this round), ``outer`` (follow-up rounds), ``step``
    (generations that consumed a ``tool_choice``), ``vacuous_retried``; ``keep_from`` (index in
    the session's messages where this turn starts) and ``head_end`` (where its prompt ends);
    ``model_index`` (the model picked by ``admit``); ``generation`` (the running or last
    :class:`~foundation_ai.agentic.turn.generate.Generation`); ``calls`` (the tool calls of the
    last response) and ``results`` (their results, filled as they finish).

    Tools and approvals: ``awaiting`` (the calls the turn paused on, outcome
    ``AwaitingApproval``), ``decisions`` (``{call id: Allow() | Deny(reason)}`` made by
    ``approve``/``deny`` for a continued turn), ``resuming`` (the turn continues a paused one:
    it starts at ``execute_tools`` with ``calls``), ``tracker`` (the turn's loop detection,
    :class:`~foundation_ai.agentic.toolsets.policy.LoopTracker`).

    Plumbing: ``emit`` (False for non-streaming callers: snapshot and progress items are
    skipped), ``out`` (stream items a phase emitted, yielded by the driver after it),
    ``live`` (outputs of the running generation, not yet persisted: kept if the turn is
    abandoned), ``finished``. ``prompts`` and ``choices`` are the turn's input (the prompt
    messages; the ``tool_choice`` of the first generations, in order).
    """

    __slots__ = (
        "awaiting",
        "calls",
        "choices",
        "decisions",
        "emit",
        "error",
        "finished",
        "generation",
        "generations",
        "head_end",
        "inner",
        "keep_from",
        "live",
        "model_index",
        "out",
        "outcome",
        "outer",
        "output",
        "output_errors",
        "output_retries",
        "output_spec",
        "output_text",
        "persisted",
        "prompts",
        "records",
        "refusal",
        "results",
        "resuming",
        "snapshot",
        "step",
        "tracker",
        "vacuous_retried",
    )

    def __init__(
        self, prompts: list[Any] | None = None, tool_choice: Any = None, *, emit: bool = True
    ) -> None:
        self.records: list[SessionRecord] = []
        self.outcome = TurnOutcome.Completed
        self.refusal: str | None = None
        self.error: AgenticError | None = None
        self.generations = 0
        self.persisted = 0
        self.snapshot: Any = None
        self.prompts: list[Any] = prompts or []
        self.choices: list[Any] = (
            list(tool_choice) if isinstance(tool_choice, (list, tuple)) else [tool_choice]
        )
        self.emit = emit
        self.out: list[Any] = []
        self.keep_from = 0
        self.head_end = 0
        self.inner = 0
        self.outer = 0
        self.step = 0
        self.vacuous_retried = False
        self.model_index = 0
        self.generation: Generation | None = None
        self.live: dict[str, AssistantMessage] = {}
        self.calls: list[ToolCall] = []
        self.results: list[ToolResultMessage | None] = []
        self.finished = False
        self.awaiting: list[ToolCall] = []
        self.decisions: dict[str, Any] = {}
        self.resuming = False
        self.tracker: Any = None
        # typed structured output (agentic/output.py), checked by ``decide``
        self.output_spec: Any = None
        self.output: Any = None
        self.output_errors: list[str] = []
        self.output_text = ""
        self.output_retries = 0


def fail(state: TurnState, kind: str, message: str, retryable: bool = False, **context: Any) -> None:
    """End the turn as failed: set ``outcome``/``error`` and append a ``FailedAction`` (never
    persisted; ``finish`` moves it after the ``Summary``). ``kind`` ``budget_exhausted`` and
    ``iteration_limit`` have their own outcomes, every other kind is ``Failed``."""
    state.error = AgenticError(kind=kind, message=message, retryable=retryable)
    state.outcome = _OUTCOMES.get(kind, TurnOutcome.Failed)
    context.setdefault("iteration", state.inner)
    trace = StructuredErrorTrace(frames=["run_turn", kind], context=context)
    state.records.append(SessionRecord.FailedAction(error=state.error, trace=trace))
