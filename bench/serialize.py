"""Round-trip a seeded 200-message conversation through JSON bytes and back into typed objects.

Prints microseconds per message (encode + decode, best of several repeats) for:

- foundation_ai: ``to_json(list_of_messages)`` then ``from_json(data, list[Messages])``;
- pydantic-ai: ``ModelMessagesTypeAdapter.dump_json`` / ``validate_json`` on the equivalent
  conversation (one part per message, as in foundation_ai);
- langchain-core: ``messages_to_dict`` + ``json.dumps`` / ``json.loads`` + ``messages_from_dict``;
- the floor: ``orjson.dumps`` / ``orjson.loads`` of the same data as plain dicts (no typing).

Goal (issue 2): foundation_ai within 1.3x of the floor and at least 10x faster than pydantic-ai.

Run: ``.venv/bin/python bench/serialize.py [--messages 200] [--repeat 30]``. The peers are in the
``bench`` extra; a missing peer is reported and skipped.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from foundation_ai.types import (
    Messages,
    ModelId,
    ModelOutput,
    ModelProviders,
    StopReason,
    TextContent,
    UsageReport,
    from_json,
    to_json,
)

_TEXT = (
    "the model reads a file then calls a tool with nested arguments and waits for the result "
    "before answering the user in plain text about weather search code tests budget context"
)
WORDS = _TEXT.split()


def _sentence(rng: random.Random, lo: int = 8, hi: int = 40) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def _arguments(rng: random.Random) -> dict[str, Any]:
    return {
        "query": _sentence(rng, 2, 6),
        "limit": rng.randint(1, 50),
        "filters": {
            "tags": [rng.choice(WORDS) for _ in range(3)],
            "since": "2026-01-01",
            "exact": rng.random() < 0.5,
        },
        "options": [{"name": rng.choice(WORDS), "weight": round(rng.random(), 3)} for _ in range(2)],
    }


class Spec(msgspec.Struct):
    """One library-neutral message of the conversation."""

    kind: str  # user | text | thinking | tool_call | tool_result
    text: str = ""
    signature: str = ""
    call_id: str = ""
    name: str = ""
    args: dict[str, Any] = {}
    at: datetime = datetime(2026, 1, 1, tzinfo=UTC)


def conversation(n: int, seed: int = 42) -> list[Spec]:
    """A seeded conversation of ``n`` messages cycling user / thinking / tool call / result / text."""
    rng = random.Random(seed)
    out: list[Spec] = []
    t0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    cycle = ("user", "thinking", "tool_call", "tool_result", "text")
    call = 0
    for i in range(n):
        kind = cycle[i % len(cycle)]
        at = t0 + timedelta(seconds=i)
        if kind == "tool_call":
            call += 1
            out.append(Spec(kind, call_id=f"call_{call:04d}", name="search", args=_arguments(rng), at=at))
        elif kind == "tool_result":
            out.append(
                Spec(kind, text=_sentence(rng, 20, 60), call_id=f"call_{call:04d}", name="search", at=at)
            )
        elif kind == "thinking":
            sig = "".join(
                rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                for _ in range(120)
            )
            out.append(Spec(kind, text=_sentence(rng, 20, 60), signature=sig, at=at))
        else:
            out.append(Spec(kind, text=_sentence(rng), at=at))
    return out


# -- foundation_ai ------------------------------------------------------------------------------


def to_foundation(specs: list[Spec]) -> list[Messages]:
    model = ModelId.Name("claude-sonnet-4-5")
    usage = UsageReport.of(input=1200, output=80)
    out: list[Messages] = []
    for s in specs:
        if s.kind == "user":
            out.append(Messages.User(content=TextContent(s.text)))
        elif s.kind == "tool_result":
            out.append(
                Messages.ToolResult(
                    tool_call_id=s.call_id, name=s.name, content=TextContent(s.text), timestamp=s.at
                )
            )
        else:
            content: Any
            stop: Any = StopReason.STOP
            if s.kind == "text":
                content = ModelOutput.Text(s.text)
            elif s.kind == "thinking":
                content = ModelOutput.ThinkingContent(s.text, signature=s.signature)
            else:
                content = ModelOutput.ToolCall(id=s.call_id, name=s.name, arguments=s.args)
                stop = StopReason.TOOL_USE
            out.append(
                Messages.Assistant(
                    model=model,
                    content=content,
                    timestamp=s.at,
                    usage=usage,
                    stop_reason=stop,
                    provider=ModelProviders.Anthropic,
                )
            )
    return out


# -- pydantic-ai --------------------------------------------------------------------------------


def to_pydantic_ai(specs: list[Spec]) -> list[Any]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.usage import RequestUsage

    usage = RequestUsage(input_tokens=1200, output_tokens=80)
    out: list[Any] = []
    for s in specs:
        if s.kind == "user":
            out.append(ModelRequest(parts=[UserPromptPart(s.text, timestamp=s.at)]))
        elif s.kind == "tool_result":
            out.append(
                ModelRequest(parts=[ToolReturnPart(s.name, s.text, tool_call_id=s.call_id, timestamp=s.at)])
            )
        else:
            part: Any
            if s.kind == "text":
                part = TextPart(s.text)
            elif s.kind == "thinking":
                part = ThinkingPart(s.text, signature=s.signature, provider_name="anthropic")
            else:
                part = ToolCallPart(s.name, s.args, tool_call_id=s.call_id)
            out.append(
                ModelResponse(
                    parts=[part],
                    usage=usage,
                    model_name="claude-sonnet-4-5",
                    timestamp=s.at,
                    provider_name="anthropic",
                )
            )
    return out


# -- langchain-core -----------------------------------------------------------------------------


def to_langchain(specs: list[Spec]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    meta = {"model_name": "claude-sonnet-4-5", "stop_reason": "end_turn"}
    usage = {"input_tokens": 1200, "output_tokens": 80, "total_tokens": 1280}
    out: list[Any] = []
    for s in specs:
        if s.kind == "user":
            out.append(HumanMessage(s.text))
        elif s.kind == "tool_result":
            out.append(ToolMessage(s.text, tool_call_id=s.call_id, name=s.name))
        elif s.kind == "text":
            out.append(AIMessage(s.text, response_metadata=meta, usage_metadata=usage))
        elif s.kind == "thinking":
            block = {"type": "thinking", "thinking": s.text, "signature": s.signature}
            out.append(AIMessage([block], response_metadata=meta, usage_metadata=usage))
        else:
            call = {"name": s.name, "args": s.args, "id": s.call_id, "type": "tool_call"}
            out.append(AIMessage("", tool_calls=[call], response_metadata=meta, usage_metadata=usage))
    return out


# -- timing -------------------------------------------------------------------------------------


def best_time(fn: Callable[[], Any], repeat: int) -> float:
    """Best wall time of ``fn`` in seconds over ``repeat`` runs (after one warm-up)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=30)
    ns = ap.parse_args()
    n, repeat = ns.messages, ns.repeat
    specs = conversation(n)
    results: dict[str, float] = {}
    sizes: dict[str, int] = {}

    fa = to_foundation(specs)
    fa_type = list[Messages]

    def fa_round() -> Any:
        return from_json(to_json(fa), fa_type)

    assert fa_round() == fa, "foundation_ai round trip changed the conversation"
    sizes["foundation_ai"] = len(to_json(fa))
    results["foundation_ai"] = best_time(fa_round, repeat)

    try:
        import orjson

        plain = msgspec.to_builtins(fa)

        def floor_round() -> Any:
            return orjson.loads(orjson.dumps(plain))

        assert floor_round() == plain
        sizes["orjson floor (plain dicts)"] = len(orjson.dumps(plain))
        results["orjson floor (plain dicts)"] = best_time(floor_round, repeat)
    except ImportError:
        print("orjson not installed: no floor")

    try:
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        pa = to_pydantic_ai(specs)

        def pa_round() -> Any:
            return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(pa))

        assert pa_round() == pa, "pydantic-ai round trip changed the conversation"
        sizes["pydantic-ai"] = len(ModelMessagesTypeAdapter.dump_json(pa))
        results["pydantic-ai"] = best_time(pa_round, repeat)
    except ImportError:
        print("pydantic-ai not installed: skipped")

    try:
        from langchain_core.messages import messages_from_dict, messages_to_dict

        lc = to_langchain(specs)

        def lc_round() -> Any:
            return messages_from_dict(json.loads(json.dumps(messages_to_dict(lc))))

        assert lc_round() == lc
        sizes["langchain-core"] = len(json.dumps(messages_to_dict(lc)))
        results["langchain-core"] = best_time(lc_round, repeat)
    except ImportError:
        print("langchain-core not installed: skipped")

    floor = results.get("orjson floor (plain dicts)")
    pyd = results.get("pydantic-ai")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"round trip of a {n}-message conversation (encode to JSON bytes + decode), best of {repeat}")
    print(f"load average {load}: absolute figures scale with machine load, the ratios much less")
    print(f"{'library':<28}{'us/message':>12}{'bytes':>10}{'vs floor':>10}{'vs pydantic-ai':>16}")
    for name, secs in results.items():
        per = secs / n * 1e6
        vs_floor = f"{secs / floor:.2f}x" if floor else "-"
        vs_pyd = f"{pyd / secs:.1f}x faster" if pyd and name != "pydantic-ai" else "-"
        print(f"{name:<28}{per:>12.2f}{sizes[name]:>10}{vs_floor:>10}{vs_pyd:>16}")
    if floor and pyd:
        fa_t = results["foundation_ai"]
        ok = fa_t <= 1.3 * floor and pyd >= 10 * fa_t
        print(f"goal (<= 1.3x floor and >= 10x faster than pydantic-ai): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    gc.collect()
    main()
