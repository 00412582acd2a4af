"""Objects the cycle collector tracks per session, idle and while a turn waits for its model.

At 10,000 concurrent sessions most turns are waiting (for an HTTP pool slot, for the first
byte): every object they hold that the cycle collector tracks is scanned by each full
collection, so the count per waiting session is what a collection's cost grows with.

This builds N sessions the way ``bench/concurrency.py`` does (one shared model, an
``InMemorySessionStore``, one async tool), then starts ``arun_turn`` on all of them with a
model whose stream waits on an ``asyncio.Event`` before its first chunk, and counts, per session:

- idle: objects tracked by ``gc`` (``gc.get_objects()``) that building a session added, and the
  references they hold (``gc.get_referents``), after one finished turn each;
- waiting: what a turn in flight adds on top (its task, the driver's frames, the turn state,
  the request...), with the model's own share (the scripted model's generator waiting on the
  event) counted apart;

then times a full collection (``gc.collect()``) while every turn waits, releases the event and
checks every turn finished with the tool's answer. The counts do not depend on the machine's
load; the collection time does (the load average is printed).
Usage: ``python bench/waiting.py [N]`` (default 1000), ``--types`` for the new objects by type.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


class GatedModel:
    """A model whose stream waits for ``gate`` before its first chunk, then plays ``inner``."""

    chunk_mode = "snapshot"

    def __init__(self, inner: Any, gate: asyncio.Event) -> None:
        self.inner, self.gate = inner, gate
        self.descriptor, self.model_id = inner.descriptor, inner.model_id

    async def astream(self, interaction: Any, params: Any = None) -> AsyncIterator[Any]:
        await self.gate.wait()
        async for item in self.inner.astream(interaction, params):
            yield item


def snapshot() -> dict[int, Any]:
    gc.collect()
    return {id(o): o for o in gc.get_objects()}


def new_since(before: dict[int, Any], now: dict[int, Any]) -> list[Any]:
    return [o for i, o in now.items() if i not in before]


def refs(objs: list[Any]) -> int:
    return sum(len(gc.get_referents(o)) for o in objs)


def by_type(objs: list[Any], n: int, top: int = 25) -> str:
    count: collections.Counter[str] = collections.Counter()
    held: collections.Counter[str] = collections.Counter()
    for o in objs:
        kind = type(o).__qualname__
        if kind == "coroutine":
            kind += f" {o.cr_code.co_name}"
        count[kind] += 1
        held[kind] += len(gc.get_referents(o))
    return "\n".join(
        f"    {k:<40} {v / n:6.2f} objects {held[k] / n:7.2f} references" for k, v in count.most_common(top)
    )


async def measure(n: int, show_types: bool) -> None:
    from foundation_ai import AgentSession
    from foundation_ai.agentic import InMemorySessionStore, ScriptedModel, call, say, tool
    from foundation_ai.agentic.scripted import Reply
    from foundation_ai.types import ToolResultMessage

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    tool_call = call("add", {"a": 2, "b": 40}, id="call_1")
    answer = say("42")

    class Endless(ScriptedModel):
        def _next_reply(self, interaction: Any) -> Any:  # type: ignore[override]
            last = interaction.messages[-1]
            return Reply([answer if isinstance(last, ToolResultMessage) else tool_call])

    gate = asyncio.Event()
    gate.set()
    model = GatedModel(Endless(chunk_words=0, record=0), gate)
    store = InMemorySessionStore()
    # warm up every lazy import and cache on one session of its own
    warm = AgentSession.builder(model).with_tools(add).with_store(store).build()
    assert (await warm.arun_turn("warm up")).text() == "42"

    base = snapshot()
    sessions = [AgentSession.builder(model).with_tools(add).with_store(store).build() for _ in range(n)]
    for k, s in enumerate(sessions):  # one finished turn each: a session as it idles between turns
        assert (await s.arun_turn(f"session {k}")).text() == "42"
    store._data.clear()  # the stored records are the store's, not the session's
    idle = snapshot()
    idle_new = new_since(base, idle)

    gate.clear()
    tasks = [asyncio.ensure_future(s.arun_turn(f"session {k}")) for k, s in enumerate(sessions)]
    for _ in range(20):  # every turn reaches the model's gate
        await asyncio.sleep(0)
    waiting = snapshot()
    wait_new = new_since(idle, waiting)
    model_share = [
        o
        for o in wait_new
        if getattr(getattr(o, "ag_code", None), "co_name", None) == "astream"
        or (type(o).__name__ == "frame" and getattr(o.f_code, "co_name", None) == "astream")
    ]

    print(f"tracked objects per session, {n} sessions ({load()})")
    print(
        f"  idle (built, one turn done):    {len(idle_new) / n:6.1f} objects  {refs(idle_new) / n:6.1f} references"
    )
    print(
        f"  a waiting turn adds:            {len(wait_new) / n:6.1f} objects  {refs(wait_new) / n:6.1f} references"
        f"  (of which the model's stream: {len(model_share) / n:.1f} objects)"
    )
    total = idle_new + wait_new
    print(
        f"  waiting session (idle + turn):  {len(total) / n:6.1f} objects  {refs(total) / n:6.1f} references"
    )
    if show_types:
        print("  idle, by type (per session):")
        print(by_type(idle_new, n))
        print("  a waiting turn, by type (per session):")
        print(by_type(wait_new, n))

    del idle, waiting, idle_new, wait_new, total, model_share
    times = []
    for _ in range(7):  # what each full collection costs while every turn waits
        t0 = time.process_time()  # CPU time: less sensitive to other work on the machine
        gc.collect()
        times.append(time.process_time() - t0)
    print(
        f"  a full collection while the {n} turns wait: {statistics.median(times) * 1e3:.2f} ms "
        f"CPU (median of 7; min {min(times) * 1e3:.2f} ms; the whole process's heap)"
    )
    gate.set()
    turns = await asyncio.gather(*tasks)
    assert all(t.text() == "42" for t in turns), "a turn did not end with the tool's answer"
    print(f"  all {n} turns finished with the tool's answer")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("n", nargs="?", type=int, default=1000, help="sessions (default 1000)")
    ap.add_argument("--types", action="store_true", help="the new objects by type, per session")
    opts = ap.parse_args()
    asyncio.run(measure(opts.n, opts.types))


if __name__ == "__main__":
    main()
