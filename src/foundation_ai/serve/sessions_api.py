"""The sessions API (JSON; see ``docs/serve.md``). Every route acts only on the calling key's
sessions; another key's session answers 404 exactly like a missing one.

- ``GET /v1/sessions``: ``{"object": "list", "data": [session...]}``, most recent first.
- ``POST /v1/sessions`` ``{"model"}``: a new empty session.
- ``GET /v1/sessions/{id}``: the session and its stored ``records`` (foundation-ai JSON).
- ``POST /v1/sessions/{id}/turns`` ``{"input": "text"}``: start a turn (202); it runs on
  whether or not anyone follows it.
- ``GET /v1/sessions/{id}/events?from=N``: the latest turn's ``TurnEvent``s as SSE
  (``event: <type>``, ``id: <index>``, ``data: <TurnEvent JSON>``), from the start (or event
  ``N``) until the turn ends, then ``event: end``.
- ``POST /v1/sessions/{id}/steer`` ``{"text"}``: steer the running turn (or queue for the next).
- ``POST /v1/sessions/{id}/abort``: abort the running turn.
- ``GET /v1/sessions/{id}/approvals``, ``POST /v1/sessions/{id}/approvals/{call_id}``: tool
  calls waiting for approval, and the decisions (``approvals.py``). A turn that pauses for
  approval ends its event stream with ``done`` (outcome ``awaiting_approval``), then
  ``event: awaiting_approval`` (``{"session_id", "next", "calls"}``), then ``end``; the
  continuation's events follow from index ``next``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..types import Messages, to_json
from .approvals import call_json
from .approvals import routes as approval_routes
from .errors import ApiError
from .http import owner_of, read_json, revoked_sse, state_of
from .runtime import LiveTurn, title_of

__all__ = ["routes"]


def _public(mgr: Any, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": meta["id"],
        "object": "session",
        "model": meta["agent"],
        "title": meta["title"],
        "created": meta["created"],
        "updated": meta["updated"],
        "running": mgr.running(meta["id"]),
        "awaiting_approval": bool(meta.get("waiting")) and not mgr.running(meta["id"]),
    }


async def list_sessions(request: Request) -> Response:
    """The key's sessions."""
    owner = owner_of(request)
    mgr = state_of(request).manager
    return JSONResponse({"object": "list", "data": [_public(mgr, m) for m in mgr.index.list(owner)]})


async def create_session(request: Request) -> Response:
    """A new empty session of the agent named by ``model``."""
    owner = owner_of(request)
    body = await read_json(request)
    mgr = state_of(request).manager
    agent = mgr.agent(body.get("model"))
    session = await mgr.new_session(owner, agent, [], "")
    return JSONResponse(_public(mgr, mgr.meta(owner, session.session_id)), status_code=201)


async def get_session(request: Request) -> Response:
    """The session and its records."""
    owner = owner_of(request)
    mgr = state_of(request).manager
    meta = mgr.meta(owner, request.path_params["sid"])
    records = await mgr.records(owner, meta["id"])
    head = to_json(_public(mgr, meta))
    return Response(head[:-1] + b',"records":' + to_json(records) + b"}", media_type="application/json")


def _text(body: dict[str, Any], field: str, limit: int) -> str:
    text = body.get(field)
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, f"{field} must be a non-empty string", param=field)
    if len(text) > limit:
        raise ApiError(
            400, f"{field} is longer than {limit} characters", param=field, code="message_too_long"
        )
    return text


async def start_turn(request: Request) -> Response:
    """Start a turn with ``input`` (a user text)."""
    owner = owner_of(request)
    body = await read_json(request)
    st = state_of(request)
    mgr = st.manager
    text = _text(body, "input", st.config.limits.max_text_chars)
    meta = mgr.meta(owner, request.path_params["sid"])
    session = await mgr.open_session(owner, meta["id"])
    prompt: list[Messages] = [Messages.user(text)]
    if not meta["title"]:
        mgr.index.set_title(meta["id"], title_of(prompt))
    live = mgr.start_turn(owner, session, prompt)
    return JSONResponse({"session_id": meta["id"], "turn_id": live.id}, status_code=202)


async def _follow(live: LiveTurn, start: int) -> AsyncIterator[bytes]:
    i = start
    async for ev in live.follow(start):
        kind = str(type(ev).__struct_config__.tag)  # the TurnEvent's JSON "type": text, tool_call, ...
        yield b"event: " + kind.encode() + b"\nid: " + str(i).encode() + b"\ndata: " + to_json(ev) + b"\n\n"
        asked = live.asked.get(i)
        i += 1
        if asked is not None:  # the turn paused for approval: say which calls wait
            data = {"session_id": live.session_id, "next": i, "calls": [call_json(c) for c in asked]}
            yield b"event: awaiting_approval\ndata: " + to_json(data) + b"\n\n"
    yield b"event: end\ndata: {}\n\n"


async def follow_events(request: Request) -> Response:
    """SSE of the latest turn's events (404 ``no_turn`` when this server ran none for it)."""
    owner = owner_of(request)
    mgr = state_of(request).manager
    meta = mgr.meta(owner, request.path_params["sid"])
    live = mgr.turn_of(meta["id"])
    if live is None:
        raise ApiError(404, "this session has no turn on this server", type="not_found_error", code="no_turn")
    raw = request.query_params.get("from", "0")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:  # Python refuses int() of 4,300+ digits
        raise ApiError(
            400, "from must be a non-negative integer (an event index)", param="from", code="invalid_from"
        )
    start = int(raw)
    guarded = state_of(request).streams.guard(owner, _follow(live, start), revoked_sse("error"))
    return StreamingResponse(guarded, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def steer(request: Request) -> Response:
    """Steer the running turn with ``text`` (queued for the next turn when none runs)."""
    owner = owner_of(request)
    body = await read_json(request)
    st = state_of(request)
    mgr = st.manager
    text = _text(body, "text", st.config.limits.max_text_chars)
    meta = mgr.meta(owner, request.path_params["sid"])
    session = await mgr.open_session(owner, meta["id"])
    running = mgr.running(meta["id"])
    session.steer(text)
    return JSONResponse({"session_id": meta["id"], "steered": running, "queued": not running})


async def abort(request: Request) -> Response:
    """Abort the running turn (``{"aborted": true}``), or end a turn paused for approvals
    (``SessionManager.abort_paused``; ``{"aborted": true, "events_from": N}``: its events go on
    from N); ``{"aborted": false}`` when neither."""
    owner = owner_of(request)
    mgr = state_of(request).manager
    meta = mgr.meta(owner, request.path_params["sid"])
    live = mgr.turn_of(meta["id"])
    running = live is not None and not live.done
    if live is not None and running:
        live.abort()
        return JSONResponse({"session_id": meta["id"], "aborted": True})
    start = len(live.events) if live is not None and live.paused else 0
    if (live is None or live.paused) and await mgr.abort_paused(owner, meta["id"]) is not None:
        # the paused turn goes on (to its end) as after a decision: follow it from ``events_from``
        return JSONResponse({"session_id": meta["id"], "aborted": True, "events_from": start})
    return JSONResponse({"session_id": meta["id"], "aborted": False})


def routes() -> list[Any]:
    """The sessions API routes."""
    from starlette.routing import Route

    return [
        Route("/v1/sessions", list_sessions, methods=["GET"]),
        Route("/v1/sessions", create_session, methods=["POST"]),
        Route("/v1/sessions/{sid}", get_session, methods=["GET"]),
        Route("/v1/sessions/{sid}/turns", start_turn, methods=["POST"]),
        Route("/v1/sessions/{sid}/events", follow_events, methods=["GET"]),
        Route("/v1/sessions/{sid}/steer", steer, methods=["POST"]),
        Route("/v1/sessions/{sid}/abort", abort, methods=["POST"]),
        *approval_routes(),
    ]
