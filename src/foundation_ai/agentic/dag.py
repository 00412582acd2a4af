"""The ``depends_on`` executor (docs/concepts.md: Tools; docs/turn-loop.md, ``execute_tools``).

The tool calls of one response are grouped into stages by dependency depth (a call with no
dependency is depth 0; otherwise one more than its deepest dependency) and run stage by stage.
Within a stage the calls run concurrently (``asyncio`` tasks; sync tools in worker threads),
except ``Sequential`` ones, which run one at a time after the concurrent group. A call naming an
unknown id, or caught in a cycle (or depending on such a call), gets an error result and never
runs. Results come back in call order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from ..types import ToolCall, ToolResultMessage
from .tools import error_result

__all__ = ["CallExecutor", "plan_stages", "run_calls"]


class CallExecutor(Protocol):
    """What ``run_calls`` needs to run calls (a ``ToolRegistry`` is one): ``prepare`` validates
    a call (an error result, or what ``execute`` takes), ``is_sequential``, ``execute``."""

    def prepare(self, call: ToolCall) -> Any: ...

    def is_sequential(self, call: ToolCall) -> bool: ...

    async def execute(self, call: ToolCall, prepared: Any) -> ToolResultMessage: ...


def plan_stages(calls: Sequence[ToolCall]) -> tuple[list[list[int]], dict[int, str]]:
    """Group call indices into stages by dependency depth.

    Returns ``(stages, errors)``: ``stages[d]`` lists the indices of depth ``d`` in call order;
    ``errors`` maps unschedulable indices to the reason (unknown dependency, cycle, or a
    dependency that is itself unschedulable).
    """
    for c in calls:
        if c.depends_on:
            break
    else:  # no dependencies: one stage
        return ([list(range(len(calls)))] if calls else []), {}
    by_id: dict[str, int] = {}
    for i, c in enumerate(calls):
        by_id.setdefault(c.id, i)
    errors: dict[int, str] = {}
    depth: dict[int, int] = {}
    state: dict[int, int] = {}  # 1 visiting, 2 done

    def visit(i: int, path: list[int]) -> int | None:
        if i in depth:
            return depth[i]
        if i in errors:
            return None
        if state.get(i) == 1:
            cycle = [*path[path.index(i) :], i]
            text = " -> ".join(calls[j].id for j in cycle)
            for j in cycle:
                errors.setdefault(j, f"dependency cycle: {text}; the call was not run")
            return None
        state[i] = 1
        d = 0
        for dep in calls[i].depends_on:
            found = by_id.get(dep)
            if found is None:
                errors[i] = (
                    f"unknown dependency {dep!r} (no call with that id in this response); the call was not run"
                )
                break
            j = found
            if j == i:
                errors[i] = f"dependency cycle: {calls[i].id} -> {calls[i].id}; the call was not run"
                break
            dj = visit(j, [*path, i])
            if dj is None:
                errors.setdefault(i, f"depends on {dep!r}, which cannot run; the call was not run")
                break
            d = max(d, dj + 1)
        state[i] = 2
        if i in errors:
            return None
        depth[i] = d
        return d

    for i in range(len(calls)):
        visit(i, [])
    stages: list[list[int]] = []
    for i in range(len(calls)):
        if i in depth:
            while len(stages) <= depth[i]:
                stages.append([])
            stages[depth[i]].append(i)
    return [s for s in stages if s], errors


async def run_calls(
    calls: Sequence[ToolCall],
    registry: CallExecutor,
    results: list[ToolResultMessage | None],
    on_result: Callable[[int, ToolResultMessage], Awaitable[None] | None] | None = None,
) -> list[ToolResultMessage | None]:
    """Run ``calls`` stage by stage, filling ``results`` (same length, call order) as they finish.

    ``results`` is filled in place so that a caller interrupted mid-way (steering, abort) knows
    which calls finished; ``on_result(index, result)`` is called as each one is stored.
    Validation happens first for every call, so invalid calls never run.
    """
    if len(calls) == 1 and not calls[0].depends_on:  # one stage of one call
        c = calls[0]
        prepared = registry.prepare(c)
        r = prepared if isinstance(prepared, ToolResultMessage) else await registry.execute(c, prepared)
        results[0] = r
        if on_result is not None:
            on_result(0, r)
        return results
    stages, errors = plan_stages(calls)

    def store(i: int, r: ToolResultMessage) -> None:
        results[i] = r
        if on_result is not None:
            on_result(i, r)

    for i, why in errors.items():
        store(i, error_result(calls[i], why))
    for stage in stages:
        ready = []
        for i in stage:
            prepared = registry.prepare(calls[i])
            if isinstance(prepared, ToolResultMessage):
                store(i, prepared)
            else:
                ready.append((i, prepared))
        concurrent: list[tuple[int, Any]] = []
        sequential: list[tuple[int, Any]] = []
        for i, p in ready:
            (sequential if registry.is_sequential(calls[i]) else concurrent).append((i, p))
        if len(concurrent) == 1:
            i, p = concurrent[0]
            store(i, await registry.execute(calls[i], p))
        elif concurrent:

            async def one(i: int, p: object) -> None:
                store(i, await registry.execute(calls[i], p))

            tasks = [asyncio.ensure_future(one(i, p)) for i, p in concurrent]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
        for i, p in sequential:
            store(i, await registry.execute(calls[i], p))
    return results
