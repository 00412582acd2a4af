"""Approving and denying tool calls over HTTP (part of the sessions API; see ``docs/serve.md``).

An agent configured with ``requires_approval`` (``serve.config.Agent``) pauses a turn before a
listed tool runs: the turn's ``done`` event has outcome ``awaiting_approval``, the sessions
event stream adds an ``awaiting_approval`` event naming the calls, and the calls wait here:

- ``GET /v1/sessions/{id}/approvals``: ``{"object": "list", "session_id", "data": [call...]}``,
  each call ``{"id", "object": "tool_call", "name", "arguments"}``.
- ``POST /v1/sessions/{id}/approvals/{call_id}`` ``{"decision": "approve" | "deny",
  "reason": "..."}``: decide one call. Once every pending call is decided the turn continues in
  the background (``"continued": true``): approved calls run, a denied call gets an error result
  carrying ``reason``, which the model reads, and the model is called again. Its events follow
  the paused turn's on ``GET /v1/sessions/{id}/events?from=<events_from>``, and a Chat
  Completions or Responses stream still open on the paused turn goes on with them.

Errors (OpenAI shape): 404 ``session_not_found`` (also for another key's session),
404 ``tool_call_not_found`` (no such call in the session), 409 ``tool_call_not_pending``
(the call was decided already, or never needed approval), 400 for a bad ``decision`` or
``reason``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..types import AssistantMessage, SessionRecord, ToolCall
from .errors import ApiError
from .http import owner_of, read_json, state_of

__all__ = ["call_json", "decide", "list_approvals", "routes"]


def call_json(call: ToolCall) -> dict[str, Any]:
    """A pending call as JSON: ``{"id", "object": "tool_call", "name", "arguments"}``."""
    return {"id": call.id, "object": "tool_call", "name": call.name, "arguments": call.arguments}


async def list_approvals(request: Request) -> Response:
    """The session's tool calls waiting for a decision (an empty list when none)."""
    owner = owner_of(request)
    mgr = state_of(request).manager
    meta = mgr.meta(owner, request.path_params["sid"])
    session = await mgr.open_session(owner, meta["id"])
    calls = [] if mgr.running(meta["id"]) else session.pending_approvals()
    return JSONResponse({"object": "list", "session_id": meta["id"], "data": [call_json(c) for c in calls]})


def _has_call(records: list[SessionRecord], call_id: str) -> bool:
    for r in records:
        if isinstance(r, SessionRecord.Conversation) and isinstance(r.message, AssistantMessage):
            c = r.message.content
            if isinstance(c, ToolCall) and c.id == call_id:
                return True
    return False


def _decision(body: dict[str, Any], limit: int) -> tuple[str, str]:
    decision = body.get("decision")
    if decision not in ("approve", "deny"):
        raise ApiError(400, 'decision must be "approve" or "deny"', param="decision")
    reason = body.get("reason")
    if reason is None:
        return decision, "the user denied it"
    if not isinstance(reason, str) or not reason.strip():
        raise ApiError(400, "reason must be a non-empty string", param="reason")
    if len(reason) > limit:
        raise ApiError(
            400, f"reason is longer than {limit} characters", param="reason", code="message_too_long"
        )
    return decision, reason


async def decide(request: Request) -> Response:
    """Approve or deny one pending call; the last decision continues the turn."""
    owner = owner_of(request)
    body = await read_json(request)
    st = state_of(request)
    mgr = st.manager
    decision, reason = _decision(body, st.config.limits.max_text_chars)
    meta = mgr.meta(owner, request.path_params["sid"])
    sid = meta["id"]
    call_id = request.path_params["call_id"]
    session = await mgr.open_session(owner, sid)
    # from here to the decision nothing awaits: two requests cannot both decide one call
    pending = {c.id for c in session.pending_approvals()}
    if mgr.running(sid) or call_id not in pending:
        awaiting = {c.id for c in session.awaiting}
        known = call_id in awaiting or _has_call(await asyncio.to_thread(mgr.store.load, sid), call_id)
        if not known:
            raise ApiError(
                404,
                f"no tool call {call_id!r} in this session",
                type="not_found_error",
                code="tool_call_not_found",
                param="call_id",
            )
        raise ApiError(
            409,
            f"tool call {call_id!r} is not waiting for a decision (decided already, or it needed none)",
            code="tool_call_not_pending",
            param="call_id",
        )
    prev = mgr.turn_of(sid)
    start = len(prev.events) if prev is not None and prev.paused else 0
    stream = (
        session.approve_stream(call_id) if decision == "approve" else session.deny_stream(call_id, reason)
    )
    out: dict[str, Any] = {
        "session_id": sid,
        "call_id": call_id,
        "decision": decision,
        "pending": [c.id for c in session.pending_approvals()],
        "continued": stream is not None,
    }
    if stream is not None:
        live = mgr.continue_turn(owner, session, stream)
        out |= {"turn_id": live.id, "events_from": start}
    return JSONResponse(out)


def routes() -> list[Any]:
    """The approval routes."""
    from starlette.routing import Route

    return [
        Route("/v1/sessions/{sid}/approvals", list_approvals, methods=["GET"]),
        Route("/v1/sessions/{sid}/approvals/{call_id}", decide, methods=["POST"]),
    ]
