"""Assemble a seeded Anthropic Messages SSE stream into the final answer, per library.

The stream (seed 2024): ``message_start`` (usage with cache fields), a ``ping``, one text block
of 1,500 ``text_delta`` events, two ``tool_use`` blocks of 250 ``input_json_delta`` fragments
each, ``message_delta`` (stop reason, final usage), ``message_stop``: 2,010 events. Every
contender reads the same bytes from the same ``httpx2.MockTransport`` (no socket) and ends with
the assembled answer (text + two complete tool calls + usage):

- foundation_ai: ``anthropic(...).agenerate`` (async) and ``.generate`` (sync, native client);
- anthropic SDK: ``AsyncAnthropic.messages.create(stream=True)`` typed events assembled by hand
  (the reference for the ratio), and the SDK's ``messages.stream(...)`` helper +
  ``get_final_message()``;
- the judged floor: the fastest plain client using the SSE library we use, ``httpx2.EventSource``
  + ``msgspec`` decoding each event, no assembly; the hand-split bytes + ``msgspec`` floor and
  the old ``json.loads`` floor are printed for reference, not judged (why: the docstring of
  ``bench/stream_floors.py``).

Prints the best-of-``--repeat`` microseconds per event (CPU time, judged, and wall time; the
contenders take turns each round, ``stream_floors.measure``) and the ratios to the floor and to the
SDK. Run: ``.venv/bin/python bench/stream_anthropic.py [--repeat 20]`` (also run at the end of
``bench/stream.py``). The SDK comes from the ``bench`` extra; a missing one is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2

import stream_floors
from stream_floors import print_table

BASE = "http://bench.invalid"  # never contacted: every client uses the MockTransport
MODEL = "claude-opus-4-5"
Runner = Callable[[], Awaitable[Any]]


def make_stream(seed: int = 2024) -> tuple[bytes, int, dict[str, Any]]:
    """(SSE body, number of events, the expected assembled answer)."""
    rng = random.Random(seed)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        " ",
        "the",
        "quick",
        "brown",
        "fox",
        ",",
        ".",
        "\n",
        "é",
        "“q”",
    ]
    events: list[tuple[str, dict[str, Any]]] = []
    usage0 = {
        "input_tokens": 1200,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 1024,
        "output_tokens": 1,
    }
    events.append(
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_bench",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": MODEL,
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage0,
                },
            },
        )
    )
    events.append(
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
    )
    events.append(("ping", {"type": "ping"}))
    text = []
    for _ in range(1500):
        piece = rng.choice(words) + (" " if rng.random() < 0.5 else "")
        text.append(piece)
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
            )
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    args = []
    for k in range(2):
        obj = {"query": "".join(rng.choice("abcdefgh ") for _ in range(600)), "k": k, "tags": ["x", "y"]}
        args.append(obj)
        s = json.dumps(obj)
        cuts = sorted(rng.sample(range(1, len(s)), 249))
        frags = [s[a:b] for a, b in zip([0, *cuts], [*cuts, len(s)], strict=True)]
        idx = k + 1
        block = {"type": "tool_use", "id": f"toolu_{k}", "name": "search", "input": {}}
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": idx, "content_block": block})
        )
        for f in frags:
            delta = {"type": "input_json_delta", "partial_json": f}
            events.append(
                ("content_block_delta", {"type": "content_block_delta", "index": idx, "delta": delta})
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": idx}))
    usage = {
        "input_tokens": 1200,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 1024,
        "output_tokens": 1900,
    }
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": usage,
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    body = "".join(
        f"event: {name}\ndata: {json.dumps(d, separators=(',', ':'))}\n\n" for name, d in events
    ).encode()
    return body, len(events), {"text": "".join(text), "args": args, "usage": usage}


def transport(body: bytes) -> httpx2.MockTransport:
    headers = {"content-type": "text/event-stream"}
    return httpx2.MockTransport(lambda request: httpx2.Response(200, content=body, headers=headers))


def sdk_http_client(body: bytes) -> Any:
    """An async client for the anthropic SDK over the same mock transport (the SDK, like
    foundation_ai, is built on ``httpx2``)."""
    return httpx2.AsyncClient(transport=transport(body))


# ---------------------------------------------------------------------------------------------
# contenders


def check_fai(out: list[Any], expected: dict[str, Any]) -> None:
    assert out[0].text() == expected["text"]
    assert [m.content.arguments for m in out[1:]] == expected["args"]
    assert out[-1].usage.output == expected["usage"]["output_tokens"]
    assert out[-1].usage.cache_read == expected["usage"]["cache_read_input_tokens"]


def foundation_ai_async(body: bytes, expected: dict[str, Any]) -> Runner:
    from foundation_ai.backends import anthropic
    from foundation_ai.types import Messages, ModelInteraction

    model = anthropic(
        MODEL, api_key="sk-ant-bench", http_client=httpx2.AsyncClient(transport=transport(body))
    )
    inter = ModelInteraction(messages=[Messages.user("go")])

    async def run() -> Any:
        out = await model.agenerate(inter)
        check_fai(out, expected)
        return out

    return run


def foundation_ai_sync(body: bytes, expected: dict[str, Any]) -> Runner:
    from foundation_ai.backends import anthropic
    from foundation_ai.types import Messages, ModelInteraction

    model = anthropic(MODEL, api_key="sk-ant-bench", http_client=httpx2.Client(transport=transport(body)))
    inter = ModelInteraction(messages=[Messages.user("go")])

    async def run() -> Any:
        out = model.generate(inter)
        check_fai(out, expected)
        return out

    return run


def anthropic_sdk_raw(body: bytes, expected: dict[str, Any]) -> Runner:
    """The SDK's typed events from ``messages.create(stream=True)``, assembled by hand."""
    from anthropic import AsyncAnthropic

    client = AsyncAnthropic(api_key="sk-ant-bench", base_url=BASE, http_client=sdk_http_client(body))

    async def run() -> Any:
        stream = await client.messages.create(
            model=MODEL, max_tokens=4096, messages=[{"role": "user", "content": "go"}], stream=True
        )
        text: list[str] = []
        calls: dict[int, list[str]] = {}
        usage = None
        async for ev in stream:
            if ev.type == "content_block_delta":
                d = ev.delta
                if d.type == "text_delta":
                    text.append(d.text)
                elif d.type == "input_json_delta":
                    calls.setdefault(ev.index, []).append(d.partial_json)
            elif ev.type == "message_delta":
                usage = ev.usage
        assert "".join(text) == expected["text"]
        assert [json.loads("".join(calls[k])) for k in sorted(calls)] == expected["args"]
        assert usage is not None and usage.output_tokens == expected["usage"]["output_tokens"]
        return usage

    return run


def anthropic_sdk_helper(body: bytes, expected: dict[str, Any]) -> Runner:
    from anthropic import AsyncAnthropic

    client = AsyncAnthropic(api_key="sk-ant-bench", base_url=BASE, http_client=sdk_http_client(body))

    async def run() -> Any:
        async with client.messages.stream(
            model=MODEL, max_tokens=4096, messages=[{"role": "user", "content": "go"}]
        ) as stream:
            async for _ in stream:
                pass
            final = await stream.get_final_message()
        texts = [b.text for b in final.content if b.type == "text"]
        calls = [b.input for b in final.content if b.type == "tool_use"]
        assert "".join(texts) == expected["text"] and calls == expected["args"]
        return final

    return run


CONTENDERS: list[tuple[str, Callable[[bytes, dict[str, Any]], Runner]]] = [
    ("foundation_ai async", foundation_ai_async),
    ("foundation_ai sync", foundation_ai_sync),
    ("anthropic SDK", anthropic_sdk_raw),
    ("anthropic SDK .stream() helper", anthropic_sdk_helper),
]


async def main_async(repeat: int) -> dict[str, tuple[float, float]]:
    body, n, expected = make_stream()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"Anthropic Messages stream: {n} events, {len(body) / 1024:.0f} KiB, best of {repeat}; load average {load}"
    )
    floors = stream_floors.contenders(lambda: transport(body), BASE + "/v1/messages", n)
    runs: list[tuple[str, Runner]] = [(name, build()) for name, build in floors]
    for name, make in CONTENDERS:
        try:
            runs.append((name, make(body, expected)))
        except ImportError as exc:
            print(f"{name:<32}{'not installed: ' + str(exc.name):>30}")
    results = await stream_floors.measure(runs, repeat, n)
    print_table(results, "anthropic SDK", "the anthropic SDK")
    return results


def main(repeat: int = 20) -> None:
    """Run the benchmark and print the table (called by ``bench/stream.py`` too)."""
    asyncio.run(main_async(repeat))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    main(ap.parse_args().repeat)
