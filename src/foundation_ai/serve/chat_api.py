"""``POST /v1/chat/completions``: an agent turn in the Chat Completions format
(https://platform.openai.com/docs/api-reference/chat/create and
https://platform.openai.com/docs/api-reference/chat-streaming).

The answer is the turn's final text. Streamed, every text piece is a ``delta.content`` chunk;
thinking is ``delta.reasoning_content`` (the field OpenAI-compatible servers use); tool calls
and results, which run on the server, ride as ``delta.foundation_ai_event`` (a ``TurnEvent`` as
JSON) so clients that do not know the field ignore it. A turn that pauses for approval sends
``delta.foundation_ai_event`` ``{"type": "awaiting_approval", "calls": [...]}`` and the stream
waits for the decisions (``approvals.py``), then goes on with the continued turn; a request
without ``stream`` returns at the pause (``foundation_ai.outcome`` ``awaiting_approval``). A failed turn ends the stream with an
``{"error": {...}}`` data line (the SDKs raise ``APIError``); one that fails before its
first output gets the HTTP error a request without ``stream`` gets (``errors.turn_error``), so
the SDKs raise the matching typed error (``BadRequestError``, ``InternalServerError``, ...). The response header
``X-Session-Id`` names the session to continue.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..agentic import TurnEvent
from ..agentic.events import TurnOutcome, TurnSummary
from ..ids import new_scru128
from ..types import to_json
from .approvals import call_json
from .convert import chat_messages, output_format, sampling
from .errors import error_body, turn_error
from .http import json_bytes, owner_of, read_json, revoked_sse, sse_data_bytes, state_of
from .runtime import LiveTurn, begin_turn, event_batches, first_event

__all__ = ["chat_completions", "usage_chat"]


def usage_chat(summary: TurnSummary | None) -> dict[str, Any]:
    """Chat Completions ``usage`` from a turn summary (tokens; input includes cache reads)."""
    if summary is None:
        return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    u = summary.usage
    prompt = int(u.input + u.cache_read + u.cache_write)
    out = int(u.output)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": out,
        "total_tokens": prompt + out,
        "prompt_tokens_details": {"cached_tokens": int(u.cache_read)},
        "cost_usd": u.cost_usd,
    }


def finish_reason(outcome: TurnOutcome) -> str:
    """``stop`` for a completed or aborted turn, ``length`` for a budget or iteration limit."""
    return "length" if outcome in (TurnOutcome.BudgetExhausted, TurnOutcome.IterationLimit) else "stop"


async def chat_completions(request: Request) -> Response:
    """Run a turn; JSON ``chat.completion`` or an SSE stream of ``chat.completion.chunk``."""
    owner = owner_of(request)
    body = await read_json(request)
    st = state_of(request)
    agent = st.manager.agent(body.get("model"))
    messages = chat_messages(body.get("messages"))
    sid = request.headers.get("x-session-id") or None
    live = await begin_turn(
        st.manager, owner, agent, sid, messages, "messages", sampling(body) | output_format(body)
    )
    cid = "chatcmpl-" + new_scru128()
    created = int(time.time())
    headers = {"X-Session-Id": live.session_id}
    if body.get("stream"):
        await _until_first_event(live)  # a turn failing before its first output: an HTTP error
        opts = body.get("stream_options")
        include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        body_stream = _stream(live, agent.name, cid, created, include_usage)
        return StreamingResponse(
            st.streams.guard(owner, body_stream, revoked_sse()),
            media_type="text/event-stream",
            headers={**headers, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    try:
        await asyncio.shield(live.task)  # type: ignore[arg-type]
    except asyncio.CancelledError:
        live.abort()
        raise
    last = live.events[-1] if live.events else None
    if isinstance(last, TurnEvent.Failed):
        raise turn_error(last.error)
    summary = last.summary if isinstance(last, TurnEvent.Done) else None
    text = st.manager.mask.whole(live.turn.text()) if live.turn is not None else ""
    outcome = summary.outcome if summary is not None else TurnOutcome.Completed
    payload = {
        "id": cid,
        "object": "chat.completion",
        "created": created,
        "model": agent.name,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason(outcome),
            }
        ],
        "usage": usage_chat(summary),
        "system_fingerprint": None,
        "foundation_ai": {"session_id": live.session_id, "outcome": outcome.value},
    }
    if live.paused:  # the turn waits for approvals (docs/serve.md): say which calls
        payload["foundation_ai"]["pending_approvals"] = [
            call_json(c) for c in live.asked.get(len(live.events) - 1, [])
        ]
    return JSONResponse(payload, headers=headers)


async def _until_first_event(live: LiveTurn) -> None:
    """Wait for the turn's first event; a turn whose first event is its failure is answered
    with that failure's HTTP error (``errors.turn_error``), as without ``stream``.

    Raises:
        ApiError: the turn failed before producing anything.
    """
    try:
        first = await first_event(live)
    except asyncio.CancelledError:  # the client went away while waiting
        live.abort()
        raise
    if isinstance(first, TurnEvent.Failed):
        raise turn_error(first.error)


async def _stream(
    live: LiveTurn, model: str, cid: str, created: int, include_usage: bool
) -> AsyncIterator[bytes]:
    # every chunk shares its envelope: built once, only the delta is encoded per chunk
    head = (
        b'data: {"id":'
        + json_bytes(cid)
        + b',"object":"chat.completion.chunk","created":'
        + json_bytes(created)
        + b',"model":'
        + json_bytes(model)
        + b',"system_fingerprint":null,"choices":[{"index":0,"delta":'
    )
    tail = b',"logprobs":null,"finish_reason":null}]}\n\n'

    def chunk(delta: bytes) -> bytes:
        return head + delta + tail

    try:
        yield chunk(b'{"role":"assistant","content":""}')
        # a follower that fell behind writes its backlog at once
        async for first, batch in event_batches(live, through_pauses=True):
            out: list[bytes] = []
            for i, ev in enumerate(batch, first):
                asked = live.asked.get(i)
                if asked is not None:  # paused for approval: the stream waits for the decisions
                    event = {"type": "awaiting_approval", "session_id": live.session_id}
                    calls = {"calls": [call_json(c) for c in asked]}
                    out.append(chunk(b'{"foundation_ai_event":' + json_bytes(event | calls) + b"}"))
                elif isinstance(ev, TurnEvent.Text):
                    out.append(chunk(b'{"content":' + json_bytes(ev.text) + b"}"))
                elif isinstance(ev, TurnEvent.Thinking):
                    out.append(chunk(b'{"reasoning_content":' + json_bytes(ev.text) + b"}"))
                elif isinstance(ev, TurnEvent.ToolCall | TurnEvent.ToolResult | TurnEvent.Retract):
                    out.append(chunk(b'{"foundation_ai_event":' + to_json(ev) + b"}"))
                elif isinstance(ev, TurnEvent.Failed):
                    msg = f"the turn failed: {ev.error.message}"
                    body = error_body(msg, "server_error", ev.error.kind or "turn_failed")
                    out.append(sse_data_bytes(json_bytes(body)))
                    yield b"".join(out)
                    return
                elif isinstance(ev, TurnEvent.Done):
                    finish = json_bytes(finish_reason(ev.summary.outcome))
                    out.append(head + b'{},"logprobs":null,"finish_reason":' + finish + b"}]}\n\n")
                    if include_usage:
                        usage = {
                            "id": cid,
                            "object": "chat.completion.chunk",
                            "created": created,
                            "model": model,
                            "choices": [],
                            "usage": usage_chat(ev.summary),
                        }
                        out.append(sse_data_bytes(json_bytes(usage)))
            if out:
                yield b"".join(out)
        yield b"data: [DONE]\n\n"
    finally:
        if not live.done:  # the client went away: stop generating, keep what was produced
            live.abort()
