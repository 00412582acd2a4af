"""A durable turn's own reads and writes of DBOS's system database, where DBOS's public calls
would take more round trips (each a round trip on PostgreSQL).

- :func:`probe_turn`, at the turn's start. The turn needs three things before its first model
  call: who owns the workflow now (:mod:`~foundation_ai.durable.ownership`: checked before the
  turn's first session write), which operations an earlier run of it recorded (a recovered run
  steers at each position as that run did, :class:`~foundation_ai.durable.steps.DurableSteps`)
  and whether a steering message waits. One statement (``UNION ALL``) reads the three, while
  the session's records load. What it reads is as of the probe: a steering message sent after
  it is taken at the model call after the first (as one sent right after any steering check),
  and the owner it read counts as a check for
  :data:`~foundation_ai.durable.ownership.CONFIRMED_SECONDS` only.
- :func:`message_waits`, the look for a steering message before each later model call: one
  statement (on PostgreSQL in autocommit: no ``BEGIN`` / ``COMMIT`` round trips around it).
- :func:`record_claim`, a side-effect tool's claim (``DurableSteps``) at a position the probe
  found unrecorded: the claim's step row is written at once (one transaction, which checks this
  run's ownership token as DBOS's own step checkpoints do), without the read of a recorded
  outcome that ``DBOS.run_step_async`` does first. Nobody else can have recorded that position
  since the probe: a run writing for the workflow must own it, and DBOS refuses this run's
  write once another run does (``DBOSWorkflowConflictIDError``). A recovered run meets the row
  like any recorded step (``DBOS`` replays it). The workflow's cancellation, which DBOS's read
  also checks, is checked by the tool's own step right after, before the tool runs.
"""

from __future__ import annotations

import functools
import inspect
import time
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

__all__ = ["TurnProbe", "claim_supported", "message_waits", "probe_turn", "record_claim"]

_OWNER, _STEP, _MESSAGE = 0, 1, 2


@dataclass(slots=True, frozen=True)
class TurnProbe:
    """What :func:`probe_turn` read.

    Attributes:
        owner: the workflow's ownership token (``None``: unowned or no such workflow).
        recorded: function id -> name of the operations recorded for the workflow.
        message_waits: an unconsumed message on the steering topic waits for the workflow.
    """

    owner: str | None
    recorded: dict[int, str] = field(default_factory=dict)
    message_waits: bool = False


def _reader(sys_db: Any) -> Any:
    """A connection of the system database for one read statement: on PostgreSQL in
    autocommit (no ``BEGIN`` and ``COMMIT`` round trips around it); on SQLite as it is (a
    ``SELECT`` opens no transaction there, and DBOS's connections keep their ``IMMEDIATE``
    setting)."""
    conn = sys_db.engine.connect()
    if sys_db.engine.dialect.name == "postgresql":
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
    return conn


def message_waits(sys_db: Any, workflow_id: str, topic: str) -> bool:
    """Whether an unconsumed message on ``topic`` waits for ``workflow_id`` (one statement;
    blocking: call it on a worker thread).

    Raises:
        Exception: whatever the database or this DBOS release's tables raise.
    """
    msgs = sys_db.tables.notifications
    query = (
        sa.select(sa.literal(1))
        .where(
            *sys_db._wf(msgs, workflow_id, "destination_uuid"),
            msgs.c.topic == topic,
            msgs.c.consumed == sa.false(),
        )
        .limit(1)
    )
    with _reader(sys_db) as conn:
        return conn.execute(query).first() is not None


def probe_turn(sys_db: Any, workflow_id: str, topic: str) -> TurnProbe:
    """Read :class:`TurnProbe` for ``workflow_id`` (steering topic ``topic``) from DBOS's
    system database ``sys_db`` in one statement (blocking: call it on a worker thread).

    Raises:
        Exception: whatever the database or this DBOS release's tables raise (the caller then
            reads the three one by one, as DBOS offers them).
    """
    tables = sys_db.tables
    ws, ops, msgs = tables.workflow_status, tables.operation_outputs, tables.notifications

    def row(kind: int, text: Any, number: Any) -> tuple[Any, ...]:
        return (sa.literal(kind, sa.Integer), sa.cast(text, sa.Text), sa.cast(number, sa.Integer))

    query = sa.union_all(
        sa.select(*row(_OWNER, ws.c.owner_xid, sa.literal(0))).where(*sys_db._wf(ws, workflow_id)),
        sa.select(*row(_STEP, ops.c.function_name, ops.c.function_id)).where(*sys_db._wf(ops, workflow_id)),
        sa.select(*row(_MESSAGE, msgs.c.topic, sa.literal(0))).where(
            *sys_db._wf(msgs, workflow_id, "destination_uuid"),
            msgs.c.topic == topic,
            msgs.c.consumed == sa.false(),
        ),
    )
    with _reader(sys_db) as conn:
        rows = conn.execute(query).fetchall()
    owner: str | None = None
    recorded: dict[int, str] = {}
    waits = False
    for kind, text, number in rows:
        if kind == _OWNER:
            owner = text
        elif kind == _STEP:
            recorded[int(number)] = str(text)
        else:
            waits = True
    return TurnProbe(owner, recorded, waits)


@functools.cache
def claim_supported() -> bool:
    """Whether this DBOS release has the internals :func:`record_claim` writes through (checked
    once per process): ``SystemDatabase.record_operation_result`` taking ``completed_at_epoch_ms``
    and ``owner_xid``, ``_serialization.serialize_value`` and ``DBOS.reserve_step``. Without
    them a claim is an ordinary DBOS step (a read and a write), not a failed tool call."""
    try:
        from dbos import DBOS
        from dbos._serialization import serialize_value
        from dbos._sys_db import SystemDatabase

        params = inspect.signature(SystemDatabase.record_operation_result).parameters
        return (
            {"completed_at_epoch_ms", "owner_xid"} <= params.keys()
            and callable(serialize_value)
            and callable(getattr(DBOS, "reserve_step", None))
        )
    except (ImportError, AttributeError, TypeError, ValueError):
        return False


def record_claim(dbos: Any, workflow_id: str, function_id: int, name: str, owner_xid: str) -> None:
    """Record the step ``name`` at ``function_id`` of ``workflow_id`` with the output ``True``
    (a claim), as ``DBOS.run_step_async`` would record it, checking ``owner_xid`` in the same
    transaction (blocking: call it on a worker thread). ``dbos``: the DBOS instance.

    Raises:
        dbos.error.DBOSWorkflowConflictIDError: another run owns the workflow.
        dbos.error.DBOSStepNondeterminismError: the position was recorded meanwhile.
    """
    from dbos._serialization import serialize_value

    output, serialization = serialize_value(True, None, dbos._serializer)
    now = int(time.time() * 1000)
    dbos._sys_db.record_operation_result(
        {
            "workflow_uuid": workflow_id,
            "function_id": function_id,
            "function_name": name,
            "output": output,
            "error": None,
            "serialization": serialization,
            "started_at_epoch_ms": now,
            "child_workflow_id": None,
        },
        completed_at_epoch_ms=now,
        owner_xid=owner_xid,
    )
