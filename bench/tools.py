"""Tools at scale: request size with many tools, with and without ``shed``; the per-call
overhead of an MCP tool (stdio) against a plain Python tool.

1. Request tokens: for 10, 100 and 500 registered tools (generated, each with a description and
   two or three typed parameters), the OpenAI Chat Completions request body of a one-message
   turn is built (``backends.openai_chat.build_request``) and its ``tools`` array counted in
   tokens of the bundled SmolLM2 tokenizer (llama.cpp, vocabulary only) and in bytes:
   - all tools declared (a plain ``ToolRegistry``);
   - ``shed`` before discovery (``shed`` alone) and after one ``shed`` call (``shed`` + 5).
   Goal: with ``shed``, the request does not grow with the number of registered tools
   (500 tools within 10 % of 10 tools) and sends under 5 % of the all-tools tokens at 500.
   Also printed: the time of one keyword ``shed`` search over 500 tools.
2. Per-call overhead: ``ToolRegistry.run`` of an ``add`` tool, N calls each: a plain async
   Python tool, a plain sync tool (worker thread), and the same tool on a real MCP server over
   stdio (tests/_mcp_server.py, the official SDK). Median of 5 batches, microseconds per call,
   wall and process CPU (the MCP server's own CPU is not counted). Goal: an MCP call under
   5 ms on this machine.

Usage: ``python bench/tools.py [N]`` (default N=200).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
BATCHES = 5
ROOT = Path(__file__).resolve().parent.parent

VERBS = ["get", "list", "create", "update", "delete", "search", "export", "sync", "archive", "render"]
NOUNS = [
    "invoice",
    "customer",
    "ticket",
    "report",
    "calendar_event",
    "repository",
    "image",
    "order",
    "user",
    "note",
]
DOMAINS = ["billing", "crm", "support", "analytics", "calendar", "code", "media", "shop", "accounts", "notes"]


def make_tools(n: int) -> list[Any]:
    from foundation_ai.agentic import tool

    out = []
    for i in range(n):
        verb, noun, domain = VERBS[i % 10], NOUNS[(i // 10) % 10], DOMAINS[(i // 100) % 10]
        name = f"{domain}_{verb}_{noun}_{i}"

        def fn(id: str, limit: int = 10, include_archived: bool = False) -> str:
            return id

        fn.__doc__ = (
            f"{verb.capitalize()} a {noun.replace('_', ' ')} in the {domain} system.\n\n"
            "Args:\n    id: the identifier of the record.\n    limit: how many records at most.\n"
            "    include_archived: include archived records too.\n"
        )
        out.append(tool(fn, name=name, category=domain))
    return out


def tokenizer() -> Any:
    try:
        from llama_cpp import Llama

        from foundation_ai.backends._llama_source import bundled_model_path

        llm = Llama(model_path=str(bundled_model_path()), vocab_only=True, verbose=False)
        return lambda text: len(llm.tokenize(text.encode(), add_bos=False))
    except Exception as exc:
        print(f"(no SmolLM2 tokenizer: {type(exc).__name__}: {exc}; counting bytes / 4)")
        return lambda text: len(text.encode()) // 4


def request_tools_json(decls: Any) -> str:
    import msgspec

    from foundation_ai.backends._openai_chat_request import build_request
    from foundation_ai.types import Messages, ModelInteraction, ModelParams

    interaction = ModelInteraction(messages=[Messages.user("Find the overdue invoices.")], tools_shed=decls)
    body = build_request(interaction, ModelParams(), "gpt-4.1")
    return msgspec.json.encode(body.get("tools", [])).decode()


def request_sizes() -> list[bool]:
    from foundation_ai.agentic.tools import ToolRegistry
    from foundation_ai.agentic.toolsets.shed import ToolShed

    count = tokenizer()
    print("1. request tools, tokens (SmolLM2 tokenizer) and bytes of the Chat Completions `tools` array")
    print(
        f"{'registered':>10}  {'all tools':>20}  {'shed alone':>18}  {'shed + 5 active':>18}  {'shed+5 / all':>12}"
    )
    rows = {}
    for n in (10, 100, 500):
        tools = make_tools(n)
        every = request_tools_json(ToolRegistry(tools).declarations())
        reg = ToolShed().tools(tools).registry()
        alone = request_tools_json(reg.declarations())
        hits = reg.search("invoice billing", 5)
        reg.activate(*(h.name for h in hits))
        five = request_tools_json(reg.declarations())
        rows[n] = (count(every), count(alone), count(five))
        print(
            f"{n:>10}  {rows[n][0]:>9} tok {len(every):>7} B  {rows[n][1]:>7} tok {len(alone):>6} B"
            f"  {rows[n][2]:>7} tok {len(five):>6} B  {rows[n][2] / rows[n][0]:>11.1%}"
        )
    reg = ToolShed().tools(make_tools(500)).registry()
    reg.search("warm up")
    times = []
    for _ in range(BATCHES):
        t0 = time.perf_counter()
        for _ in range(20):
            reg.search("overdue invoices in billing", 5)
        times.append((time.perf_counter() - t0) / 20 * 1e3)
    print(
        f"   shed keyword search over 500 tools: {statistics.median(times):.2f} ms (median of {BATCHES} x 20)"
    )
    flat = rows[500][2] <= 1.10 * rows[10][2]
    small = rows[500][2] < 0.05 * rows[500][0]
    print(f"   goal: shed request flat from 10 to 500 tools (<= +10 %): {'met' if flat else 'NOT met'}")
    print(f"   goal: shed + 5 active under 5 % of all 500 tools: {'met' if small else 'NOT met'}")
    return [flat, small]


async def per_call() -> list[bool]:
    from foundation_ai.agentic import tool
    from foundation_ai.agentic.tools import ToolRegistry
    from foundation_ai.agentic.toolsets.mcp import MCPServerTools
    from foundation_ai.types import ToolCall

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tool(name="add")
    def add_sync(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    server = MCPServerTools.stdio(
        [sys.executable, str(ROOT / "tests" / "_mcp_server.py"), "stdio"], name="bench"
    )
    mcp_tools = [t for t in await server.alist_tools() if t.definition.name == "add"]
    cases = [
        ("plain Python tool (async)", ToolRegistry([add])),
        ("plain Python tool (sync, worker thread)", ToolRegistry([add_sync])),
        ("MCP tool over stdio (official SDK)", ToolRegistry(mcp_tools)),
    ]
    call = ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})
    print(f"\n2. per-call overhead, ToolRegistry.run, median of {BATCHES} batches of {N} calls")
    medians = {}
    for label, reg in cases:
        for _ in range(20):  # warm up (and start the MCP server)
            r = await reg.run(call)
            assert r.error_detail is None, r
        walls, cpus = [], []
        for _ in range(BATCHES):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(N):
                await reg.run(call)
            walls.append((time.perf_counter() - t0) / N * 1e6)
            cpus.append((time.process_time() - c0) / N * 1e6)
        medians[label] = statistics.median(walls)
        print(
            f"   {label:<42} {medians[label]:>9.1f} us/call wall   {statistics.median(cpus):>9.1f} us/call CPU"
        )
    await server.aclose()
    mcp = medians["MCP tool over stdio (official SDK)"]
    plain = medians["plain Python tool (async)"]
    print(f"   MCP overhead over a plain async tool: {mcp - plain:.1f} us/call ({mcp / plain:.0f}x)")
    ok = mcp < 5000
    print(f"   goal: an MCP stdio call under 5 ms: {'met' if ok else 'NOT met'}")
    return [ok]


def main() -> None:
    sys.path.insert(0, str(ROOT / "src"))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  (cpus: {os.cpu_count()})\n")
    results = request_sizes()
    results += asyncio.run(per_call())
    print(f"\nload average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"goals met: {sum(results)} of {len(results)}")


if __name__ == "__main__":
    main()
