"""The sessions API (JSON; see ``docs/serve.md``). Every route acts only on the calling key's
sessions; another key's session answers 404 exactly like a missing one.

- ``GET /v1/sessions?q=text``: ``{"object": "list", "data": [session...]}``, most recent first;
  with ``q``, only the sessions whose title contains ``text`` (case-insensitive).
- ``POST /v1/sessions`` ``{"model"}``: a new empty session.
- ``GET /v1/sessions/{id}``: the session and its stored ``records`` (foundation-ai JSON).
- ``PATCH /v1/sessions/{id}`` ``{"title"}``: rename it (the session).
- ``DELETE /v1/sessions/{id}``: delete it, its records in the store included
  (``{"id", "object": "session.deleted", "deleted": true}``; 409 ``session_busy`` while a turn runs).
- ``POST /v1/sessions/{id}/fork`` ``{"before": message_id, "replace": false}``: a new session
  holding the conversation before that user message, and that message's ``input`` (to resend
  as is, or edited: regenerate and edit-and-resend); ``replace`` deletes the original.
- ``POST /v1/sessions/{id}/turns`` ``{"input": "text" | [part...]}``: start a turn (202); it runs
  on whether or not anyone follows it. Parts: ``{"type": "text", "text"}`` and images as data
  URLs, ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`` (Chat
  Completions' shape) or ``{"type": "input_image", "image_url": "data:..."}`` (Responses').
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

import binascii
import re
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..types import (
    ImageContent,
    MessageRole,
    Messages,
    MimeType,
    SessionRecord,
    TextContent,
    UserMessage,
    to_json,
)
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
        "awaiting_approval": mgr.awaits_approval(meta),
    }


async def list_sessions(request: Request) -> Response:
    """The key's sessions (``?q=``: those whose title contains it)."""
    owner = owner_of(request)
    mgr = state_of(request).manager
    query = request.query_params.get("q", "").strip()[:200] or None
    listed = mgr.index.list(owner, query=query) if query else mgr.index.list(owner)
    return JSONResponse({"object": "list", "data": [_public(mgr, m) for m in listed]})


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


_DATA_URL = re.compile(r"data:(image/[a-z]+);base64,(.*)", re.DOTALL)
_MIME = {m.value: m for m in MimeType}


def _image(part: dict[str, Any], param: str) -> Messages:
    """An image part (a ``data:`` URL; the server never fetches a remote one) as a user message."""
    raw = part.get("image_url")
    url = raw.get("url") if isinstance(raw, dict) else raw
    m = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
    if m is None:
        raise ApiError(400, "an image must be a data: URL (data:image/png;base64,...)", param=param)
    mime = _MIME.get(m.group(1))
    if mime is None:
        raise ApiError(400, f"image type {m.group(1)!r} is not one of {', '.join(_MIME)}", param=param)
    try:
        binascii.a2b_base64(m.group(2), strict_mode=True)
    except binascii.Error:
        raise ApiError(400, "the image is not valid base64", param=param) from None
    return UserMessage(role=MessageRole.User, content=ImageContent(b64=m.group(2), mime_type=mime))


def _prompt(body: dict[str, Any], limit: int) -> list[Messages]:
    """The turn's ``input``: a text, or a list of text and image parts (in order)."""
    parts = body.get("input")
    if not isinstance(parts, list):
        return [Messages.user(_text(body, "input", limit))]
    if not parts:
        raise ApiError(400, "input must be a non-empty string or list of parts", param="input")
    out: list[Messages] = []
    for i, part in enumerate(parts):
        param = f"input[{i}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("text", "input_text"):
            out.append(Messages.user(_text(part, "text", limit)))
        elif kind in ("image_url", "input_image"):
            out.append(_image(part, param))
        else:
            raise ApiError(400, f"content part type {kind!r} is not supported (text or image)", param=param)
    return out


async def start_turn(request: Request) -> Response:
    """Start a turn with ``input`` (a user text, or text and image parts)."""
    owner = owner_of(request)
    body = await read_json(request)
    st = state_of(request)
    mgr = st.manager
    prompt = _prompt(body, st.config.limits.max_text_chars)
    meta = mgr.meta(owner, request.path_params["sid"])
    session = await mgr.open_session(owner, meta["id"])
    if not meta["title"]:
        mgr.index.set_title(meta["id"], title_of(prompt))
    live = mgr.start_turn(owner, session, prompt)
    return JSONResponse({"session_id": meta["id"], "turn_id": live.id}, status_code=202)


async def rename_session(request: Request) -> Response:
    """Set the session's ``title`` (1 to 120 characters, trimmed)."""
    owner = owner_of(request)
    body = await read_json(request)
    mgr = state_of(request).manager
    meta = mgr.meta(owner, request.path_params["sid"])
    title = body.get("title")
    if not isinstance(title, str) or not title.strip():
        raise ApiError(400, "title must be a non-empty string", param="title")
    if len(title.strip()) > 120:
        raise ApiError(400, "title is longer than 120 characters", param="title")
    mgr.index.set_title(meta["id"], " ".join(title.split()))
    return JSONResponse(_public(mgr, mgr.meta(owner, meta["id"])))


async def _forget(mgr: Any, owner: str, sid: str) -> None:
    if mgr.running(sid):
        raise ApiError(409, "this session is running a turn (abort it first)", code="session_busy")
    await mgr.forget_session(sid)


async def delete_session(request: Request) -> Response:
    """Forget the session: it leaves the list and answers 404 from then on."""
    owner = owner_of(request)
    mgr = state_of(request).manager
    meta = mgr.meta(owner, request.path_params["sid"])
    await _forget(mgr, owner, meta["id"])
    return JSONResponse({"id": meta["id"], "object": "session.deleted", "deleted": True})


def _conversation(records: list[SessionRecord]) -> list[Messages]:
    """The messages of stored records, retracted ones left out."""
    gone = {i for r in records if isinstance(r, SessionRecord.Retracted) for i in r.message_ids}
    return [
        r.message for r in records if isinstance(r, SessionRecord.Conversation) and r.message.id not in gone
    ]


def _input_of(messages: list[Messages]) -> list[dict[str, Any]]:
    """User messages as ``input`` parts (text, and images as data URLs)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        c = getattr(m, "content", None)
        if isinstance(c, TextContent):
            out.append({"type": "text", "text": c.content})
        elif isinstance(c, ImageContent):
            url = f"data:{c.mime_type.value};base64,{c.b64}"
            out.append({"type": "image_url", "image_url": {"url": url}})
    return out


def _from_user(m: Messages) -> bool:
    return isinstance(m, UserMessage) and m.role == MessageRole.User


async def fork_session(request: Request) -> Response:
    """A new session with the conversation before user message ``before`` (201), and that
    prompt's ``input`` (its user messages up to the next answer); ``replace`` forgets the
    original."""
    owner = owner_of(request)
    body = await read_json(request)
    mgr = state_of(request).manager
    meta = mgr.meta(owner, request.path_params["sid"])
    before, replace = body.get("before"), body.get("replace", False)
    if not isinstance(replace, bool):
        raise ApiError(400, "replace must be a boolean", param="replace")
    messages = _conversation(await mgr.records(owner, meta["id"]))
    cut = next((i for i, m in enumerate(messages) if m.id == before and isinstance(m, UserMessage)), None)
    if cut is None:
        raise ApiError(
            404, f"no user message {before!r} in this session", type="not_found_error", param="before"
        )
    while cut > 0 and _from_user(messages[cut - 1]):
        cut -= 1  # the prompt's first message (an image sent with the text)
    end = cut
    while end < len(messages) and _from_user(messages[end]):
        end += 1
    if replace:
        await _forget(mgr, owner, meta["id"])
    session = await mgr.new_session(owner, mgr.agent(meta["agent"]), messages[:cut], meta["title"])
    out = _public(mgr, mgr.meta(owner, session.session_id)) | {"input": _input_of(messages[cut:end])}
    return JSONResponse(out, status_code=201)


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
        Route("/v1/sessions/{sid}", rename_session, methods=["PATCH"]),
        Route("/v1/sessions/{sid}", delete_session, methods=["DELETE"]),
        Route("/v1/sessions/{sid}/fork", fork_session, methods=["POST"]),
        Route("/v1/sessions/{sid}/turns", start_turn, methods=["POST"]),
        Route("/v1/sessions/{sid}/events", follow_events, methods=["GET"]),
        Route("/v1/sessions/{sid}/steer", steer, methods=["POST"]),
        Route("/v1/sessions/{sid}/abort", abort, methods=["POST"]),
        *approval_routes(),
    ]
