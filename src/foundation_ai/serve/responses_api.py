"""``POST /v1/responses``: an agent turn in the Responses format
(https://platform.openai.com/docs/api-reference/responses/create and
https://platform.openai.com/docs/api-reference/responses-streaming).

Each text output of the turn is a ``message`` item, each thinking output a ``reasoning`` item
(``response.reasoning_text.delta``). Tools run on the server, so their calls are not
``function_call`` items (a client would try to run them): the stream carries them as
``foundation_ai.tool_call`` / ``foundation_ai.tool_result`` events, which clients that do not
know them skip. A turn that pauses for approval sends ``foundation_ai.awaiting_approval``
(``{"session_id", "calls"}``) and the stream waits for the decisions, then goes on; without
``stream`` the response returns at the pause (``incomplete``, reason ``awaiting_approval``).
``previous_response_id`` continues the session of that response (its latest response only:
an earlier one is a 400 ``response_not_latest``, branches are not kept; an unknown one, another
key's or one made with ``store: false`` is a 404 ``previous_response_not_found``). With
``store: false`` nothing is kept: the turn runs in a session of its own in memory (from the
previous response's conversation, when given), with no ``X-Session-Id``, and its id cannot be
continued. A turn that fails before its first output is answered with its HTTP error, streamed
or not (``errors.turn_error``); a turn that
was aborted or hit a limit ends ``incomplete``, a failed one ``response.failed``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..agentic import TurnEvent
from ..agentic.events import TurnOutcome, TurnSummary
from ..ids import new_scru128
from ..types import to_json
from .approvals import call_json
from .convert import output_format, responses_input, sampling
from .errors import ApiError, turn_error
from .http import json_bytes, owner_of, read_json, revoked_sse, sse_event_bytes, state_of
from .runtime import LiveTurn, begin_turn, event_batches, first_event

__all__ = ["responses"]


def _usage(summary: TurnSummary | None) -> dict[str, Any]:
    u = summary.usage if summary is not None else None
    inp = int(u.input + u.cache_read + u.cache_write) if u else 0
    out = int(u.output) if u else 0
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": int(u.cache_read) if u else 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": inp + out,
        "cost_usd": u.cost_usd if u else 0.0,
    }


class _Builder:
    """Output items and stream events of one response, built from TurnEvents."""

    def __init__(self, rid: str, model: str, created: int, prev: str | None, session_id: str) -> None:
        self.rid, self.model, self.created, self.prev, self.sid = rid, model, created, prev, session_id
        self.store = True
        """The request's ``store``: False when the response is not kept."""
        self.text_format: dict[str, Any] = {"type": "text"}
        """The answer's format as the request gave it (``text.format``), echoed in the response."""
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self.open_mid: str | None = None
        self.seq = 0

    def ev(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return sse_event_bytes(kind.encode(), json_bytes(payload))

    def response(self, status: str, summary: TurnSummary | None = None, **extra: Any) -> dict[str, Any]:
        return {
            "id": self.rid,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "model": self.model,
            "output": list(self.output),
            "parallel_tool_calls": True,
            "previous_response_id": self.prev,
            "reasoning": {"effort": None, "summary": None},
            "store": self.store,
            "temperature": None,
            "text": {"format": self.text_format},
            "tool_choice": "auto",
            "tools": [],
            "top_p": None,
            "truncation": "disabled",
            "usage": _usage(summary) if summary is not None or status != "in_progress" else None,
            "user": None,
            "metadata": {},
            "foundation_ai": {"session_id": self.sid},
            **extra,
        }

    def close(self) -> list[bytes]:
        it = self.open
        if it is None:
            return []
        self.open = self.open_mid = None
        idx = len(self.output)
        out: list[bytes] = []
        if it["type"] == "message":
            part = it["content"][0]
            out.append(
                self.ev(
                    "response.output_text.done",
                    item_id=it["id"],
                    output_index=idx,
                    content_index=0,
                    text=part["text"],
                    logprobs=[],
                )
            )
            out.append(
                self.ev(
                    "response.content_part.done",
                    item_id=it["id"],
                    output_index=idx,
                    content_index=0,
                    part=part,
                )
            )
        else:
            text = it["content"][0]["text"]
            out.append(
                self.ev(
                    "response.reasoning_text.done",
                    item_id=it["id"],
                    output_index=idx,
                    content_index=0,
                    text=text,
                )
            )
        it["status"] = "completed"
        out.append(self.ev("response.output_item.done", output_index=idx, item=it))
        self.output.append(it)
        return out

    def piece(self, kind: str, mid: str, text: str) -> list[bytes]:
        out: list[bytes] = []
        want = "message" if kind == "text" else "reasoning"
        if self.open is None or self.open_mid != mid or self.open["type"] != want:
            out += self.close()
            idx = len(self.output)
            if want == "message":
                item: dict[str, Any] = {
                    "id": "msg_" + mid,
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                }
                out.append(
                    self.ev("response.output_item.added", output_index=idx, item=dict(item, content=[]))
                )
                part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                out.append(
                    self.ev(
                        "response.content_part.added",
                        item_id=item["id"],
                        output_index=idx,
                        content_index=0,
                        part=dict(part),
                    )
                )
                item["content"] = [part]
            else:
                item = {"id": "rs_" + mid, "type": "reasoning", "summary": [], "content": []}
                out.append(self.ev("response.output_item.added", output_index=idx, item=dict(item)))
                item["content"] = [{"type": "reasoning_text", "text": ""}]
            self.open, self.open_mid = item, mid
        it = self.open
        assert it is not None
        it["content"][0]["text"] += text
        idx = len(self.output)
        kind_ev = "response.output_text.delta" if want == "message" else "response.reasoning_text.delta"
        extra: dict[str, Any] = {"logprobs": []} if want == "message" else {}
        out.append(self.ev(kind_ev, item_id=it["id"], output_index=idx, content_index=0, delta=text, **extra))
        return out

    def end(self, ev: TurnEvent) -> tuple[str, dict[str, Any]]:
        """The terminal event type and the final response."""
        if isinstance(ev, TurnEvent.Failed):
            err = {"code": "server_error", "message": f"the turn failed: {ev.error.message}"}
            return "response.failed", self.response("failed", ev.summary, error=err)
        summary = ev.summary if isinstance(ev, TurnEvent.Done) else None
        outcome = summary.outcome if summary is not None else TurnOutcome.Completed
        if outcome is TurnOutcome.Completed:
            return "response.completed", self.response("completed", summary)
        return "response.incomplete", self.response(
            "incomplete", summary, incomplete_details={"reason": outcome.value}
        )


async def responses(request: Request) -> Response:
    """Run a turn; a JSON ``response`` object or an SSE stream of Responses events."""
    owner = owner_of(request)
    body = await read_json(request)
    st = state_of(request)
    agent = st.manager.agent(body.get("model"))
    prev = body.get("previous_response_id")
    store = body.get("store", True)
    if not isinstance(store, bool):
        raise ApiError(400, "store must be a boolean", param="store")
    sid = request.headers.get("x-session-id") or None
    if prev is not None:
        if not isinstance(prev, str):
            raise ApiError(400, "previous_response_id must be a string", param="previous_response_id")
        sid = st.manager.index.session_of_response(prev)
        meta = st.manager.index.get(sid) if sid is not None else None
        if meta is None or meta["owner"] != owner:  # another key's response: as a missing one
            raise ApiError(
                404,
                f"no response {prev!r} (a response created with store: false is not kept)",
                type="not_found_error",
                code="previous_response_not_found",
                param="previous_response_id",
            )
        latest = st.manager.index.latest_response(sid)
        if latest is not None and latest != prev:  # the conversation went on after ``prev``
            raise ApiError(
                400,
                f"response {prev!r} is not the latest of its conversation ({latest!r} is): continuing"
                " from an earlier response (a branch) is not supported; continue from the latest, or"
                " send the whole history as input without previous_response_id",
                code="response_not_latest",
                param="previous_response_id",
            )
    messages = responses_input(body.get("input"), body.get("instructions"))
    overrides = sampling(body) | output_format(body)
    if store:
        live = await begin_turn(st.manager, owner, agent, sid, messages, "input", overrides)
    else:  # nothing kept: a session of its own in memory, from the previous response's on
        earlier = await st.manager.conversation(owner, sid) if sid is not None else []
        live = await begin_turn(
            st.manager, owner, agent, None, earlier + messages, "input", overrides, ephemeral=True
        )
    rid = "resp_" + new_scru128()
    if store:
        st.manager.index.add_response(rid, live.session_id)
    b = _Builder(rid, agent.name, int(time.time()), prev if isinstance(prev, str) else None, live.session_id)
    b.store = store
    fmt = body.get("text", {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict):
        b.text_format = fmt
    headers = {"X-Session-Id": live.session_id} if store else {}
    if body.get("stream"):
        try:
            first = await first_event(live)
        except asyncio.CancelledError:
            live.abort()
            raise
        if isinstance(first, TurnEvent.Failed):  # before any output: the HTTP error
            raise turn_error(first.error)
        return StreamingResponse(
            st.streams.guard(owner, _stream(live, b), revoked_sse("error")),
            media_type="text/event-stream",
            headers={**headers, "Cache-Control": "no-cache"},
        )
    try:
        await asyncio.shield(live.task)  # type: ignore[arg-type]
    except asyncio.CancelledError:
        live.abort()
        raise
    for ev in live.events:
        if isinstance(ev, TurnEvent.Text):
            b.piece("text", ev.message_id, ev.text)
        elif isinstance(ev, TurnEvent.Thinking):
            b.piece("thinking", ev.message_id, ev.text)
        elif isinstance(ev, TurnEvent.ToolCall | TurnEvent.ToolResult):
            b.close()
    b.close()
    last = live.events[-1]  # a LiveTurn always ends with Done or Failed
    if isinstance(last, TurnEvent.Failed):
        raise turn_error(last.error)
    _, resp = b.end(last)
    return JSONResponse(resp, headers=headers)


async def _stream(live: LiveTurn, b: _Builder) -> AsyncIterator[bytes]:
    try:
        yield b.ev("response.created", response=b.response("in_progress"))
        yield b.ev("response.in_progress", response=b.response("in_progress"))
        # a follower that fell behind writes its backlog at once
        async for first, batch in event_batches(live, through_pauses=True):
            out: list[bytes] = []
            for i, ev in enumerate(batch, first):
                asked = live.asked.get(i)
                if asked is not None:  # paused for approval: the stream waits for the decisions
                    out += b.close()
                    calls = [call_json(c) for c in asked]
                    out.append(
                        b.ev("foundation_ai.awaiting_approval", session_id=live.session_id, calls=calls)
                    )
                elif isinstance(ev, TurnEvent.Text):
                    out += b.piece("text", ev.message_id, ev.text)
                elif isinstance(ev, TurnEvent.Thinking):
                    out += b.piece("thinking", ev.message_id, ev.text)
                elif isinstance(ev, TurnEvent.ToolCall | TurnEvent.ToolResult):
                    out += b.close()
                    kind = (
                        "foundation_ai.tool_call"
                        if isinstance(ev, TurnEvent.ToolCall)
                        else "foundation_ai.tool_result"
                    )
                    out.append(b.ev(kind, event=msgspec.Raw(to_json(ev))))
                elif isinstance(ev, TurnEvent.Failed | TurnEvent.Done):
                    out += b.close()
                    kind, resp = b.end(ev)
                    out.append(b.ev(kind, response=resp))
            if out:
                yield b"".join(out)
    finally:
        if not live.done:
            live.abort()
