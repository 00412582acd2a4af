"""Whether this run of a durable turn still owns the turn.

A turn handed to another worker while its first worker still runs it (``recover`` of a live
worker, or a worker that came back after it was declared dead) has two runs for a while. DBOS
gives each run of a workflow an ownership token and refuses the step checkpoints of a run
whose token is no longer the workflow's (``dbos.error.DBOSWorkflowConflictIDError``,
https://docs.dbos.dev/architecture#workflow-recovery). The session store is not part of
DBOS, so the turn checks the same token before each session write: once the turn is owned
elsewhere, the run that lost it stores nothing more and stops at its next step. The new
owner's records stand (``docs/scaling.md``, "Running N workers on M machines").

A step checkpoint DBOS accepted is such a check (DBOS compared the token in its transaction):
a write within :data:`CONFIRMED_SECONDS` of one (the model's answer or a tool's result, stored
right after its step) takes it as the check instead of reading the token again; so does the
turn's first write after the token was read at the turn's start (:mod:`~foundation_ai.durable.sysdb`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from dbos import DBOS
from dbos import error as dbos_errors

__all__ = ["Ownership"]

log = logging.getLogger("foundation_ai.durable")

CONFIRMED_SECONDS = 0.05
"""How long after a step checkpoint DBOS accepted (:meth:`Ownership.confirm`) a session write
counts it as its ownership check (seconds)."""


class Ownership:
    """This run's hold on the durable turn ``workflow_id``.

    Args:
        workflow_id: the turn's DBOS workflow id.
        owner: returns the workflow's current ownership token (``None`` once it is handed
            back), or ``None`` to rely on DBOS's step checks only.
        token: this run's token.
    """

    def __init__(
        self, workflow_id: str, owner: Callable[[], str | None] | None = None, token: str | None = None
    ) -> None:
        self.workflow_id, self._owner, self._token = workflow_id, owner, token
        self.lost = False
        self._confirmed = float("-inf")  # time.monotonic() of the last confirmation

    @classmethod
    def of_this_run(cls) -> Ownership:
        """The ownership of the DBOS workflow running in this task (call it inside the
        workflow function)."""
        wf = DBOS.workflow_id or ""
        try:  # DBOS keeps the token and the owner lookup internal
            from dbos._context import get_local_dbos_context
            from dbos._dbos import _get_dbos_instance

            ctx = get_local_dbos_context()
            token = None if ctx is None else ctx.owner_xid
            sys_db = _get_dbos_instance()._sys_db
        except (ImportError, AttributeError):  # pragma: no cover - another DBOS release
            return cls(wf)
        if token is None:  # pragma: no cover - DBOS sets a token on every run
            return cls(wf)
        return cls(wf, lambda: sys_db.get_workflow_owner(wf), token)

    def still_owned(self) -> bool:
        """False once the turn is owned by another run (checked in the system database: one
        query per call, none within :data:`CONFIRMED_SECONDS` of a :meth:`confirm`, none once
        it is lost)."""
        if self.lost or self._owner is None:
            return not self.lost
        if time.monotonic() - self._confirmed < CONFIRMED_SECONDS:
            return True
        if self._owner() != self._token:
            self.mark_lost()
        return not self.lost

    def observed(self, owner: str | None) -> None:
        """Note the ownership token just read from the system database (e.g. by
        :func:`~foundation_ai.durable.sysdb.probe_turn`): this run's token confirms the
        ownership (:meth:`confirm`), another one marks the turn lost."""
        if self._owner is None:
            return
        if owner == self._token:
            self.confirm()
        else:
            self.mark_lost()

    def confirm(self) -> None:
        """Note that DBOS just accepted a checkpoint of this run (it checked the token in the
        same transaction): this run owned the turn at that moment."""
        if not self.lost:
            self._confirmed = time.monotonic()

    def mark_lost(self) -> None:
        """Record (and log once) that another run owns the turn now."""
        if not self.lost:
            self.lost = True
            log.warning(
                "turn %s was handed to another run while this worker still ran it: "
                "this run stops and stores nothing more",
                self.workflow_id,
            )

    def check(self) -> None:
        """Raise ``DBOSWorkflowConflictIDError`` when the turn is known to be lost (DBOS then
        ends this run and waits for the owner's outcome)."""
        if self.lost:
            raise dbos_errors.DBOSWorkflowConflictIDError(self.workflow_id)
