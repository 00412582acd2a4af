"""Tool-call policy: retries with exponential backoff on transient errors only, the error
policy (retry / report / fail the turn), loop detection (the same call N times gets a nudge,
once more ends the turn), and defaults that behave exactly as without a policy."""

from __future__ import annotations

from typing import Any

import pytest

from foundation_ai.agentic import tool
from foundation_ai.agentic.dag import run_calls
from foundation_ai.agentic.tools import ToolRegistry
from foundation_ai.agentic.toolsets.mcp import MCPToolError
from foundation_ai.agentic.toolsets.policy import (
    LoopTracker,
    PolicyExecutor,
    ToolPolicy,
    call_key,
    is_transient,
)
from foundation_ai.errors import TurnFailedError
from foundation_ai.types import TextContent, ToolCall, ToolResultMessage


class Flaky:
    """Fails ``failures`` times with ``exc``, then answers."""

    def __init__(self, failures: int, exc: BaseException) -> None:
        self.failures, self.exc, self.calls = failures, exc, 0

    def tools(self) -> list[Any]:
        @tool(name="flaky", inline=True)
        def flaky(x: int) -> str:
            """Sometimes fails."""
            self.calls += 1
            if self.calls <= self.failures:
                raise self.exc
            return f"ok {x}"

        return [flaky]


def _call(name: str = "flaky", **args: Any) -> ToolCall:
    return ToolCall(id=f"c{len(args)}{sorted(args.items())}", name=name, arguments=args or {"x": 1})


async def _run(executor: Any, calls: list[ToolCall]) -> list[ToolResultMessage]:
    results: list[ToolResultMessage | None] = [None] * len(calls)
    await run_calls(calls, executor, results)
    return [r for r in results if r is not None]


def test_backoff_is_exponential_and_capped() -> None:
    p = ToolPolicy(max_retries=6, backoff=0.5, multiplier=2.0, backoff_cap=3.0)
    assert [p.delay(i) for i in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_transient_errors_are_timeouts_and_network_errors() -> None:
    import httpx2

    assert is_transient(TimeoutError()) and is_transient(ConnectionResetError())
    assert is_transient(httpx2.ConnectError("refused")) and is_transient(httpx2.ReadTimeout("slow"))
    assert is_transient(MCPToolError("server stopped", transient=True))
    assert not is_transient(ValueError("bad")) and not is_transient(MCPToolError("isError answer"))


async def test_default_policy_behaves_as_without_a_policy() -> None:
    flaky = Flaky(1, ConnectionError("reset"))
    reg = ToolRegistry(flaky.tools())
    plain = await _run(reg, [_call(x=1)])
    flaky.calls = 0
    policed = await _run(PolicyExecutor(reg, ToolPolicy(), LoopTracker()), [_call(x=1)])
    assert plain[0].error_detail == policed[0].error_detail == "tool 'flaky' raised ConnectionError: reset"
    assert flaky.calls == 1


async def test_transient_errors_are_retried_up_to_max_retries() -> None:
    flaky = Flaky(2, ConnectionError("reset"))
    reg = ToolRegistry(flaky.tools())
    policy = ToolPolicy(max_retries=2, backoff=0.001)
    (ok,) = await _run(PolicyExecutor(reg, policy, LoopTracker()), [_call(x=1)])
    assert ok.error_detail is None and ok.content == TextContent("ok 1") and flaky.calls == 3

    flaky = Flaky(5, ConnectionError("reset"))
    reg = ToolRegistry(flaky.tools())
    (failed,) = await _run(
        PolicyExecutor(reg, ToolPolicy(max_retries=1, backoff=0.001), LoopTracker()), [_call(x=1)]
    )
    assert failed.error_detail == "tool 'flaky' raised ConnectionError: reset (after 2 attempts)"
    assert flaky.calls == 2


async def test_other_errors_are_not_retried() -> None:
    flaky = Flaky(1, ValueError("bad input"))
    reg = ToolRegistry(flaky.tools())
    (failed,) = await _run(
        PolicyExecutor(reg, ToolPolicy(max_retries=3, backoff=0.001), LoopTracker()), [_call(x=1)]
    )
    assert failed.error_detail == "tool 'flaky' raised ValueError: bad input" and flaky.calls == 1


async def test_a_timed_out_attempt_is_retried_with_its_own_timeout() -> None:
    import asyncio

    attempts = 0

    @tool(timeout=0.05)
    async def slow_once() -> str:
        """Slow the first time."""
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await asyncio.sleep(30)
        return "fast"

    reg = ToolRegistry([slow_once])
    (ok,) = await _run(
        PolicyExecutor(reg, ToolPolicy(max_retries=1, backoff=0.001), LoopTracker()),
        [ToolCall(id="s", name="slow_once", arguments={})],
    )
    assert ok.content == TextContent("fast") and attempts == 2


async def test_the_error_policy_can_fail_the_turn() -> None:
    flaky = Flaky(1, PermissionError("forbidden"))
    reg = ToolRegistry(flaky.tools())
    tracker = LoopTracker()
    policy = ToolPolicy(on_error=lambda call, exc: "fail" if isinstance(exc, PermissionError) else "report")
    (failed,) = await _run(PolicyExecutor(reg, policy, tracker), [_call(x=1)])
    assert failed.error_detail == "tool 'flaky' raised PermissionError: forbidden"
    assert tracker.must_end and tracker.failed is not None and tracker.failed[0].name == "flaky"


@pytest.mark.parametrize("limit", [3, 2])
async def test_the_same_call_gets_a_nudge_then_ends_the_turn(limit: int) -> None:
    flaky = Flaky(0, ValueError())
    reg = ToolRegistry(flaky.tools())
    tracker = LoopTracker()
    ex = PolicyExecutor(reg, ToolPolicy(loop_limit=limit), tracker)
    results = []
    for _ in range(limit + 1):
        results += await _run(ex, [ToolCall(id="c", name="flaky", arguments={"x": 7})])
    assert [r.error_detail is None for r in results[: limit - 1]] == [True] * (limit - 1)
    nudge = results[limit - 1]
    assert nudge.error_detail is not None and nudge.error_detail.startswith("loop detected")
    assert "Calling it once more ends the turn" in nudge.error_detail
    assert flaky.calls == limit - 1  # the nudged and the last call never ran
    assert tracker.looped is not None and tracker.must_end


def test_call_identity_ignores_argument_order_and_id() -> None:
    a = ToolCall(id="1", name="f", arguments={"a": 1, "b": [1, 2]})
    b = ToolCall(id="2", name="f", arguments={"b": [1, 2], "a": 1})
    c = ToolCall(id="3", name="f", arguments={"a": 2, "b": [1, 2]})
    assert call_key(a) == call_key(b) != call_key(c)


async def test_loop_detection_can_be_disabled() -> None:
    flaky = Flaky(0, ValueError())
    ex = PolicyExecutor(ToolRegistry(flaky.tools()), ToolPolicy(loop_limit=None), LoopTracker())
    for _ in range(6):
        await _run(ex, [ToolCall(id="c", name="flaky", arguments={"x": 7})])
    assert flaky.calls == 6


# -- through a real session -----------------------------------------------------------------------


def _agent(model: Any, tools: list[Any], policy: ToolPolicy | None = None) -> Any:
    from foundation_ai.agentic import AgentSession, InMemorySessionStore

    b = AgentSession.builder(model).with_tools(*tools).with_store(InMemorySessionStore())
    if policy is not None:
        b = b.with_tool_policy(policy)
    return b.build()


def test_a_session_nudges_a_repeated_call_then_ends_the_turn_as_loop_detected() -> None:
    from foundation_ai.agentic import ScriptedModel, TurnOutcome, call, say

    flaky = Flaky(0, ValueError())
    same = call("flaky", {"x": 7})
    model = ScriptedModel([same, same, same, same, say("never")])
    with pytest.raises(TurnFailedError) as caught:  # the default policy: loop_limit=3
        _agent(model, flaky.tools()).run_turn("go")
    turn = caught.value.turn
    assert turn.outcome is TurnOutcome.LoopDetected
    assert turn.error is not None and turn.error.kind == "loop_detected"
    results = turn.tool_results()
    assert [r.error_detail is None for r in results] == [True, True, False, False]
    assert results[2].error_detail.startswith("loop detected")  # type: ignore[union-attr]
    assert flaky.calls == 2
    # the model saw the nudge before repeating itself once more
    assert model.interactions[3].messages[-1] == results[2]


def test_a_session_retries_transient_tool_errors_with_its_policy() -> None:
    from foundation_ai.agentic import ScriptedModel, call, say

    flaky = Flaky(2, TimeoutError("slow network"))
    model = ScriptedModel([call("flaky", {"x": 1}), say("got it")])
    turn = _agent(model, flaky.tools(), ToolPolicy(max_retries=3, backoff=0.001)).run_turn("go")
    assert turn.ok and turn.tool_results()[0].content == TextContent("ok 1") and flaky.calls == 3


def test_a_session_fails_the_turn_when_the_error_policy_says_so() -> None:
    from foundation_ai.agentic import ScriptedModel, TurnOutcome, call, say

    flaky = Flaky(1, PermissionError("forbidden"))
    policy = ToolPolicy(on_error=lambda c, e: "fail" if isinstance(e, PermissionError) else "report")
    model = ScriptedModel([call("flaky", {"x": 1}), say("never")])
    with pytest.raises(TurnFailedError) as caught:
        _agent(model, flaky.tools(), policy).run_turn("go")
    turn = caught.value.turn
    assert turn.outcome is TurnOutcome.Failed
    assert turn.error is not None and turn.error.kind == "tool_failed" and "forbidden" in turn.error.message
    assert turn.tool_results()[0].error_detail is not None  # the call is paired with its result
    assert len(model.interactions) == 1
