"""History cost: client-side time per turn as the stored history grows, beside its floor.

One ``AgentSession`` per backend (``openai_chat``, ``anthropic``, ``openai_responses``) with the
in-memory store, against one loopback fake server in a subprocess (it reads the whole request
body and answers a tiny streamed answer in the format of the path asked: Chat Completions
chunks, Anthropic Messages events, Responses events). The history is built directly (user text,
assistant tool call, tool result, assistant text: four messages per past turn) at 4,000 /
20,000 / 40,000 messages, then turns are run and timed one after another (``arun_turn``, wall
clock, client side; each turn adds its prompt and answer to the history, as in a session).

The floor, measured interleaved in the same run (backend after backend, repetition after
repetition): copying the same request bytes and sending them with a plain
``httpx2.AsyncClient`` to the same server path, reading the streamed answer. Printed beside it
for information: encoding the same body from its dict (``msgspec.json.encode``) and sending it.

Goal (issue "Performance at scale", goal 1): at 40,000 messages the time per turn is at most
2x the floor, for every backend. ``--no-cache`` turns the per-session wire cache off (every
request mapped from the whole history: the "before" figures).
Run: ``python bench/history.py [--reps 7] [--sizes 4000,20000,40000] [--backends chat,anthropic,responses]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

CHAT_ANSWER = [
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}],
    },
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    },
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    },
]

ANTHROPIC_ANSWER = [
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "m",
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
    ),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 1},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]

_RESP = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m", "output": []}
_MSG = {"id": "msg_1", "type": "message", "role": "assistant"}
RESPONSES_ANSWER = [
    (
        "response.created",
        {"type": "response.created", "response": {**_RESP, "status": "in_progress", "usage": None}},
    ),
    (
        "response.output_item.added",
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**_MSG, "status": "in_progress", "content": []},
        },
    ),
    (
        "response.output_text.delta",
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": "ok",
        },
    ),
    (
        "response.output_item.done",
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                **_MSG,
                "status": "completed",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            },
        },
    ),
    (
        "response.completed",
        {
            "type": "response.completed",
            "response": {
                **_RESP,
                "status": "completed",
                "usage": {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11},
            },
        },
    ),
]

PATHS = {"chat": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}


def _payload(events: list[tuple[str | None, Any]]) -> bytes:
    body = "".join(
        (f"event: {name}\n" if name else "")
        + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        for name, data in events
    )
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
        + str(len(body.encode())).encode()
        + b"\r\n\r\n"
        + body.encode()
    )


def serve(port_file: str) -> None:
    """The fake server (run in a subprocess): read headers + Content-Length body, answer SSE
    in the format of the request path."""
    answers = {
        PATHS["chat"].encode(): _payload([(None, c) for c in CHAT_ANSWER] + [(None, "[DONE]")]),
        PATHS["anthropic"].encode(): _payload(list(ANTHROPIC_ANSWER)),
        PATHS["responses"].encode(): _payload(list(RESPONSES_ANSWER)),
    }

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                headers = await reader.readuntil(b"\r\n\r\n")
                lines = headers.split(b"\r\n")
                path = lines[0].split(b" ")[1]
                length = 0
                for line in lines:
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                writer.write(answers[path])
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        Path(port_file).write_text(str(port))
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def history(n: int) -> list[Any]:
    from foundation_ai.types import AssistantMessage, Messages, TextContent, ToolCall, ToolResultMessage

    out: list[Any] = []
    for i in range(n // 4):
        out.append(Messages.user(f"What is {i} + 40?"))
        out.append(
            AssistantMessage(
                model="m", content=ToolCall(id=f"call_{i}", name="add", arguments={"a": i, "b": 40})
            )
        )
        out.append(ToolResultMessage(tool_call_id=f"call_{i}", name="add", content=TextContent(str(i + 40))))
        out.append(AssistantMessage(model="m", content=TextContent(f"It is {i + 40}.")))
    return out


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


async def post(client: Any, url: str, data: bytes) -> None:
    headers = {
        "content-type": "application/json",
        "authorization": "Bearer sk-test",
        "x-api-key": "sk-test",
        "anthropic-version": "2023-06-01",
    }
    async with client.stream("POST", url, content=data, headers=headers) as resp:
        async for _ in resp.aiter_raw():
            pass


def make_model(name: str, base_url: str, sent: list[bytes], cache: bool) -> Any:
    """The backend ``name`` against ``base_url``, recording each request body it sends."""
    import msgspec

    from foundation_ai.backends import anthropic, openai_chat, openai_responses

    if name == "chat":
        model: Any = openai_chat("m", base_url=base_url + "/v1", api_key="sk-test")
        if not cache:
            model._wire_cache = None
        chat_body = model._body

        def recording_body(interaction: Any, params: Any) -> bytes:
            data: bytes = chat_body(interaction, params)
            sent.append(data)
            return data

        model._body = recording_body
        return model
    if name == "anthropic":
        model = anthropic("m", base_url=base_url, api_key="sk-test")
    else:
        model = openai_responses("m", base_url=base_url, api_key="sk-test")
    if not cache and hasattr(model, "_wire_cache"):
        model._wire_cache = None
    wire_body = model.wire_body

    def recording(interaction: Any, params: Any) -> Any:
        body = wire_body(interaction, params)
        sent.append(body if isinstance(body, bytes) else msgspec.json.encode(body))
        return body

    model.wire_body = recording
    return model


Row = tuple[list[float], list[float], list[float], int]


async def run(
    sizes: list[int], reps: int, base_url: str, backends: list[str], cache: bool
) -> dict[tuple[str, int], Row]:
    import httpx2
    import msgspec

    from foundation_ai import AgentSession
    from foundation_ai.agentic import InMemorySessionStore, tool

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    raw = httpx2.AsyncClient(timeout=60)
    results: dict[tuple[str, int], Row] = {}
    for n in sizes:
        past = history(n)
        agents: dict[str, Any] = {}
        sent: dict[str, list[bytes]] = {}
        for name in backends:
            sent[name] = []
            model = make_model(name, base_url, sent[name], cache)
            agent = AgentSession.builder(model).with_tools(add).with_store(InMemorySessionStore()).build()
            agent.messages.extend(past)
            agents[name] = agent
            results[name, n] = ([], [], [], 0)
        for rep in range(reps + 1):  # the first of each is a warm-up
            for name in backends:
                agent = agents[name]
                t0 = time.perf_counter()
                turn = await agent.arun_turn("What is 2 + 40?")
                dt = (time.perf_counter() - t0) * 1e3
                assert turn.text() == "ok", (name, turn)
                body = sent[name][-1]
                sent[name].clear()
                body_dict = msgspec.json.decode(body)  # the same request, as a dict
                # the floor: copy the request bytes and send them, read the streamed answer
                t0 = time.perf_counter()
                await post(raw, base_url + PATHS[name], bytes(bytearray(body)))
                df = (time.perf_counter() - t0) * 1e3
                # for information: encode the request from its dict, then send it
                t0 = time.perf_counter()
                await post(raw, base_url + PATHS[name], msgspec.json.encode(body_dict))
                de = (time.perf_counter() - t0) * 1e3
                ours, floor, encoded, _ = results[name, n]
                if rep:
                    ours.append(dt)
                    floor.append(df)
                    encoded.append(de)
                results[name, n] = (ours, floor, encoded, len(body))
        for name in backends:
            ours, floor, encoded, size = results[name, n]
            print(
                f"{name:>9} {n:>6} messages {size / 1e6:5.2f} MB  foundation_ai median"
                f" {statistics.median(ours):7.1f} ms min {min(ours):7.1f}   floor median"
                f" {statistics.median(floor):6.1f} ms min {min(floor):6.1f}   ratio (median)"
                f" {statistics.median(ours) / statistics.median(floor):5.2f}x"
                f"   (encode dict + send: median {statistics.median(encoded):6.1f} ms)",
                flush=True,
            )
    await raw.aclose()
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--sizes", default="4000,20000,40000")
    ap.add_argument("--backends", default="chat,anthropic,responses")
    ap.add_argument("--no-cache", action="store_true", help="map every request from the whole history")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return
    port_file = Path(f"/tmp/history-bench-{os.getpid()}.port")
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file)])
    try:
        for _ in range(200):
            if port_file.exists() and port_file.read_text():
                break
            time.sleep(0.05)
        base_url = f"http://127.0.0.1:{port_file.read_text()}"
        print(load())
        print("wire cache:", "off (--no-cache)" if args.no_cache else "on")
        sizes = [int(s) for s in args.sizes.split(",")]
        backends = args.backends.split(",")
        results = asyncio.run(run(sizes, args.reps, base_url, backends, not args.no_cache))
        print(load())
        big = max(sizes)
        for name in backends:
            ours, floor, _, _ = results[name, big]
            ratio = statistics.median(ours) / statistics.median(floor)
            verdict = "met" if ratio <= 2.0 else "NOT met"
            print(
                f"goal ({name}): at {big} messages time per turn <= 2x the floor: {ratio:.2f}x -> {verdict}"
            )
    finally:
        proc.terminate()
        proc.wait()
        port_file.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
