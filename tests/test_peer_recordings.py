"""Replay of real provider recordings made by other projects (``shared/peerfixtures/`` beside
the checkout): every recording is served by the loopback fixture server to the backend of its
wire format, and what the backend assembles is compared with what the provider sent, read by an
independent reference (the official ``openai`` / ``anthropic`` SDKs' own stream accumulators
where they exist, else the raw JSON).

The recordings are not part of the repository (``SOURCES.md`` in that folder lists their
origin): without the folder the whole module is skipped with a message. One test per
recording; ``pytest tests/test_peer_recordings.py -q`` reports how many match.

What is compared, per recording: the text, the reasoning text, the tool calls (name and
arguments), the refusal text, the stop (a small vocabulary: stop, length, tool_use, refusal,
error), input/cache/output tokens (output as billed: reasoning included exactly once), and
every opaque continuation token the provider sent (signatures, encrypted reasoning, reasoning
details), which must be kept on the assembled outputs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foundation_ai.backends import anthropic, assemble, openai_chat, openai_responses
from foundation_ai.types import (
    AssistantMessage,
    GenerationMetadata,
    Messages,
    ModelInteraction,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from tests._backend_helpers import Canned, FixtureServer, check_contract, serve

REPO = Path(__file__).resolve().parents[1]


def _peer_folder() -> Path | None:
    """``shared/peerfixtures`` beside the checkout (or beside the main checkout of a git
    worktree), when present."""
    roots = [REPO]
    git = REPO / ".git"
    if git.is_file():  # a worktree: "gitdir: <main>/.git/worktrees/<name>"
        target = git.read_text(encoding="utf-8").partition("gitdir:")[2].strip()
        if "/.git/" in target:
            roots.append(Path(target.split("/.git/")[0]))
    for root in roots:
        folder = root.parent / "shared" / "peerfixtures"
        if folder.is_dir():
            return folder
    return None


PEERS = _peer_folder()
pytestmark = pytest.mark.skipif(
    PEERS is None, reason="no shared/peerfixtures folder beside the checkout: peer recordings not replayed"
)


def _recordings() -> list[str]:
    if PEERS is None:
        return []
    return sorted(
        f"{p.parent.name}/{p.name}"
        for p in PEERS.glob("*/*")
        if p.suffix in (".sse", ".json", ".txt")
        and p.parent.name in ("anthropic", "openai_chat", "responses")
    )


def _status_of(name: str) -> int:
    """The HTTP status the recording was served with (from SOURCES.md), 200 when not stated."""
    assert PEERS is not None
    for line in (PEERS / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        if f"`{name}`" in line:
            m = re.search(r"status (\d{3})", line)
            return int(m.group(1)) if m else 200
    return 200


# ------------------------------------------------------------------------------------------
# the bytes


def _events(name: str) -> list[tuple[str | None, Any]]:
    """The recording's events as (event name, decoded data); ``[DONE]`` kept as the string."""
    assert PEERS is not None
    raw = (PEERS / name).read_text(encoding="utf-8")
    out: list[tuple[str | None, Any]] = []
    if name.endswith(".chunks.txt"):
        for line in raw.splitlines():
            if line.strip():
                doc = json.loads(line)
                out.append((doc.get("type") if isinstance(doc, dict) else None, doc))
        return out
    for block in re.split(r"\r?\n\r?\n", raw):
        event = None
        data: list[str] = []
        for line in block.splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            text = "\n".join(data)
            out.append((event, text if text == "[DONE]" else json.loads(text)))
    return out


_STARTS = {"anthropic": "message_start", "responses": "response.created"}


def _exchanges(name: str) -> list[list[tuple[str | None, Any]]]:
    """The recording's streams, one per request: some recordings hold several responses in a
    row (a multi-step run), each starting with ``message_start`` / ``response.created``."""
    events = _events(name)
    start = _STARTS.get(name.split("/")[0])
    groups: list[list[tuple[str | None, Any]]] = []
    for ev in events:
        doc = ev[1]
        if not groups or (start and isinstance(doc, dict) and doc.get("type") == start and groups[-1]):
            groups.append([])
        groups[-1].append(ev)
    return groups


def _frames(name: str, events: list[tuple[str | None, Any]]) -> Canned:
    frames = []
    for event, doc in events:
        head = f"event: {event}\n" if event and name.startswith("anthropic/") else ""
        data = doc if isinstance(doc, str) else json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
        frames.append(f"{head}data: {data}\n\n".encode())
    return Canned(chunks=frames)


def _canned(name: str, events: list[tuple[str | None, Any]], single: bool) -> Canned:
    """The bytes to serve: a whole JSON answer with its recorded status, an ``.sse`` recording
    of one response as recorded (comments and all), else the events framed as SSE."""
    assert PEERS is not None
    path = PEERS / name
    if name.endswith(".json"):
        return Canned(status=_status_of(path.name), body=path.read_bytes(), content_type="application/json")
    if single and name.endswith(".sse"):
        raw = path.read_bytes()
        return Canned(chunks=[p + b"\n\n" for p in re.split(rb"\r?\n\r?\n", raw) if p.strip()])
    return _frames(name, events)


# ------------------------------------------------------------------------------------------
# the reference: what the provider sent


def _stop_word(value: str | None, *, refusal: bool = False, error: bool = False) -> str:
    if error:
        return "error"
    if refusal or value in ("refusal", "content_filter"):
        return "refusal"
    return {
        "stop": "stop",
        "end_turn": "stop",
        "stop_sequence": "stop",
        "completed": "stop",
        "length": "length",
        "max_tokens": "length",
        "max_output_tokens": "length",
        "tool_calls": "tool_use",
        "tool_use": "tool_use",
    }.get(value or "stop", value or "stop")


def _billed_output(completion: float, reasoning: float, prompt: float, total: float | None) -> float:
    """Output tokens as billed: reasoning counted once. A total equal to prompt + completion +
    reasoning (xAI) means the completion count left the reasoning out."""
    if (
        reasoning
        and total is not None
        and total == prompt + completion + reasoning
        and total != prompt + completion
    ):
        return completion + reasoning
    return completion


_ERROR = {"stop": "error", "error": True}


def _whole(name: str) -> Any:
    assert PEERS is not None
    return json.loads((PEERS / name).read_text(encoding="utf-8"))


def _raw_chat_message(docs: list[dict[str, Any]]) -> tuple[str, str, list[tuple[str, Any]], str | None]:
    """(text, refusal, calls, finish_reason) of choice 0, accumulated by hand (for streams the
    SDK's accumulator rejects, e.g. a first tool call at index 1)."""
    text = refusal = ""
    finish = None
    calls: dict[Any, list[str]] = {}
    for d in docs:
        for ch in d.get("choices") or []:
            if ch.get("index", 0) != 0:
                continue
            finish = ch.get("finish_reason") or finish
            delta = ch.get("delta") or {}
            text += delta.get("content") or ""
            refusal += delta.get("refusal") or ""
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc.get("index"), ["", ""])
                fn = tc.get("function") or {}
                slot[0] += fn.get("name") or ""
                slot[1] += fn.get("arguments") or ""
    return text, refusal, [(n, json.loads(a or "{}")) for n, a in calls.values()], finish


def _ref_chat(name: str, events: list[tuple[str | None, Any]]) -> dict[str, Any]:
    from openai._models import construct_type
    from openai.lib.streaming.chat._completions import ChatCompletionStreamState
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    usage: dict[str, Any] | None = None
    if name.endswith(".json"):
        doc = _whole(name)
        if "error" in doc or _status_of(Path(name).name) != 200:
            return _ERROR
        completion: Any = construct_type(type_=ChatCompletion, value=doc)
        docs = [doc]
        choice = completion.choices[0]
        msg = choice.message
        text, refusal, finish = msg.content or "", msg.refusal or "", choice.finish_reason
        calls = [(c.function.name, json.loads(c.function.arguments or "{}")) for c in msg.tool_calls or []]
        usage = doc.get("usage")
    else:
        docs = [d for e, d in events if isinstance(d, dict)]
        if any("error" in d or e == "error" for e, d in events if isinstance(d, dict)):
            return _ERROR
        state = ChatCompletionStreamState()
        try:
            for d in docs:
                state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=d))
            snap = state.current_completion_snapshot
            first = [c for c in snap.choices if c.index == 0]
            msg = first[0].message if first else None
            text = (msg.content or "") if msg else ""
            refusal = (msg.refusal or "") if msg else ""
            finish = first[0].finish_reason if first else None
            calls = (
                [(c.function.name, json.loads(c.function.arguments or "{}")) for c in (msg.tool_calls or [])]
                if msg
                else []
            )
        except IndexError:  # the SDK assumes tool-call indexes start at 0
            text, refusal, calls, finish = _raw_chat_message(docs)
        usage = next((d["usage"] for d in reversed(docs) if d.get("usage")), None)
    thinking = ""
    tokens: list[str] = []
    details: list[Any] = []
    for d in docs:
        for ch in d.get("choices") or []:
            if ch.get("index", 0) != 0:
                continue
            part = ch.get("delta") or ch.get("message") or {}
            piece = part.get("reasoning_content") or part.get("reasoning")
            if isinstance(piece, str):
                thinking += piece
            details += part.get("reasoning_details") or []
            sig = ((part.get("extra_content") or {}).get("google") or {}).get("thought_signature")
            if sig:
                tokens.append(sig)
            for tc in part.get("tool_calls") or []:
                tsig = ((tc.get("extra_content") or {}).get("google") or {}).get("thought_signature")
                if tsig:
                    tokens.append(tsig)
    tokens += [d[k] for d in details for k in ("signature", "data") if d.get(k)]
    u = usage or {}
    prompt = float(u.get("prompt_tokens") or 0)
    cached = float((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    reasoning = float((u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    out = _billed_output(float(u.get("completion_tokens") or 0), reasoning, prompt, u.get("total_tokens"))
    if calls and finish == "stop":
        finish = "tool_calls"
    return {
        "text": text,
        "thinking": thinking,
        "calls": calls,
        "refusal": refusal,
        "stop": _stop_word(finish, refusal=bool(refusal)),
        "usage": (prompt - cached, cached, out),
        "tokens": sorted(set(tokens)),
    }


def _ref_anthropic(name: str, events: list[tuple[str | None, Any]]) -> dict[str, Any]:
    from anthropic._models import construct_type
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import Message, RawMessageStreamEvent

    bufs: dict[int, bytes] = {}
    if name.endswith(".json"):
        doc = _whole(name)
        if _status_of(Path(name).name) != 200 or doc.get("type") == "error":
            return _ERROR
        msg: Any = construct_type(type_=Message, value=doc)
        raw_usage = doc.get("usage") or {}
        stop_details = doc.get("stop_details")
    else:
        msg = None
        raw_usage = {}
        stop_details = None
        kinds = (
            "message_start",
            "message_delta",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
        )
        for _, d in events:
            if not isinstance(d, dict):
                continue
            if d.get("type") == "error":
                return _ERROR
            if d.get("type") not in kinds:
                continue
            if d["type"] == "message_start":
                raw_usage.update(d["message"].get("usage") or {})
            if d["type"] == "message_delta":
                raw_usage.update({k: v for k, v in (d.get("usage") or {}).items() if v is not None})
                stop_details = (d.get("delta") or {}).get("stop_details") or stop_details
            ev = construct_type(type_=RawMessageStreamEvent, value=d)
            msg = accumulate_event(event=ev, current_snapshot=msg, json_bufs=bufs)
    text = "".join(b.text for b in msg.content if b.type == "text")
    thinking = "".join(b.thinking for b in msg.content if b.type == "thinking")
    tokens = [b.signature for b in msg.content if b.type == "thinking" and b.signature]
    tokens += [b.data for b in msg.content if b.type == "redacted_thinking"]
    calls = []
    for i, b in enumerate(msg.content):
        if b.type != "tool_use":
            continue
        args: Any = dict(b.input or {})
        if i in bufs:  # streamed: arguments cut off mid-JSON were never a complete object
            try:
                args = json.loads(bufs[i] or b"{}")
            except ValueError:
                args = None
        calls.append((b.name, args))
    inp = float(raw_usage.get("input_tokens") or 0)
    cr = float(raw_usage.get("cache_read_input_tokens") or 0)
    out = float(raw_usage.get("output_tokens") or 0)
    explanation = stop_details.get("explanation") if isinstance(stop_details, dict) else None
    return {
        "text": text,
        "thinking": thinking,
        "calls": calls,
        "refusal": explanation or ("refusal" if msg.stop_reason == "refusal" else ""),
        "stop": _stop_word(msg.stop_reason),
        "usage": (inp, cr, out),
        "tokens": sorted(set(tokens)),
    }


def _ref_responses(name: str, events: list[tuple[str | None, Any]]) -> dict[str, Any]:
    from openai._models import construct_type
    from openai.types.responses import Response

    done: dict[int, Any] = {}
    if name.endswith(".json"):
        doc = _whole(name)
        if _status_of(Path(name).name) != 200 or "output" not in doc:
            return _ERROR
    else:
        doc = None
        for _, d in events:
            if not isinstance(d, dict):
                continue
            if d.get("type") in ("error", "response.failed"):
                return _ERROR
            if d.get("type") == "response.output_item.done":
                done[d.get("output_index", len(done))] = d["item"]
            if d.get("type") in ("response.completed", "response.incomplete"):
                doc = d["response"]
        if doc is None:
            return _ERROR
    if done:  # the items as closed during the stream, in output order
        doc = {**doc, "output": [done[k] for k in sorted(done)]}
    resp: Any = construct_type(type_=Response, value=doc)
    texts, thinking, calls, refusal, tokens = [], [], [], "", []
    for item in resp.output:
        if item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    texts.append(part.text)
                elif part.type == "refusal":
                    refusal += part.refusal
        elif item.type == "reasoning":
            parts = [s.text for s in item.summary or []] or [
                c.text for c in getattr(item, "content", None) or []
            ]
            thinking.append("\n\n".join(parts))
            if item.encrypted_content:
                tokens.append(item.encrypted_content)
        elif item.type == "function_call":
            calls.append((item.name, json.loads(item.arguments or "{}")))
    u = resp.usage
    cached = float(u.input_tokens_details.cached_tokens or 0) if u and u.input_tokens_details else 0.0
    reason = resp.incomplete_details.reason if resp.incomplete_details else None
    stop = reason if resp.status == "incomplete" and reason else ("tool_calls" if calls else "stop")
    return {
        "text": "".join(texts),
        "thinking": "".join(thinking),
        "calls": calls,
        "refusal": refusal,
        "stop": _stop_word(stop, refusal=bool(refusal)),
        "usage": (float(u.input_tokens) - cached, cached, float(u.output_tokens)) if u else (0.0, 0.0, 0.0),
        "tokens": sorted(set(tokens)),
    }


# ------------------------------------------------------------------------------------------
# ours: what the backend assembles


def _tokens_of(m: AssistantMessage) -> list[str]:
    c = m.content
    found: list[str] = []
    if isinstance(c, ThinkingContent | ToolCall | TextContent) and c.signature:
        found.append(c.signature)
    if m.signature:
        found.append(m.signature)
    return found


def _ours(outs: list[AssistantMessage], sent_tokens: list[str]) -> dict[str, Any]:
    last = outs[-1]
    if last.stop_reason == StopReason.ERROR:
        return {"stop": "error", "error": True}
    refusal = last.refusal() or ""
    stop = last.stop_reason
    word = (
        "refusal"
        if refusal
        else {"stop": "stop", "length": "length", "tool_use": "tool_use"}.get(stop.as_str(), stop.as_str())
    )
    # every token the provider sent must sit, unchanged, inside what we keep
    kept = "\n".join(t for m in outs for t in _tokens_of(m))
    return {
        "text": "".join(m.content.content for m in outs if isinstance(m.content, TextContent)),
        "thinking": "".join(m.content.thinking for m in outs if isinstance(m.content, ThinkingContent)),
        "calls": [(m.content.name, m.content.arguments) for m in outs if isinstance(m.content, ToolCall)],
        "refusal": refusal,
        "stop": word,
        "usage": (last.usage.input, last.usage.cache_read, last.usage.output),
        "tokens": sorted(t for t in sent_tokens if t in kept),
    }


@pytest.fixture(scope="module")
def srv() -> Iterator[FixtureServer]:
    yield from serve()


def _model(kind: str, base_url: str) -> Any:
    if kind == "openai_chat":
        return openai_chat("peer-model", base_url=base_url, api_key="sk-test", max_retries=0)
    if kind == "anthropic":
        return anthropic("peer-model", base_url=base_url, api_key="sk-test", max_retries=0)
    return openai_responses("peer-model", base_url=base_url, api_key="sk-test", max_retries=0)


REFERENCE = {"openai_chat": _ref_chat, "anthropic": _ref_anthropic, "responses": _ref_responses}


def _exchange_ids() -> list[str]:
    ids = []
    for name in _recordings():
        n = 1 if name.endswith(".json") else len(_exchanges(name))
        ids += [name] if n == 1 else [f"{name}#{i + 1}" for i in range(n)]
    return ids


@pytest.mark.parametrize("recording", _exchange_ids())
def test_peer_recording_matches_what_the_provider_sent(srv: FixtureServer, recording: str) -> None:
    name, _, nth = recording.partition("#")
    kind = name.split("/")[0]
    groups = [[]] if name.endswith(".json") else _exchanges(name)
    events = groups[int(nth) - 1 if nth else 0]
    srv.requests.clear()
    srv._queue.clear()
    srv.queue(_canned(name, events, single=len(groups) == 1))
    model = _model(kind, srv.base_url)
    items = list(model.stream(ModelInteraction(messages=[Messages.user("hi")])))
    check_contract(items)
    assembled = [m for m in assemble(items, "snapshot") if isinstance(m, AssistantMessage)]
    assert assembled
    expected = REFERENCE[kind](name, events)
    got = _ours(assembled, expected.get("tokens", []))
    if expected.get("error"):
        assert got["stop"] == "error", got
        return
    assert got == expected
    if got["text"] or got["thinking"] or got["calls"] or got["refusal"]:  # time to first token known
        timing = [x for x in assembled[-1].metadata or [] if isinstance(x, GenerationMetadata.Timing)]
        assert timing and timing[-1].time_to_first_token is not None
