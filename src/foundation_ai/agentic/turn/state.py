"""``TurnState``: the one value a turn's phases pass along, and ``fail`` (how a turn fails)."""

from __future__ import annotations

from collections.abc import Sequence
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

__all__ = ["DISCARD", "NOTHING_LIVE", "NO_DECISIONS", "TurnState", "fail"]

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
        "params",
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
        self,
        prompts: Sequence[Any] | None = None,
        tool_choice: Any = None,
        *,
        emit: bool = True,
        out: list[Any] | None = None,
    ) -> None:
        """``out``: where phases put their stream items (default: a new list; a driver that
        yields nothing passes :data:`DISCARD`). The containers a turn may never fill (``calls``,
        ``results``, ``awaiting``, ``output_errors``, ``live``, ``decisions``) start as shared
        empty values that are replaced, never written to: a turn waiting for its model holds
        fewer objects the cycle collector scans."""
        self.records: list[SessionRecord] = []
        self.outcome = TurnOutcome.Completed
        self.refusal: str | None = None
        self.error: AgenticError | None = None
        self.generations = 0
        self.persisted = 0
        self.snapshot: Any = None
        self.prompts: Sequence[Any] = prompts if prompts is not None else ()
        self.choices: Sequence[Any] = (
            _NO_CHOICE
            if tool_choice is None
            else tuple(tool_choice)
            if isinstance(tool_choice, (list, tuple))
            else (tool_choice,)
        )
        self.emit = emit
        self.out: list[Any] = out if out is not None else []
        self.keep_from = 0
        self.head_end = 0
        self.inner = 0
        self.outer = 0
        self.step = 0
        self.vacuous_retried = False
        self.model_index = 0
        self.generation: Generation | None = None
        self.live: dict[str, AssistantMessage] = NOTHING_LIVE
        self.calls: Sequence[ToolCall] = ()
        self.results: list[ToolResultMessage | None] = _NO_RESULTS  # type: ignore[assignment]
        self.finished = False
        self.awaiting: Sequence[ToolCall] = ()
        self.decisions: dict[str, Any] = NO_DECISIONS
        self.resuming = False
        self.tracker: Any = None
        # typed structured output (agentic/output.py), checked by ``decide``
        self.output_spec: Any = None
        self.params: Any = None
        """This turn's ``ModelParams`` when the call gave fields (``run_turn(..., temperature=0)``),
        else ``None``: the session's."""
        self.output: Any = None
        self.output_errors: Sequence[str] = ()
        self.output_text = ""
        self.output_retries = 0


class _Discard(list):  # type: ignore[type-arg]
    """A list that keeps nothing: ``out`` of a turn whose driver yields nothing (``run_quiet``)."""

    __slots__ = ()

    def append(self, item: Any) -> None:
        pass

    def extend(self, items: Any) -> None:
        pass

    def __iadd__(self, items: Any) -> _Discard:  # type: ignore[misc]
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        pass


DISCARD: list[Any] = _Discard()
"""``TurnState.out`` for a driver that yields nothing: every item put there is dropped (shared)."""
NOTHING_LIVE: dict[str, Any] = {}
"""``TurnState.live`` while no generation runs (shared, never written: a generation has its own)."""
NO_DECISIONS: dict[str, Any] = {}
"""``TurnState.decisions`` when no human decided (shared, never written: replaced when set)."""
_NO_CHOICE = (None,)
_NO_RESULTS: tuple[()] = ()


def fail(state: TurnState, kind: str, message: str, retryable: bool = False, **context: Any) -> None:
    """End the turn as failed: set ``outcome``/``error`` and append a ``FailedAction`` (never
    persisted; ``finish`` moves it after the ``Summary``). ``kind`` ``budget_exhausted`` and
    ``iteration_limit`` have their own outcomes, every other kind is ``Failed``."""
    state.error = AgenticError(kind=kind, message=message, retryable=retryable)
    state.outcome = _OUTCOMES.get(kind, TurnOutcome.Failed)
    context.setdefault("iteration", state.inner)
    trace = StructuredErrorTrace(frames=["run_turn", kind], context=context)
    state.records.append(SessionRecord.FailedAction(error=state.error, trace=trace))
