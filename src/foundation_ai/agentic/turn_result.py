"""``Turn``: what one turn of an :class:`~foundation_ai.agentic.session.AgentSession` produced (its records,
outcome, text, tool calls and usage; docs/concepts.md: Events).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..types import (
    AgenticError,
    AssistantMessage,
    Messages,
    SessionRecord,
    StopReason,
    TextContent,
    TokenSnapshot,
    ToolCall,
    ToolResultMessage,
    UsageReport,
    UserMessage,
)
from .errors import OutputValidationError, RefusalError, TurnFailedError
from .events import TurnOutcome, TurnSummary
from .output import OutputSpec
from .turn import (
    TurnState,
)

__all__ = ["Turn"]

_CONVERSATION, _SUMMARY = SessionRecord.Conversation, SessionRecord.Summary


class Turn:
    """A finished turn.

    Attributes:
        records: what the turn produced, in order: ``Conversation`` (one per persisted message),
            ``Retracted``, ``Summary`` and, for a failed turn, a last ``FailedAction``.
        outcome: a :class:`TurnOutcome`.
        output: the answer as the requested ``output_type`` (validated), or the text.
        error: why it did not complete (``None`` when completed).
        summary: the :class:`TurnSummary`.
    """

    __slots__ = (
        "_counts",
        "_output",
        "_summary",
        "_usage",
        "awaiting",
        "error",
        "outcome",
        "output_spec",
        "records",
        "refusal",
    )

    def __init__(self, state: TurnState, usage: UsageReport | Callable[[], UsageReport]) -> None:
        """``usage``: the turn's cumulative usage, or a function returning it (called once,
        when first needed: see :meth:`TokenLedger.turn_usage`)."""
        self.records: list[SessionRecord] = state.records
        self.outcome: TurnOutcome = state.outcome
        self.error: AgenticError | None = state.error
        self.output_spec: OutputSpec | None = state.output_spec
        """The output type asked for (``None``: plain text)."""
        self.refusal: str | None = state.refusal
        """The model's refusal text when the outcome is ``Refused``."""
        # the turn's own lists (a finished turn's state is not used again): no copies
        self._output = (state.output, state.output_errors, state.output_text)
        awaiting = state.awaiting
        self.awaiting: list[ToolCall] = awaiting if type(awaiting) is list else list(awaiting)
        """The tool calls the turn paused on (outcome ``AwaitingApproval``), else empty."""
        self._usage = usage
        self._counts = (state.persisted, state.generations, state.snapshot)
        self._summary: TurnSummary | None = None

    @property
    def summary(self) -> TurnSummary:
        """The :class:`TurnSummary` (messages persisted, usage, model calls, outcome), built
        on first read."""
        made = self._summary
        if made is None:
            persisted, generations, snapshot = self._counts
            made = self._summary = TurnSummary(
                outcome=self.outcome,
                message_count=persisted,
                usage=snapshot or TokenSnapshot.from_usage(self.usage()),
                generations=generations,
                error=self.error,
                refusal=self.refusal,
            )
        return made

    @property
    def stop_reason(self) -> StopReason:
        """``Stop`` (completed), ``StopReason.REFUSAL`` (refused), ``Aborted``, ``Error``
        (failed) or ``Message(kind)`` (budget, iteration limit)."""
        if self.outcome is TurnOutcome.Completed:
            return StopReason.STOP
        if self.outcome is TurnOutcome.Refused:
            return StopReason.REFUSAL
        if self.outcome is TurnOutcome.Aborted:
            return StopReason.ABORTED
        if self.outcome is TurnOutcome.Failed:
            return StopReason.ERROR
        return StopReason.Message(self.outcome.value)

    @property
    def ok(self) -> bool:
        """True when the turn completed."""
        return self.outcome is TurnOutcome.Completed

    def messages(self) -> list[Messages]:
        """The messages persisted by the turn, in order."""
        return [r.message for r in self.records if isinstance(r, SessionRecord.Conversation)]

    def text(self) -> str:
        """The answer: the text outputs after the last tool result or user message (joined)."""
        out: list[str] = []
        records = self.records
        i = len(records)
        while i:  # from the end back to the last tool result or user message
            i -= 1
            r = records[i]
            # exact types first: ``isinstance`` on these classes is the slower check
            kind = type(r)
            if kind is not _CONVERSATION and (kind is _SUMMARY or not isinstance(r, _CONVERSATION)):
                continue
            m = r.message  # type: ignore[attr-defined]
            kind = type(m)
            if kind is not AssistantMessage and (
                kind is UserMessage or kind is ToolResultMessage or not isinstance(m, AssistantMessage)
            ):
                break
            c = m.content
            if type(c) is TextContent or (type(c) is not ToolCall and isinstance(c, TextContent)):
                out.append(c.content)
        if len(out) == 1:  # the usual answer: one text output
            return out[0]
        out.reverse()
        return "".join(out)

    def tool_calls(self) -> list[ToolCall]:
        """Every tool call of the turn, in order."""
        return [
            m.content
            for m in self.messages()
            if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall)
        ]

    def tool_results(self) -> list[ToolResultMessage]:
        """Every tool result of the turn, in order."""
        return [m for m in self.messages() if isinstance(m, ToolResultMessage)]

    def usage(self) -> UsageReport:
        """Cumulative usage of the turn (tokens; cost in USD)."""
        usage = self._usage
        if isinstance(usage, UsageReport):
            return usage
        self._usage = made = usage()  # the ledger's report, built on first need
        return made

    @property
    def output(self) -> Any:
        """The answer: an instance of the turn's ``output_type`` (validated), or :meth:`text`
        when none was asked for. For a turn that did not complete: ``None`` (with an output
        type) or the partial text."""
        if self.output_spec is None:
            return self.text()
        return self._output[0]

    def raise_for_outcome(self) -> None:
        """Raise when the turn ended without an answer; return when it completed or was aborted.
        (``run_turn`` calls it for every outcome but ``Refused``; ``ask`` for every outcome.)

        Raises:
            RefusalError: the model refused (outcome ``Refused``).
            OutputValidationError: no answer matched the ``output_type``, retries included.
            TurnFailedError: the outcome is ``Failed``, ``BudgetExhausted``, ``IterationLimit``
                or ``LoopDetected`` (``kind`` and ``detail`` from :attr:`error`).
        """
        if self.outcome in (TurnOutcome.Completed, TurnOutcome.Aborted, TurnOutcome.AwaitingApproval):
            return  # a pause for approval is not a failure: approve()/deny() continue it
        if self.outcome is TurnOutcome.Refused:
            code = self.refusal or ""
            said = self.text().strip()
            # the provider's explanation; a bare reason code gives way to what the model said
            raise RefusalError(self, said if said and code in ("refusal", "content_filter", "") else code)
        if self.error is not None and self.error.kind == "output_validation":
            _, errors, text = self._output
            raise OutputValidationError(self, errors or [self.error.message], text)
        err = self.error
        kind = err.kind if err is not None else self.outcome.value
        detail = err.message if err is not None else f"the turn ended as {self.outcome.value}"
        raise TurnFailedError(self, kind, detail, retryable=bool(err is not None and err.retryable))

    def __repr__(self) -> str:
        return (
            f"Turn(outcome={self.outcome.name}, messages={len(self.messages())}, text={self.text()[:40]!r})"
        )
