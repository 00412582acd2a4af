"""The floors of the stream benches (``bench/stream.py``, ``bench/stream_anthropic.py``): the
fastest plain clients reading the same SSE bytes over the same ``httpx2.AsyncClient`` and
transport, decoding every event with msgspec (as foundation_ai does) and assembling nothing.

- ``bytes + msgspec``: ``Response.aiter_bytes()`` split on blank lines by hand, each ``data:``
  line decoded with ``msgspec.json.decode``;
- ``httpx2 SSE + msgspec``: ``httpx2.EventSource`` events, ``msgspec.json.decode(sse.data)``;
- ``httpx2 SSE + json.loads``: the floor these benches used before (stdlib ``json``), printed
  for reference only.

The floor a bench judges against is the fastest of the first two (:func:`floor_of`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import msgspec

Runner = Callable[[], Awaitable[Any]]

BYTES = "floor: bytes + msgspec"
SSE_MSGSPEC = "floor: httpx2 SSE + msgspec"
SSE_JSON = "httpx2 SSE + json.loads (old floor)"
FLOORS = (BYTES, SSE_MSGSPEC)
"""The contenders :func:`floor_of` picks the floor from."""


def bytes_msgspec(client: httpx2.AsyncClient, url: str) -> Runner:
    """Blank-line splitting of the body's bytes + msgspec per ``data:`` line; returns the
    number of events read."""
    decode = msgspec.json.decode

    async def run() -> int:
        n = 0
        rest = b""
        async with client.stream("POST", url, json={"model": "m"}) as resp:
            async for chunk in resp.aiter_bytes():
                *events, rest = (rest + chunk).split(b"\n\n")
                for event in events:
                    for line in event.split(b"\n"):
                        if line.startswith(b"data:"):
                            data = line[6:] if line[5:6] == b" " else line[5:]
                            if data != b"[DONE]":
                                decode(data)
                            n += 1
        return n

    return run


def sse_msgspec(client: httpx2.AsyncClient, url: str) -> Runner:
    """``httpx2.EventSource`` + ``msgspec.json.decode`` per event."""
    decode = msgspec.json.decode

    async def run() -> int:
        n = 0
        async with client.stream("POST", url, json={"model": "m"}) as resp:
            async for sse in httpx2.EventSource(resp):
                if sse.data != "[DONE]":
                    decode(sse.data)
                n += 1
        return n

    return run


def sse_json(client: httpx2.AsyncClient, url: str) -> Runner:
    """``httpx2.EventSource`` + stdlib ``json.loads`` per event (the old floor)."""

    async def run() -> int:
        n = 0
        async with client.stream("POST", url, json={"model": "m"}) as resp:
            async for sse in httpx2.EventSource(resp):
                if sse.data != "[DONE]":
                    json.loads(sse.data)
                n += 1
        return n

    return run


def contenders(
    transport: Callable[[], httpx2.AsyncBaseTransport], url: str, events: int
) -> list[tuple[str, Callable[[], Runner]]]:
    """The three floor contenders as ``(name, make)``; each run checks it read ``events``."""

    def checked(make: Callable[[httpx2.AsyncClient, str], Runner]) -> Callable[[], Runner]:
        def build() -> Runner:
            run = make(httpx2.AsyncClient(transport=transport()), url)

            async def go() -> int:
                n = await run()
                assert n == events, (make.__name__, n, events)
                return n

            return go

        return build

    return [
        (BYTES, checked(bytes_msgspec)),
        (SSE_MSGSPEC, checked(sse_msgspec)),
        (SSE_JSON, checked(sse_json)),
    ]


def floor_of(results: dict[str, float]) -> tuple[str, float] | None:
    """The fastest of :data:`FLOORS` measured in ``results`` (name -> us/event)."""
    got = [(results[name], name) for name in FLOORS if name in results]
    if not got:
        return None
    us, name = min(got)
    return name, us


def print_table(results: dict[str, float], sdk: str, sdk_label: str) -> None:
    """The table (us/event, x the floor, how many times faster the SDK ``sdk`` is... slower)
    and the verdicts: foundation_ai async within 1.5x of the floor, >= 8x faster than the SDK."""
    picked = floor_of(results)
    fl = picked[1] if picked else None
    ref = results.get(sdk)
    print(f"{'contender':<36}{'us/event':>10}{'x floor':>9}{'SDK / x':>9}")
    for name, us in results.items():
        xf = f"{us / fl:.2f}" if fl else "-"
        xs = f"{ref / us:.1f}" if ref else "-"
        print(f"{name:<36}{us:>10.2f}{xf:>9}{xs:>9}")
    for variant in ("foundation_ai async", "foundation_ai sync"):
        ours = results.get(variant)
        if ours and picked:
            print(
                f"{variant}: {ours:.2f} us/event vs the floor ({picked[0]}) {picked[1]:.2f}: "
                f"{ours / picked[1]:.2f}x, goal <= 1.5x: {'met' if ours <= 1.5 * picked[1] else 'NOT met'}"
            )
    fai = results.get("foundation_ai async")
    if fai and ref:
        print(f">= 8x faster than {sdk_label}: {'met' if ref >= 8 * fai else 'NOT met'} ({ref / fai:.1f}x)")
