"""Errors of the agent layer (all under ``foundation_ai.errors.FoundationAIError``)."""

from __future__ import annotations

from ..errors import FoundationAIError

__all__ = ["ApprovalPendingError", "CorruptRecordError", "SessionClosedError"]


class SessionClosedError(FoundationAIError):
    """The ``AgentSession`` (or its ``SessionStore``) was closed; build or resume a new one."""


class ApprovalPendingError(FoundationAIError):
    """The session's last turn paused for approval: ``approve``/``deny`` its pending tool calls
    (``AgentSession.pending_approvals()``) before starting another turn; or an ``approve``/``deny``
    named no pending call."""


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
