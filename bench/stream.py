"""Assemble a seeded OpenAI Chat Completions SSE stream into the final answer, per library.

The stream (seed 2024): 1,500 text deltas, two parallel tool calls in 250 argument fragments
each (interleaved), a finish chunk, a usage chunk (``choices: []``) and ``[DONE]``: 2,002
events. Every contender reads the same bytes from the same ``httpx2.MockTransport`` (no socket)
and ends with the assembled answer (text + two complete tool calls + usage):

- foundation_ai: ``openai_chat(...).agenerate`` (async) and ``.generate`` (sync, native client);
- openai SDK: ``AsyncOpenAI.chat.completions.create(stream=True)`` typed chunks assembled by
  hand (the reference for the ratio), and the SDK's own ``chat.completions.stream(...)`` helper
  + ``get_final_completion()``;
- pydantic-ai: ``OpenAIChatModel.request_stream`` drained, then ``response.get()``;
- the judged floor: the fastest plain client using the SSE library we use, ``httpx2.EventSource``
  + ``msgspec`` decoding each event, no assembly; the hand-split bytes + ``msgspec`` floor and
  the old ``json.loads`` floor are printed for reference, not judged (why: the docstring of
  ``bench/stream_floors.py``).

Prints the best-of-``--repeat`` microseconds per event (CPU time, judged, and wall time; the
contenders take turns each round, ``stream_floors.measure``) and the ratios to the floor and to the
openai SDK. Goal (issue 3): foundation_ai within 1.5x of the floor, at least 8x faster than the
openai SDK.

The Anthropic half lives in ``bench/stream_anthropic.py`` (helper 3b): when that module exists
and defines ``main(repeat: int) -> None``, it is run after this one (see ``ANTHROPIC HALF``).

Run: ``.venv/bin/python bench/stream.py [--repeat 20]``. Peers come from the ``bench`` extra;
a missing peer is reported and skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2

import stream_floors
from stream_floors import print_table

BASE = "http://bench.invalid/v1"  # never contacted: every client uses the MockTransport
MODEL = "gpt-4o-mini"


def make_stream(seed: int = 2024) -> tuple[bytes, int, dict[str, Any]]:
    """(SSE body, number of events, the expected assembled answer)."""
    rng = random.Random(seed)
    head = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "system_fingerprint": "fp_bench",
    }
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
    events: list[str] = []
    text = []

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return json.dumps(
            {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]},
            separators=(",", ":"),
        )

    for i in range(1500):
        piece = rng.choice(words) + (" " if rng.random() < 0.5 else "")
        text.append(piece)
        events.append(chunk({"role": "assistant", "content": piece} if i == 0 else {"content": piece}))
    args = []
    frags: list[list[str]] = []
    for k in range(2):
        obj = {"query": "".join(rng.choice("abcdefgh ") for _ in range(600)), "k": k, "tags": ["x", "y"]}
        args.append(obj)
        s = json.dumps(obj)
        cuts = sorted(rng.sample(range(1, len(s)), 249))
        frags.append([s[a:b] for a, b in zip([0, *cuts], [*cuts, len(s)], strict=True)])
    for j in range(250):
        for k in range(2):
            tc: dict[str, Any] = {"index": k, "function": {"arguments": frags[k][j]}}
            if j == 0:
                tc = {
                    "index": k,
                    "id": f"call_{k}",
                    "type": "function",
                    "function": {"name": "search", "arguments": frags[k][j]},
                }
            events.append(chunk({"tool_calls": [tc]}))
    events.append(chunk({}, "tool_calls"))
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 1900,
        "total_tokens": 3100,
        "prompt_tokens_details": {"cached_tokens": 1024},
    }
    events.append(json.dumps({**head, "choices": [], "usage": usage}, separators=(",", ":")))
    events.append("[DONE]")
    body = "".join(f"data: {e}\n\n" for e in events).encode()
    return body, len(events), {"text": "".join(text), "args": args, "usage": usage}


def transport(body: bytes) -> httpx2.MockTransport:
    headers = {"content-type": "text/event-stream"}
    return httpx2.MockTransport(lambda request: httpx2.Response(200, content=body, headers=headers))


# ---------------------------------------------------------------------------------------------
# contenders: each returns (an async callable doing one full run, a checker of its result)

Runner = Callable[[], Awaitable[Any]]


def foundation_ai_async(body: bytes, expected: dict[str, Any]) -> Runner:
    from foundation_ai.backends import openai_chat
    from foundation_ai.types import Messages, ModelInteraction

    model = openai_chat(MODEL, api_key="sk-bench", http_client=httpx2.AsyncClient(transport=transport(body)))
    inter = ModelInteraction(messages=[Messages.user("go")])

    async def run() -> Any:
        out = await model.agenerate(inter)
        check_fai(out, expected)
        return out

    return run


def foundation_ai_sync(body: bytes, expected: dict[str, Any]) -> Runner:
    from foundation_ai.backends import openai_chat
    from foundation_ai.types import Messages, ModelInteraction

    model = openai_chat(MODEL, api_key="sk-bench", http_client=httpx2.Client(transport=transport(body)))
    inter = ModelInteraction(messages=[Messages.user("go")])

    async def run() -> Any:
        out = model.generate(inter)
        check_fai(out, expected)
        return out

    return run


def check_fai(out: list[Any], expected: dict[str, Any]) -> None:
    assert out[0].text() == expected["text"]
    assert [m.content.arguments for m in out[1:]] == expected["args"]
    assert out[-1].usage.output == expected["usage"]["completion_tokens"]


def openai_sdk(body: bytes, expected: dict[str, Any]) -> Runner:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(
        api_key="sk-bench", base_url=BASE, http_client=httpx2.AsyncClient(transport=transport(body))
    )

    async def run() -> Any:
        async with client.chat.completions.stream(
            model=MODEL, messages=[{"role": "user", "content": "go"}], stream_options={"include_usage": True}
        ) as stream:
            async for _ in stream:
                pass
            final = await stream.get_final_completion()
        msg = final.choices[0].message
        assert msg.content == expected["text"]
        assert [json.loads(t.function.arguments) for t in msg.tool_calls or []] == expected["args"]
        return final

    return run


def openai_sdk_raw(body: bytes, expected: dict[str, Any]) -> Runner:
    """The SDK's typed chunks from ``create(stream=True)``, assembled by hand (the usual way)."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(
        api_key="sk-bench", base_url=BASE, http_client=httpx2.AsyncClient(transport=transport(body))
    )

    async def run() -> Any:
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "go"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        text: list[str] = []
        calls: dict[int, list[str]] = {}
        usage = None
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                d = choice.delta
                if d.content:
                    text.append(d.content)
                for tc in d.tool_calls or []:
                    calls.setdefault(tc.index, []).append(
                        (tc.function.arguments or "") if tc.function else ""
                    )
        assert "".join(text) == expected["text"]
        assert [json.loads("".join(calls[k])) for k in sorted(calls)] == expected["args"]
        assert usage is not None
        return usage

    return run


def pydantic_ai(body: bytes, expected: dict[str, Any]) -> Runner:
    from openai import AsyncOpenAI
    from pydantic_ai.messages import ModelRequest, TextPart, ToolCallPart, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(
        api_key="sk-bench", base_url=BASE, http_client=httpx2.AsyncClient(transport=transport(body))
    )
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
    messages: list[Any] = [ModelRequest(parts=[UserPromptPart("go")])]
    params = ModelRequestParameters()

    async def run() -> Any:
        async with model.request_stream(messages, None, params) as response:
            async for _ in response:
                pass
        res = response.get()
        texts = [p.content for p in res.parts if isinstance(p, TextPart)]
        calls = [p.args_as_dict() for p in res.parts if isinstance(p, ToolCallPart)]
        assert "".join(texts) == expected["text"] and calls == expected["args"]
        return res

    return run


CONTENDERS: list[tuple[str, Callable[[bytes, dict[str, Any]], Runner]]] = [
    ("foundation_ai async", foundation_ai_async),
    ("foundation_ai sync", foundation_ai_sync),
    ("openai SDK", openai_sdk_raw),
    ("openai SDK .stream() helper", openai_sdk),
    ("pydantic-ai", pydantic_ai),
]


async def main_async(repeat: int) -> None:
    body, n, expected = make_stream()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"OpenAI Chat stream: {n} events, {len(body) / 1024:.0f} KiB, best of {repeat}; load average {load}"
    )
    floors = stream_floors.contenders(lambda: transport(body), BASE + "/chat/completions", n)
    runs: list[tuple[str, Runner]] = [(name, build()) for name, build in floors]
    for name, make in CONTENDERS:
        try:
            runs.append((name, make(body, expected)))
        except ImportError as exc:
            print(f"{name:<32}{'not installed: ' + str(exc.name):>30}")
    results = await stream_floors.measure(runs, repeat, n)
    print_table(results, "openai SDK", "the openai SDK")


# ============================================================================================
# ANTHROPIC HALF: helper 3b adds bench/stream_anthropic.py with ``main(repeat: int) -> None``
# (same shape: seeded Anthropic Messages stream, foundation_ai vs the anthropic SDK vs the
# floor, over httpx2.MockTransport). It is picked up here when present.


def anthropic_half(repeat: int) -> None:
    path = Path(__file__).with_name("stream_anthropic.py")
    if not path.exists():
        print("\n(Anthropic half: bench/stream_anthropic.py not present yet)")
        return
    spec = importlib.util.spec_from_file_location("stream_anthropic", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    print()
    module.main(repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--no-anthropic", action="store_true", help="skip the Anthropic half")
    ns = ap.parse_args()
    asyncio.run(main_async(ns.repeat))
    if not ns.no_anthropic:
        anthropic_half(ns.repeat)


if __name__ == "__main__":
    main()
