"""The agent of the parallel-tools kill runs (``--agent tests._durable_parallel:agent``): a
model answer asking for three tools at once, each a side effect written once per call id.

The model is a :class:`~foundation_ai.agentic.scripted.ScriptedModel` (deterministic; it can
give calls ``depends_on``, which no chat wire carries). For the last user prompt ``P`` of a
request, ``"<run>|a=<ms>|b=<ms>|c=<ms>|<deps>"``:

- no tool result after ``P`` -> three calls in one answer: ``slow_a(ms=a)``, ``fast_b(ms=b)``,
  ``mid_c(ms=c)``; with ``deps`` = ``"deps"``, ``fast_b`` depends on ``slow_a`` (stages:
  ``[slow_a, mid_c]`` then ``[fast_b]``);
- after the results -> the text ``"done: P"`` streamed in several chunks.

Each tool (``side_effects(idempotent=True)``; ``FA_AT_MOST_ONCE=1``: plain ``side_effects``) notes ``<tool>:start`` / ``<tool>:end`` in the ``probe`` table, counts every run in
``attempts`` and writes its effect row into ``effects`` keyed by the call id (``INSERT OR
IGNORE``: the idempotency key :func:`~foundation_ai.durable.current_call_id`), so a tool run
again after a crash adds an attempt but never a second row. The model notes ``gen<n>:start``.

Environment: ``FA_EFFECTS_DB`` (the SQLite file of the three tables), ``FA_GEN_DELAY`` (seconds
per streamed chunk, default 0.02).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from typing import Any

from foundation_ai.agentic import AgentSession
from foundation_ai.agentic.scripted import ScriptedModel, call, say
from foundation_ai.agentic.tools import tool
from foundation_ai.durable import current_call_id, side_effects
from foundation_ai.ids import new_call_id
from foundation_ai.types import ModelInteraction, TextContent, ToolResultMessage, UserMessage

TOOLS = ("slow_a", "fast_b", "mid_c")


def tables(path: str) -> sqlite3.Connection:
    """The effect, attempt and probe tables (created when missing)."""
    c = sqlite3.connect(path, timeout=30, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute(
        "CREATE TABLE IF NOT EXISTS effects (call_id TEXT PRIMARY KEY, tool TEXT, run TEXT, pid INTEGER)"
    )
    c.execute("CREATE TABLE IF NOT EXISTS attempts (call_id TEXT, tool TEXT, run TEXT, pid INTEGER)")
    c.execute("CREATE TABLE IF NOT EXISTS probe (run TEXT, event TEXT, pid INTEGER, t REAL)")
    return c


def probe(run: str, event: str) -> None:
    """Note ``event`` of ``run`` with this process's pid."""
    c = tables(os.environ["FA_EFFECTS_DB"])
    try:
        c.execute("INSERT INTO probe VALUES (?, ?, ?, ?)", (run, event, os.getpid(), time.time()))
    finally:
        c.close()


def parse(prompt: str) -> tuple[str, dict[str, int], bool]:
    """``"r3|a=300|b=50|c=150|deps"`` -> ``("r3", {"slow_a": 300, ...}, True)``."""
    run, a, b, c, deps = prompt.split("|")
    ms = {"slow_a": int(a[2:]), "fast_b": int(b[2:]), "mid_c": int(c[2:])}
    return run, ms, deps == "deps"


async def _effect(name: str, run: str, ms: int) -> str:
    probe(run, f"{name}:start")
    c = tables(os.environ["FA_EFFECTS_DB"])
    try:
        c.execute("INSERT INTO attempts VALUES (?, ?, ?, ?)", (current_call_id(), name, run, os.getpid()))
        await asyncio.sleep(ms / 1000)
        c.execute(
            "INSERT OR IGNORE INTO effects VALUES (?, ?, ?, ?)", (current_call_id(), name, run, os.getpid())
        )
    finally:
        c.close()
    probe(run, f"{name}:end")
    return f"{name} wrote {run}"


def make_tool(name: str, *, idempotent: bool = True, asks: bool = False) -> Any:
    """The tool ``name`` (``slow_a``, ``fast_b`` or ``mid_c``): writes its effect row after
    ``ms`` milliseconds; marked ``side_effects(idempotent=...)``; ``asks``: it needs approval."""

    @side_effects(idempotent=idempotent)
    @tool(name=name)
    async def effect(run: str, ms: int) -> str:
        """Write this tool's effect row after ``ms`` milliseconds.

        Args:
            run: the run's tag.
            ms: milliseconds to take.
        """
        return await _effect(name, run, ms)

    if asks:
        effect.requires_approval = True  # type: ignore[attr-defined]
    return effect


def reply(interaction: ModelInteraction) -> Any:
    """The scripted answer to ``interaction`` (see the module docstring)."""
    msgs = interaction.messages
    last = max(i for i, m in enumerate(msgs) if isinstance(m, UserMessage))
    content = msgs[last].content
    prompt = content.content if isinstance(content, TextContent) else ""
    run, ms, deps = parse(prompt)
    results = sum(1 for m in msgs[last + 1 :] if isinstance(m, ToolResultMessage))
    probe(run, f"gen{1 if results == 0 else 2}:start")
    if results == 0:
        ids = {t: new_call_id() for t in TOOLS}
        return [
            say("Running three tools."),
            call("slow_a", {"run": run, "ms": ms["slow_a"]}, id=ids["slow_a"]),
            call(
                "fast_b",
                {"run": run, "ms": ms["fast_b"]},
                id=ids["fast_b"],
                depends_on=[ids["slow_a"]] if deps else (),
            ),
            call("mid_c", {"run": run, "ms": ms["mid_c"]}, id=ids["mid_c"]),
        ]
    return say(f"done: {prompt}")


def _model() -> ScriptedModel:
    delay = float(os.environ.get("FA_GEN_DELAY", "0.02"))
    return ScriptedModel([reply] * 100_000, chunk_delay=delay, record=0)


def agent() -> Any:
    """The agent factory of the parallel-tools workers: three idempotent side effects
    (``FA_AT_MOST_ONCE=1``: plain ``side_effects``, at most once per call id)."""
    idem = os.environ.get("FA_AT_MOST_ONCE") != "1"
    return AgentSession.builder(_model()).with_tools(*(make_tool(t, idempotent=idem) for t in TOOLS))


def approval_agent() -> Any:
    """The agent factory of the approval tests: ``slow_a`` and ``mid_c`` need approval,
    ``fast_b`` does not."""
    tools = (make_tool("slow_a", asks=True), make_tool("fast_b"), make_tool("mid_c", asks=True))
    return AgentSession.builder(_model()).with_tools(*tools)
