"""Submitting durable turns and following them from any process: ``DurableClient``,
``TurnHandle``, ``enqueue_turn``.

A client needs no running worker and no DBOS launch: it writes to DBOS's system database
through ``DBOSClient`` (https://docs.dbos.dev/python/reference/client) and reads the session
store. Turns are enqueued on the partitioned turn queue with the session id as partition key
(one turn of a session at a time, in order; see :mod:`foundation_ai.durable.worker`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any

import msgspec
from dbos import DBOSClient, EnqueueOptions
from dbos import error as dbos_errors

from ..agentic.errors import ApprovalPendingError
from ..agentic.stores import SessionStore
from ..errors import ConfigurationError, FoundationAIError
from ..ids import new_scru128
from ..types import Messages, SessionRecord, ToolCall, from_json, to_json
from .approvals import APPROVAL_TOPIC, PENDING_EVENT
from .config import APP_VERSION, DurableConfig
from .steps import STEER_TOPIC
from .worker import WORKFLOW_NAME, TurnResult, _tag

__all__ = [
    "DurableClient",
    "InvalidTurnIdError",
    "TurnFailedError",
    "TurnHandle",
    "TurnIdConflictError",
    "checked_turn_id",
    "enqueue_turn",
    "system_database_errors",
]

TERMINAL = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})
"""DBOS workflow statuses after which a turn changes no more."""

_RESULT = msgspec.json.Decoder(TurnResult)


class TurnFailedError(FoundationAIError):
    """The durable turn's workflow ended in error or was cancelled (``status``: the DBOS
    status; the message says why)."""

    def __init__(self, turn_id: str, status: str, detail: str) -> None:
        super().__init__(f"turn {turn_id} ended {status}: {detail}")
        self.turn_id, self.status = turn_id, status


class TurnIdConflictError(ConfigurationError, ValueError):
    """A turn id given to :meth:`DurableClient.enqueue_turn` already names a turn of another
    session or with another prompt (``turn_id``, ``session_id``: the existing turn's)."""

    def __init__(self, turn_id: str, session_id: str, what: str) -> None:
        super().__init__(
            f"turn id {turn_id!r} is already taken by {what}; choose another id (the same "
            "session and prompt again return the existing turn)"
        )
        self.turn_id, self.session_id = turn_id, session_id


class InvalidTurnIdError(ConfigurationError, ValueError):
    """A turn id that cannot name a turn: empty or only white space, or holding control
    characters (``turn_id``: the id given). Nothing is enqueued."""

    def __init__(self, turn_id: str, why: str) -> None:
        super().__init__(f"turn id {turn_id!r} {why}: give a non-empty id of printable characters")
        self.turn_id = turn_id


def checked_turn_id(turn_id: str | None) -> str | None:
    """``turn_id`` when it can name a turn (``None`` passes: a fresh id is made).

    Raises:
        InvalidTurnIdError: empty or white space only, or with a control character.
    """
    if turn_id is None:
        return None
    if not turn_id.strip():
        raise InvalidTurnIdError(turn_id, "is empty")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in turn_id):
        raise InvalidTurnIdError(turn_id, "holds a control character")
    return turn_id


@contextlib.contextmanager
def system_database_errors(url: str) -> Iterator[None]:
    """Raise a failure to open or migrate DBOS's system database (a file that is not a
    database, a server that refuses) as :class:`ConfigurationError` naming the database, with
    the driver's first line (no traceback for a garbage file)."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, FoundationAIError) or not _database_failure(exc) or _unreachable(exc, url):
            raise  # an unreachable server is the command line's "cannot reach the database"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        where = url.split("://", 1)[1] if url.startswith("sqlite") else url.split("@")[-1]
        raise ConfigurationError(f"cannot open the durable turns' DBOS database {where}: {first}") from None


def _unreachable(exc: BaseException, url: str) -> bool:
    """True when a PostgreSQL server could not be reached (psycopg's ``OperationalError``, also
    wrapped by SQLAlchemy): not a broken database, so it is not reported as one."""
    if url.startswith("sqlite"):
        return False
    orig = getattr(exc, "orig", None) or exc
    kind = type(orig)
    return kind.__name__ == "OperationalError" and kind.__module__.startswith("psycopg")


def _database_failure(exc: BaseException) -> bool:
    """True for errors of the database drivers DBOS uses (SQLAlchemy, sqlite3, psycopg) and
    DBOS's own."""
    seen: BaseException | None = exc
    while seen is not None:
        root = type(seen).__module__.split(".")[0]
        if root in ("sqlalchemy", "sqlite3", "psycopg", "dbos"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _same_prompt(stored: list[Messages], given: list[Messages]) -> bool:
    """The same messages, whatever their ids and timestamps (made fresh at each call)."""
    if len(stored) != len(given):
        return False
    for a, b in zip(stored, given, strict=True):
        if type(a) is not type(b):
            return False
        same = {"id": a.id}
        if hasattr(a, "timestamp"):
            same["timestamp"] = a.timestamp
        if msgspec.structs.replace(b, **same) != a:
            return False
    return True


def _prompt_messages(prompt: str | Messages | Sequence[str | Messages]) -> list[Messages]:
    from ..agentic.turn_inputs import _prompt_messages as check

    return check(prompt)


class TurnHandle:
    """A durable turn: ``turn_id`` (its DBOS workflow id), ``session_id``, ``prompt_id`` (its
    first prompt message's id). ``status()``, ``result()``, ``events()``, ``steer()``,
    ``abort()`` work from any process (rebuild a handle with :meth:`DurableClient.handle`)."""

    def __init__(
        self, client: DurableClient, turn_id: str, session_id: str, prompt_id: str, *, served: bool = False
    ) -> None:
        self.client, self.turn_id, self.session_id, self.prompt_id = client, turn_id, session_id, prompt_id
        self.served = served
        """A turn of ``serve --db`` (its workflow returns the turn's last event, not a
        :class:`TurnResult`: :meth:`result` builds one from it and the stored answer)."""

    def __repr__(self) -> str:
        return f"TurnHandle({self.turn_id!r}, session={self.session_id!r})"

    def status(self) -> str:
        """The DBOS status: ``ENQUEUED`` (waiting), ``PENDING`` (running), ``SUCCESS``, ``ERROR``,
        ``CANCELLED`` or ``MAX_RECOVERY_ATTEMPTS_EXCEEDED``."""
        return str(self.client.dbos.retrieve_workflow(self.turn_id).get_status().status)

    def result(self, timeout: float | None = None, poll: float = 0.1) -> TurnResult:
        """Wait for the turn to end and return its :class:`TurnResult`.

        Raises:
            TimeoutError: still running after ``timeout`` seconds.
            TurnFailedError: the workflow ended in error or was cancelled.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            st = self.client.dbos.retrieve_workflow(self.turn_id).get_status()
            if st.status == "SUCCESS":
                return self._served_result(str(st.output)) if self.served else _RESULT.decode(str(st.output))
            if st.status in TERMINAL:
                raise TurnFailedError(self.turn_id, str(st.status), str(st.error or ""))
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"turn {self.turn_id} still {st.status} after {timeout} s")
            time.sleep(poll)

    def _served_result(self, output: str) -> TurnResult:
        from ..agentic.events import TurnEvent, TurnOutcome

        last: TurnEvent = from_json(output, TurnEvent)
        summary = getattr(last, "summary", None)
        if summary is None:  # not a served turn's last event
            raise FoundationAIError(f"turn {self.turn_id}: its result is not a turn's last event")
        recs = self.client.store.load(self.session_id)
        start = _index_of(recs, self.prompt_id)
        answers = [
            r.message
            for r in ([] if start is None else _this_turn(recs[start:]))
            if isinstance(r, SessionRecord.Conversation) and isinstance(r.message, Messages.Assistant)
        ]
        error = summary.error
        return TurnResult(
            session_id=self.session_id,
            ok=error is None and summary.outcome is TurnOutcome.Completed,
            outcome=_tag(summary.outcome),
            stop_reason="" if not answers else _tag(answers[-1].stop_reason),
            text="" if not answers else answers[-1].text() or "",
            messages=summary.message_count,
            error="" if error is None else error.message,
        )

    def events(self, poll: float = 0.2, timeout: float | None = None) -> Iterator[SessionRecord]:
        """The records the turn stores, as they are stored (read from the session store,
        starting at the turn's prompt), until the turn ends.

        Raises:
            TimeoutError: the turn has not ended after ``timeout`` seconds.
        """
        seen = 0
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            done = self.status() in TERMINAL
            recs = self.client.store.load(self.session_id)
            start = _index_of(recs, self.prompt_id)
            if start is not None:
                mine = _this_turn(recs[start:])
                yield from mine[seen:]
                seen = max(seen, len(mine))
            if done:
                return
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"turn {self.turn_id} still running after {timeout} s")
            time.sleep(poll)

    def steer(self, message: str | Messages) -> None:
        """Redirect the running turn (it takes the message before its next model call)."""
        self.client.steer(self.turn_id, message)

    def abort(self) -> None:
        """End the running turn as aborted (before its next model call)."""
        self.client.abort(self.turn_id)


def _index_of(recs: list[SessionRecord], message_id: str) -> int | None:
    for i, r in enumerate(recs):
        if isinstance(r, SessionRecord.Conversation) and r.message.id == message_id:
            return i
    return None


def _this_turn(recs: list[SessionRecord]) -> list[SessionRecord]:
    """The records of the turn ``recs`` starts with: up to its summary. A pause for approval
    writes a summary too; the turn's continuation after it starts with the decided calls'
    results (never with a user message, as the next turn does), so it is part of the turn."""
    for i, r in enumerate(recs):
        if isinstance(r, SessionRecord.Summary):
            after = recs[i + 1] if i + 1 < len(recs) else None
            if not (
                isinstance(after, SessionRecord.Conversation)
                and isinstance(after.message, Messages.ToolResult)
            ):
                return recs[: i + 1]
    return recs


class DurableClient:
    """Submits and follows durable turns (a context manager; :meth:`close` when done).

    Args:
        config: the same :class:`DurableConfig` the workers use.
        store: the session store to read events from (default: ``config.open_store()``).

    Raises:
        ConfigurationError: a bad config, or DBOS's system database cannot be opened (a file
            that is not a database: the message names it).
    """

    def __init__(self, config: DurableConfig, store: SessionStore | None = None) -> None:
        self.config = config
        url = config.system_database_url
        with system_database_errors(url):
            self.dbos = DBOSClient(system_database_url=url)
            # DBOSClient never creates the schema; a turn may be submitted before any worker ran.
            self.dbos._sys_db.run_migrations()
        self._store = store
        self._own_store = store is None

    @property
    def store(self) -> SessionStore:
        """The session store (opened on first use)."""
        if self._store is None:
            self._store = self.config.open_store()
        return self._store

    def enqueue_turn(
        self,
        session_id: str,
        prompt: str | Messages | Sequence[str | Messages],
        *,
        turn_id: str | None = None,
    ) -> TurnHandle:
        """Enqueue a turn of ``session_id`` (created by its first turn) and return its handle.
        ``turn_id`` makes the call idempotent: enqueueing the same id again with the same
        session and prompt returns the existing turn (``docs/scaling.md``, "Turn ids").

        Raises:
            TypeError / ValueError: a bad prompt (nothing is enqueued).
            TurnIdConflictError: ``turn_id`` names a turn of another session or with another
                prompt (nothing is enqueued).
            InvalidTurnIdError: ``turn_id`` is empty, white space only or holds a control
                character (nothing is enqueued).
        """
        turn_id = checked_turn_id(turn_id)
        msgs = _prompt_messages(prompt)
        wf_id = turn_id or f"turn-{new_scru128()}"
        opts: EnqueueOptions = {
            "workflow_name": WORKFLOW_NAME,
            "queue_name": self.config.queue,
            "workflow_id": wf_id,
            "queue_partition_key": session_id,
            "app_version": APP_VERSION,
        }
        try:
            self.dbos.enqueue(opts, session_id, to_json(msgs).decode())
        except dbos_errors.DBOSConflictingWorkflowError:
            raise TurnIdConflictError(wf_id, "", "a workflow that is not a durable turn") from None
        if turn_id is None:
            return TurnHandle(self, wf_id, session_id, msgs[0].id)
        # DBOS keeps the first enqueue of an id: check it was this one, or the same turn
        rows = self.dbos.list_workflows(workflow_ids=[wf_id], load_input=True)
        args = rows[0].input["args"] if rows and rows[0].input else []
        stored_sid = str(args[0]) if args else ""
        stored: list[Messages] = from_json(args[1], list[Messages]) if len(args) > 1 else []
        if stored_sid != session_id:
            raise TurnIdConflictError(wf_id, stored_sid, f"a turn of session {stored_sid!r}")
        if not _same_prompt(stored, msgs):
            raise TurnIdConflictError(wf_id, stored_sid, "a turn of this session with another prompt")
        return TurnHandle(self, wf_id, session_id, stored[0].id)

    def handle(self, turn_id: str) -> TurnHandle:
        """The handle of an enqueued turn.

        Raises:
            FoundationAIError: no such turn.
        """
        st = self.dbos.retrieve_workflow(turn_id).get_status() if self._exists(turn_id) else None
        if st is None or not st.input or len(st.input["args"]) < 2:
            raise FoundationAIError(f"no durable turn {turn_id!r}")
        from .served import SERVED_WORKFLOW

        served = st.name == SERVED_WORKFLOW  # (agent, session_id, prompt, params)
        args = st.input["args"][1:] if served else st.input["args"]
        if len(args) < 2:
            raise FoundationAIError(f"no durable turn {turn_id!r}")
        session_id, prompt = args[0], args[1]
        first: Messages = from_json(prompt, list[Messages])[0]
        return TurnHandle(self, turn_id, str(session_id), first.id, served=served)

    def _exists(self, turn_id: str) -> bool:
        return bool(self.dbos.list_workflows(workflow_ids=[turn_id]))

    def steer(self, turn_id: str, message: str | Messages) -> None:
        """Send a steering message to a turn (a DBOS message; the turn takes it before its
        next model call; sent to a finished turn it is never read).

        Raises:
            TypeError / ValueError: ``message`` is not a non-empty ``str`` / ``Messages``.
        """
        msg = message if isinstance(message, Messages) else Messages.agent(message)
        if isinstance(message, str) and not message.strip():
            raise ValueError("the steering message is empty")
        self.dbos.send(turn_id, {"kind": "steer", "message": to_json(msg).decode()}, STEER_TOPIC)

    def abort(self, turn_id: str) -> None:
        """Ask a turn to end as aborted (before its next model call; a turn waiting for
        approvals ends at once, its pending calls given "aborted" results)."""
        self.dbos.send(turn_id, {"kind": "abort"}, STEER_TOPIC)
        self.dbos.send(turn_id, {"kind": "abort"}, APPROVAL_TOPIC)

    def pending_approvals(self, turn_id: str, timeout: float = 0.0) -> list[ToolCall]:
        """The tool calls the turn waits for a decision on, in call order (``[]`` when none;
        ``timeout``: seconds to wait for the turn to publish its first list)."""
        raw = self.dbos.get_event(turn_id, PENDING_EVENT, timeout_seconds=timeout)
        return [] if raw is None else from_json(raw, list[ToolCall])

    def approve(self, turn_id: str, call_id: str) -> None:
        """Approve a pending tool call of a turn waiting for approvals (the worker holding the
        turn runs the call once every pending call is decided; ``docs/scaling.md``).

        Raises:
            ApprovalPendingError: no call ``call_id`` waits for a decision in that turn.
        """
        self._decide(turn_id, call_id, {"kind": "approve", "call_id": call_id})

    def deny(self, turn_id: str, call_id: str, reason: str = "the user denied it") -> None:
        """Deny a pending tool call (it gets an error result carrying ``reason``); see
        :meth:`approve`.

        Raises:
            ApprovalPendingError: no call ``call_id`` waits for a decision in that turn.
            ValueError: an empty ``reason``.
        """
        if not reason.strip():
            raise ValueError("the reason is empty")
        self._decide(turn_id, call_id, {"kind": "deny", "call_id": call_id, "reason": reason})

    def _decide(self, turn_id: str, call_id: str, msg: dict[str, str]) -> None:
        waiting = [c.id for c in self.pending_approvals(turn_id)]
        if call_id not in waiting:
            known = ", ".join(waiting) or "none"
            raise ApprovalPendingError(
                f"no tool call {call_id!r} waits for approval in turn {turn_id} (waiting: {known})"
            )
        self.dbos.send(turn_id, msg, APPROVAL_TOPIC)

    def turns(self, session_id: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Recent turns, newest first: ``{"turn_id", "session_id", "status", "executor"}``."""
        rows = self.dbos.list_workflows(name=WORKFLOW_NAME, limit=limit, sort_desc=True, load_input=True)
        out = []
        for st in rows:
            sid = st.input["args"][0] if st.input and st.input["args"] else None
            if session_id is None or sid == session_id:
                out.append(
                    {
                        "turn_id": st.workflow_id,
                        "session_id": sid,
                        "status": st.status,
                        "executor": st.executor_id,
                    }
                )
        return out

    def recover(self, executor_ids: Sequence[str]) -> list[str]:
        """Hand back the running turns of workers that stopped (crashed, killed, shut down):
        they are re-enqueued and another worker resumes each from its last checkpointed step
        (DBOS workflow recovery, https://docs.dbos.dev/architecture#workflow-recovery).
        Returns the turn ids handed back. Idempotent: a turn already resumed elsewhere is left.
        """
        from dbos._utils import INTERNAL_QUEUE_NAME

        sys_db = self.dbos._sys_db
        out: list[str] = []
        for ex in executor_ids:
            for wf in sys_db.get_pending_workflows(ex, APP_VERSION):
                if sys_db.reenqueue_for_recovery(wf.workflow_id, [ex], INTERNAL_QUEUE_NAME):
                    out.append(wf.workflow_id)
        return out

    def close(self) -> None:
        """Close the DBOS client and the session store (if this client opened it)."""
        self.dbos.destroy()
        if self._own_store and self._store is not None:
            self._store.close()

    def __enter__(self) -> DurableClient:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def enqueue_turn(
    session_id: str, prompt: str | Messages | Sequence[str | Messages], *, config: DurableConfig
) -> TurnHandle:
    """Enqueue one turn with a new :class:`DurableClient` (keep the handle's ``client`` open
    while you use the handle; ``handle.client.close()`` when done)."""
    return DurableClient(config).enqueue_turn(session_id, prompt)
