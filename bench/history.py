"""History cost: client-side time per turn as the stored history grows, beside its floor.

One ``AgentSession`` on the ``openai_chat`` backend with the in-memory store, against a loopback
fake OpenAI server in a subprocess (it reads the whole request body and answers a tiny streamed
answer). The history is built directly (user text, assistant tool call, tool result, assistant
text: four messages per past turn) at 4,000 / 20,000 / 40,000 messages, then one turn is run
and timed (``arun_turn``, wall clock, client side; the history is cut back after each turn).

The floor, measured interleaved in the same run: copying the same request bytes and sending
them with a plain ``httpx.AsyncClient`` to the same server, reading the streamed answer. Printed
beside it for information: encoding the same body from its dict (``msgspec.json.encode``) and
sending it.

Goal (issue "Performance at scale", goal 1): at 40,000 messages the time per turn is at most
2x the floor. Run: ``python bench/history.py [--reps 7] [--sizes 4000,20000,40000]``.
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

ANSWER = [
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


def serve(port_file: str) -> None:
    """The fake server (run in a subprocess): read headers + Content-Length body, answer SSE."""
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in ANSWER) + "data: [DONE]\n\n"
    payload = body.encode()
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
        + str(len(payload)).encode()
        + b"\r\n\r\n"
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                headers = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in headers.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                writer.write(head + payload)
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


async def post(client: Any, base_url: str, data: bytes) -> None:
    headers = {"content-type": "application/json", "authorization": "Bearer sk-test"}
    async with client.stream("POST", base_url + "/chat/completions", content=data, headers=headers) as resp:
        async for _ in resp.aiter_raw():
            pass


async def run(sizes: list[int], reps: int, base_url: str) -> dict[int, tuple[list[float], list[float], int]]:
    import httpx
    import msgspec

    from foundation_ai import AgentSession
    from foundation_ai.agentic import InMemorySessionStore, tool
    from foundation_ai.backends import openai_chat

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = openai_chat("m", base_url=base_url, api_key="sk-test")
    sent: list[bytes] = []
    body_of = model._body

    def recording_body(interaction: Any, params: Any) -> bytes:
        data = body_of(interaction, params)
        sent.append(data)
        return data

    model._body = recording_body  # type: ignore[method-assign]
    raw = httpx.AsyncClient(timeout=60)
    results: dict[int, tuple[list[float], list[float], int]] = {}
    for n in sizes:
        agent = AgentSession.builder(model).with_tools(add).with_store(InMemorySessionStore()).build()
        agent.messages.extend(history(n))
        ours: list[float] = []
        floor: list[float] = []
        encoded: list[float] = []
        size = 0
        for rep in range(reps + 1):  # the first of each is a warm-up
            t0 = time.perf_counter()
            turn = await agent.arun_turn("What is 2 + 40?")
            dt = (time.perf_counter() - t0) * 1e3
            assert turn.text() == "ok", turn
            body = sent[-1]
            body_dict = msgspec.json.decode(body)  # the same request, as a dict
            sent.clear()
            # the floor: copy the request bytes and send them, read the streamed answer
            t0 = time.perf_counter()
            await post(raw, base_url, bytes(bytearray(body)))
            df = (time.perf_counter() - t0) * 1e3
            # for information: encode the request from its dict, then send it
            t0 = time.perf_counter()
            await post(raw, base_url, msgspec.json.encode(body_dict))
            de = (time.perf_counter() - t0) * 1e3
            size = len(body)
            if rep:
                ours.append(dt)
                floor.append(df)
                encoded.append(de)
        results[n] = (ours, floor, size)
        print(
            f"{n:>6} messages  {size / 1e6:5.2f} MB  foundation_ai median {statistics.median(ours):7.1f} ms"
            f" min {min(ours):7.1f}   floor median {statistics.median(floor):6.1f} ms min {min(floor):6.1f}"
            f"   ratio (median) {statistics.median(ours) / statistics.median(floor):5.2f}x"
            f"   (encode dict + send: median {statistics.median(encoded):6.1f} ms)",
            flush=True,
        )
    await raw.aclose()
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--sizes", default="4000,20000,40000")
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
        base_url = f"http://127.0.0.1:{port_file.read_text()}/v1"
        print(load())
        sizes = [int(s) for s in args.sizes.split(",")]
        results = asyncio.run(run(sizes, args.reps, base_url))
        print(load())
        big = max(results)
        ours, floor, _ = results[big]
        ratio = statistics.median(ours) / statistics.median(floor)
        verdict = "met" if ratio <= 2.0 else "NOT met"
        print(f"goal: at {big} messages time per turn <= 2x the floor: {ratio:.2f}x -> {verdict}")
    finally:
        proc.terminate()
        proc.wait()
        port_file.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
