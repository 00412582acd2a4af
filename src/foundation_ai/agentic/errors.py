"""Errors of the agent layer (all under ``foundation_ai.errors.FoundationAIError``)."""

from __future__ import annotations

from ..errors import FoundationAIError

__all__ = [
    "ApprovalPendingError",
    "CorruptRecordError",
    "SessionClosedError",
    "SessionExistsError",
    "SessionNotFoundError",
    "StoreError",
]


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

    def __init__(self, session_id: str, candidates: list[str] | None = None) -> None:
        self.session_id = session_id
        self.candidates = list(candidates or [])
        if self.candidates:
            shown = ", ".join(self.candidates[:10])
            message = f"session prefix {session_id!r} is ambiguous ({shown}); give more characters"
        else:
            message = f"no stored session {session_id!r}"
        super().__init__(message)
