"""Errors of the agent layer (all under ``foundation_ai.errors.FoundationAIError``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..errors import FoundationAIError

__all__ = [
    "ApprovalPendingError",
    "ApprovalRequiredError",
    "CorruptRecordError",
    "OutputValidationError",
    "RefusalError",
    "SessionClosedError",
    "SessionExistsError",
    "SessionNotFoundError",
    "StoreError",
    "TurnFailedError",
]


class SessionClosedError(FoundationAIError):
    """The ``AgentSession`` (or its ``SessionStore``) was closed; build or resume a new one."""


class ApprovalPendingError(FoundationAIError):
    """The session's last turn paused for approval: ``approve``/``deny`` its pending tool calls
    (``AgentSession.pending_approvals()``) before starting another turn; or an ``approve``/``deny``
    named no pending call."""


class ApprovalRequiredError(ApprovalPendingError):
    """``ask()`` ended in a pause for approval (a tool that needs it was called): there is no
    answer yet, so ``ask`` raises this instead of returning an empty one (docs/tools.md,
    "Approvals"). Decide with ``agent.approve(call.id)`` / ``agent.deny(call.id)``: once every
    call is decided the turn continues and its ``Turn`` is returned. ``run_turn`` does not
    raise: it returns the paused turn (outcome ``AwaitingApproval``).

    Attributes:
        calls: the tool calls waiting for a decision (``ToolCall``, in call order).
        turn: the paused ``Turn``.
    """

    def __init__(self, turn: Any, calls: Sequence[Any]) -> None:
        self.turn = turn
        self.calls = tuple(calls)
        names = ", ".join(f"{c.name} ({c.id})" for c in self.calls) or "none"
        super().__init__(
            f"the turn paused for approval of {len(self.calls)} tool call(s): {names};"
            " approve() or deny() them to continue (run_turn returns the paused turn instead)"
        )


class CorruptRecordError(FoundationAIError):
    """A strict load (``SqliteSessionStore.load(session_id, strict=True)``) met stored records
    that no longer decode.

    Attributes:
        session_id: the session.
        seqs: the ``seq`` numbers of the undecodable rows.
    """

    def __init__(self, session_id: str, seqs: list[int], detail: str) -> None:
        super().__init__(
            f"session {session_id!r}: {len(seqs)} stored record(s) cannot be decoded (seq {seqs}): {detail}"
        )
        self.session_id = session_id
        self.seqs = seqs


class StoreError(FoundationAIError):
    """A session store could not be opened, read or written (the database stayed locked past the
    busy timeout, the disk is full, the file is not a database, …). A failed write stored
    nothing: the same batch may be sent again.

    Attributes:
        path: the store's location (a file path, ``":memory:"`` or a URL without credentials).
        retryable: True when trying again later may succeed (a lock, a busy database).
    """

    def __init__(self, message: str, *, path: str = "", retryable: bool = False) -> None:
        super().__init__(message)
        self.path = path
        self.retryable = retryable


class SessionExistsError(FoundationAIError):
    """``AgentSessionBuilder.build(session_id)`` was given the id of a stored session: resume it
    with ``AgentSessionBuilder.resume(session_id)`` (which loads its history) or pick a new id.

    Attributes:
        session_id: the id.
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} already exists in the store; "
            f"continue it with AgentSession.builder(model).resume({session_id!r}) or build with a new id"
        )
        self.session_id = session_id


class SessionNotFoundError(FoundationAIError):
    """``AgentSessionBuilder.resume(session_id)`` found no stored session with that id, nor a
    single one whose id starts with it (``candidates`` lists the ids a prefix matched when it
    was ambiguous, up to 10).

    Attributes:
        session_id: the id or prefix asked for.
        candidates: the matching ids when the prefix was ambiguous, else empty.
    """

    def __init__(self, session_id: str, candidates: list[str] | None = None, *, hint: str = "") -> None:
        self.session_id = session_id
        self.candidates = list(candidates or [])
        if self.candidates:
            shown = ", ".join(self.candidates[:10])
            message = f"session prefix {session_id!r} is ambiguous ({shown}); give more characters"
        else:
            message = f"no stored session {session_id!r}"
        super().__init__(f"{message}: {hint}" if hint else message)


_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")


class TurnFailedError(FoundationAIError):
    """A turn ended without an answer: raised by ``AgentSession.run_turn``, ``ask`` and their
    async twins when the turn failed (a provider error such as an HTTP 500 or 401, a refused
    connection, a context overflow that could not be trimmed, every model rate limited), ran out
    of budget or iterations, or gave no valid structured output; ``ask`` also raises (as
    :class:`RefusalError`) when the model refused.

    The value-based contract stays below the session: a model's ``stream``/``generate`` return
    an Assistant message with ``StopReason.Error``, and ``TurnStream.events()`` ends with
    ``TurnEvent.Failed``; neither raises this. An aborted turn (``abort()``) does not raise.

    Attributes:
        turn: the finished :class:`~foundation_ai.agentic.turn_result.Turn` (its records, outcome and usage; what it produced is kept
            and persisted).
        kind: the error kind (``AgenticError.kind``): ``"provider"``, ``"rate_limited"``,
            ``"context_overflow"``, ``"budget_exhausted"``, ``"iteration_limit"``,
            ``"output_validation"``, ``"refused"``.
        detail: the provider's text (or the loop's reason), API keys masked.
        status_code: the HTTP status named in ``detail`` (``"... (HTTP 401)"``), else ``None``.
        retryable: whether trying again later may succeed (e.g. a rate limit).
    """

    def __init__(self, turn: Any, kind: str, detail: str, *, retryable: bool = False) -> None:
        super().__init__(f"the turn failed ({kind}): {detail}")
        self.turn = turn
        self.kind = kind
        self.detail = detail
        self.retryable = retryable
        found = _HTTP_STATUS.search(detail)
        self.status_code: int | None = int(found.group(1)) if found else None


class OutputValidationError(TurnFailedError):
    """The model's answers did not match the requested ``output_type``, after every retry
    (``kind == "output_validation"``).

    Attributes:
        errors: what was wrong with the last answer, one line per problem.
        text: the last answer, as the model sent it.
    """

    def __init__(self, turn: Any, errors: Sequence[str], text: str) -> None:
        self.errors = list(errors)
        self.text = text
        super().__init__(turn, "output_validation", "; ".join(self.errors) or "invalid output")


class RefusalError(TurnFailedError):
    """The model refused to answer (``kind == "refused"``; the turn's outcome is
    ``TurnOutcome.Refused``), raised by ``ask``/``aask``, which promise an answer;
    ``run_turn`` returns the refused ``Turn`` (a typed outcome). A refusal is never retried and
    never reported as a parse error.

    Attributes:
        refusal: the provider's refusal text (or reason code).
    """

    def __init__(self, turn: Any, refusal: str) -> None:
        self.refusal = refusal
        super().__init__(turn, "refused", refusal or "the model refused")
