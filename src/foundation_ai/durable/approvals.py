"""A durable turn's pause for approval is a durable wait (``docs/scaling.md``, "Approvals").

A turn whose model asks for a tool that needs approval (``requires_approval``, or a tool gate
answering ``Ask``) does not end: its workflow publishes the calls waiting for a decision (the
DBOS event :data:`PENDING_EVENT`) and waits for decision messages on :data:`APPROVAL_TOPIC`,
sent from any process (:meth:`DurableClient.approve`, ``foundation-ai approve``). Each message
is received as a checkpointed DBOS step (``DBOS.recv``; messages are delivered exactly once,
https://docs.dbos.dev/python/tutorials/workflow-communication), so the decisions on some of
several pending calls are kept when the worker stops before the last one: the recovered run
replays them and waits for the rest only. Once every call is decided the turn continues on
whichever worker holds it. An ``abort`` message ends a waiting turn as ``Aborted`` (each
pending call gets an "aborted" result; the model is not called again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from dbos import DBOS

from ..agentic.events import TurnOutcome
from ..agentic.turn import Allow, Deny
from ..types import to_json

__all__ = [
    "APPROVAL_TOPIC",
    "PENDING_EVENT",
    "WAIT_SECONDS",
    "abort_waiting",
    "receive_decisions",
    "recheck_messages",
    "settle_approvals",
]

APPROVAL_TOPIC = "foundation_ai.approval"
"""The DBOS message topic approval decisions (and an abort of a waiting turn) are sent on:
``{"kind": "approve" | "deny", "call_id": ID, "reason": TEXT}`` or ``{"kind": "abort"}``."""

PENDING_EVENT = "foundation_ai.pending_approvals"
"""The DBOS event key holding the JSON list of the calls waiting for a decision (``[]`` once
none waits)."""

WAIT_SECONDS = 3600.0
"""How long one ``recv`` waits before it is recorded empty and the next one starts."""

RECHECK_SECONDS = 1.0
"""How often a waiting ``recv`` also looks for its message in the database. DBOS wakes it by
PostgreSQL ``NOTIFY`` and re-checks every 60 s in case one is lost; with two serving
processes on a loaded machine a decision was seen to wait those 60 s, so a worker re-checks
sooner (one indexed ``SELECT`` per waiting turn and second; no step is recorded)."""


def recheck_messages(seconds: float = RECHECK_SECONDS) -> None:
    """Make this process's DBOS re-check waiting ``recv``/``get_event`` calls every ``seconds``
    (DBOS's fallback for a lost notification; a no-op if DBOS no longer has that setting)."""
    from dbos import _sys_db

    cls = getattr(_sys_db, "SystemDatabase", None)
    if cls is not None and hasattr(cls, "_notification_fallback_polling_interval"):
        cls._notification_fallback_polling_interval = seconds


def _pending_json(session: Any) -> str:
    return to_json(list(session.pending_approvals())).decode()


async def receive_decisions(
    session: Any, steps: Any, waiting: Callable[[], Awaitable[None]] | None = None
) -> bool:
    """Publish the pending calls, then receive decisions until none is pending (each applied
    to ``session``); False when an abort came first. ``waiting`` is awaited once the pending
    calls are published, before the first decision is received (a served turn tells its
    followers it waits)."""
    await steps._refusal_noted(DBOS.set_event_async(PENDING_EVENT, _pending_json(session)))
    if waiting is not None:
        await waiting()
    while session.pending_approvals():
        msg = await steps._refusal_noted(DBOS.recv_async(APPROVAL_TOPIC, timeout_seconds=WAIT_SECONDS))
        if not isinstance(msg, dict):
            continue
        kind = msg.get("kind")
        if kind == "abort":
            return False
        pending = {c.id for c in session.pending_approvals()}
        cid = msg.get("call_id")
        if cid not in pending or kind not in ("approve", "deny"):
            continue  # decided already, or no call of this pause: nothing to do
        reason = str(msg.get("reason") or "the user denied it")
        session._decide(cid, Allow() if kind == "approve" else Deny(reason))
        await steps._refusal_noted(DBOS.set_event_async(PENDING_EVENT, _pending_json(session)))
    return True


async def settle_approvals(session: Any, steps: Any, turn: Any, run: Any) -> Any:
    """Continue ``turn`` while it ends ``AwaitingApproval``: wait for the decisions (see the
    module docstring), then run the continuation with ``run(make)`` (``make``: a coroutine
    function continuing the session, e.g. wrapped by :func:`~foundation_ai.durable.worker.leased`).
    Returns the last ``Turn``. An abort continues the turn with every pending call interrupted:
    it ends ``Aborted``."""
    while turn.outcome is TurnOutcome.AwaitingApproval:
        decided = await receive_decisions(session, steps)
        if not decided:
            abort_waiting(session)
        turn = await run(session._acontinue)
        if not decided:
            await steps._refusal_noted(DBOS.set_event_async(PENDING_EVENT, "[]"))
    return turn


def abort_waiting(session: Any) -> None:
    """Make the continuation of ``session``'s paused turn start interrupted (an abort came
    while it waited for decisions): each pending call gets an "aborted" result, the model is
    not called again and the turn ends ``Aborted``."""
    steering = session.steering
    steering.bind(asyncio.get_running_loop())
    steering.abort()
