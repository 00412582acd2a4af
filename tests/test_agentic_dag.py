"""The depends_on DAG executor: stages by depth, real concurrency within a stage, Sequential,
unknown dependencies and cycles, results in call order (issue 5, item 2)."""

from __future__ import annotations

import asyncio
import threading

from foundation_ai.agentic import ToolRegistry, tool
from foundation_ai.agentic.dag import plan_stages, run_calls
from foundation_ai.types import ExecutionHint, ToolCall, ToolResultMessage


def tc(
    i: str, deps: tuple[str, ...] = (), hint: ExecutionHint = ExecutionHint.Unspecified, name: str = "rec"
) -> ToolCall:
    return ToolCall(id=i, name=name, arguments={"tag": i}, depends_on=list(deps), execution_hint=hint)


def test_plan_stages_by_depth() -> None:
    calls = [tc("a"), tc("b", ("a",)), tc("c"), tc("d", ("b", "c")), tc("e", ("a",))]
    stages, errors = plan_stages(calls)
    assert errors == {}
    assert stages == [[0, 2], [1, 4], [3]]


def test_plan_unknown_dependency_and_cycles() -> None:
    calls = [
        tc("a"),
        tc("b", ("zzz",)),  # unknown
        tc("c", ("d",)),  # cycle c -> d -> c
        tc("d", ("c",)),
        tc("e", ("b",)),  # depends on an unschedulable call
        tc("f", ("f",)),  # self-cycle
        tc("g", ("a",)),
    ]
    stages, errors = plan_stages(calls)
    assert stages == [[0], [6]]
    assert "unknown dependency 'zzz'" in errors[1]
    assert "dependency cycle" in errors[2] and "dependency cycle" in errors[3]
    assert "depends on 'b'" in errors[4]
    assert "dependency cycle: f -> f" in errors[5]


def _recorder() -> tuple[object, list[str]]:
    log: list[str] = []

    @tool
    async def rec(tag: str) -> str:
        log.append(f"start {tag}")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        log.append(f"end {tag}")
        return tag

    return rec, log


async def test_stage_calls_really_run_concurrently_async() -> None:
    """Timing-free proof: each call waits for the other's start, so they only finish if they overlap."""
    started = {"a": asyncio.Event(), "b": asyncio.Event()}
    log: list[str] = []

    @tool
    async def rendezvous(tag: str) -> str:
        log.append(f"start {tag}")
        started[tag].set()
        other = "b" if tag == "a" else "a"
        await asyncio.wait_for(started[other].wait(), 10)
        log.append(f"end {tag}")
        return tag

    reg = ToolRegistry([rendezvous])
    calls = [tc("a", name="rendezvous"), tc("b", name="rendezvous")]
    results: list[ToolResultMessage | None] = [None, None]
    await run_calls(calls, reg, results)
    assert [r.content.content for r in results if r] == ["a", "b"]  # type: ignore[union-attr]
    assert log[:2] == ["start a", "start b"]  # both started before either ended


async def test_stage_calls_really_run_concurrently_sync_threads() -> None:
    barrier = threading.Barrier(2, timeout=10)

    @tool
    def meet(tag: str) -> str:
        barrier.wait()  # raises BrokenBarrierError unless both threads are here at once
        return tag

    reg = ToolRegistry([meet])
    calls = [tc("x", name="meet"), tc("y", name="meet")]
    results: list[ToolResultMessage | None] = [None, None]
    await run_calls(calls, reg, results)
    assert all(r is not None and not r.is_error for r in results), results


async def test_stages_run_in_order_and_results_in_call_order() -> None:
    rec, log = _recorder()
    reg = ToolRegistry([rec])
    calls = [tc("late", ("early",)), tc("early"), tc("mid", ("early",))]
    results: list[ToolResultMessage | None] = [None] * 3
    await run_calls(calls, reg, results)
    assert [r.tool_call_id for r in results if r] == ["late", "early", "mid"]
    # stage 0 finished before stage 1 started; late and mid overlapped
    assert log.index("end early") < log.index("start late")
    assert log.index("start mid") < log.index("end late")


async def test_sequential_hint_runs_alone() -> None:
    rec, log = _recorder()
    reg = ToolRegistry([rec])
    calls = [
        tc("s1", hint=ExecutionHint.Sequential),
        tc("p1"),
        tc("p2"),
        tc("s2", hint=ExecutionHint.Sequential),
    ]
    results: list[ToolResultMessage | None] = [None] * 4
    await run_calls(calls, reg, results)
    assert [r.tool_call_id for r in results if r] == ["s1", "p1", "p2", "s2"]
    # the parallel pair overlapped; each sequential call ran with nothing else in flight
    assert log.index("start p2") < log.index("end p1")
    for s in ("s1", "s2"):
        i = log.index(f"start {s}")
        assert log[i + 1] == f"end {s}"


async def test_sequential_tool_flag() -> None:
    log: list[str] = []

    @tool(sequential=True)
    async def seq(tag: str) -> str:
        log.append(f"start {tag}")
        await asyncio.sleep(0)
        log.append(f"end {tag}")
        return tag

    reg = ToolRegistry([seq])
    results: list[ToolResultMessage | None] = [None] * 2
    await run_calls([tc("a", name="seq"), tc("b", name="seq")], reg, results)
    assert log == ["start a", "end a", "start b", "end b"]


async def test_unschedulable_calls_get_error_results_in_order() -> None:
    rec, log = _recorder()
    reg = ToolRegistry([rec])
    calls = [tc("ok"), tc("bad", ("ghost",)), tc("c1", ("c2",)), tc("c2", ("c1",))]
    results: list[ToolResultMessage | None] = [None] * 4
    await run_calls(calls, reg, results)
    assert [r.tool_call_id for r in results if r] == ["ok", "bad", "c1", "c2"]
    assert not results[0].is_error  # type: ignore[union-attr]
    assert all(r.is_error for r in results[1:] if r)
    assert "start bad" not in log and "start c1" not in log
