"""``Answer``: the reply of ``AgentSession.ask`` (its text, or the structured output of ``output_type``, and
the ``Turn``; docs/concepts.md).
"""

from __future__ import annotations

from typing import Any

from ..types import (
    AssistantMessage,
    StopReason,
    UsageReport,
)
from .errors import ApprovalRequiredError, TurnFailedError
from .events import TurnOutcome
from .turn_result import Turn

__all__ = ["Answer"]


class Answer:
    """The result of :meth:`AgentSession.ask`: ``text`` plus the ``turn`` behind it. It
    compares equal to its text (``agent.ask("Yes or no?") == "yes"``) and prints as it."""

    __slots__ = ("text", "turn")

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.text = turn.text()

    @property
    def truncated(self) -> bool:
        """True when the answer was cut at ``ModelParams.max_tokens`` (its last output stopped
        with ``StopReason.Length``): the text is incomplete."""
        return _cut_at_max_tokens(self.turn)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Answer):
            return self.text == other.text and self.turn is other.turn
        if isinstance(other, str):
            return self.text == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.text)

    @property
    def usage(self) -> UsageReport:
        """The turn's usage."""
        return self.turn.usage()

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Answer({self.text!r})"


def _cut_at_max_tokens(turn: Turn) -> bool:
    for m in reversed(turn.messages()):
        if isinstance(m, AssistantMessage):
            return isinstance(m.stop_reason, StopReason.Length)
    return False


def _answer(turn: Turn, output_type: Any) -> Any:
    """What ``ask`` returns: the text for ``output_type=str``, the validated output for an
    output type, else an :class:`Answer`.

    Raises:
        ApprovalRequiredError: the turn paused for approval (``error.calls`` are waiting).
        TurnFailedError: ``kind`` ``"length"``: the answer was cut at ``max_tokens`` before any
            text (a reasoning model can spend them all on reasoning): never an empty answer.
    """
    if turn.outcome is TurnOutcome.AwaitingApproval:
        raise ApprovalRequiredError(turn, turn.awaiting)
    if turn.output_spec is None and not turn.text() and _cut_at_max_tokens(turn):
        raise TurnFailedError(
            turn,
            "length",
            "the answer was cut at max_tokens before any text (a reasoning model may spend them"
            " all on reasoning): raise ModelParams.max_tokens",
        )
    if output_type is str:
        return turn.text()
    return Answer(turn) if turn.output_spec is None else turn.output
