"""Phase ``execute_tools``: the tool gate, then the calls of one response (``depends_on``
stages, see :mod:`foundation_ai.agentic.dag`), each run through the step runner."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from ...types import AgentProgress, SessionRecord, Stream, ToolCall, ToolResultMessage
from ..context import interrupted_results
from ..dag import CallExecutor, run_calls
from ..tools import ToolRegistry, error_result
from .hooks import IN_PROCESS, Allow, Ask, Deny, GateRequest, Phase, StepRunner, ToolGate
from .host import TurnHost
from .persist import persist
from .state import TurnState, fail

__all__ = ["execute_tools"]

_ASK = "the call needs approval, and pausing a turn for approval is not supported yet; the call was not run"


async def execute_tools(host: TurnHost, state: TurnState) -> Phase:
    """Ask the :data:`~foundation_ai.agentic.turn.hooks.ToolGate` about every call (a denied
    call gets an error result with the reason; any ``Ask`` ends the turn with
    ``approval_required``), run the allowed calls through the step runner, persist every result
    in call order. Steering or abort while gating or running stops the calls still running; each
    of them gets an "interrupted" result (emits ``ToolCallCancelled``). Emits
    ``FlushingRecords``, ``ExecutingTools(completed=total)`` and the results (streaming only).
    Next: ``drain_steering``, or ``finish`` after an ``Ask``."""
    steering, calls, results, out = host.steering, state.calls, state.results, state.out
    asked = False
    interrupted = steering.wanted
    if not interrupted:
        steering.wait_here(asyncio.current_task())
        try:
            hooks = host.hooks
            if hooks.gate is None and hooks.steps is IN_PROCESS:
                executor: CallExecutor | None = host.registry
            else:
                executor = await _gated(host, state)
            if executor is None:
                asked = True
                results[:] = [error_result(c, _ASK) for c in calls]
            else:
                await run_calls(calls, executor, results)
        except asyncio.CancelledError as exc:
            if not steering.is_interrupt(exc):
                raise
            interrupted = True
        finally:
            steering.wait_here(None)
    done = [r for r in results if r is not None]
    if interrupted:
        why = "aborted" if steering.aborted else "steered"
        missing = [c for c, r in zip(calls, results, strict=True) if r is None]
        out += [Stream.Pending(AgentProgress.ToolCallCancelled(id=c.id)) for c in missing]
        filled = iter(interrupted_results(missing, why))
        done = [r if r is not None else next(filled) for r in results]
    persist(host, state, done)
    state.results = []
    if state.emit:
        out.append(Stream.Pending(AgentProgress.FlushingRecords(count=len(done))))
        out.append(Stream.Pending(AgentProgress.ExecutingTools(total=len(calls), completed=len(calls))))
        out += [Stream.Next(SessionRecord.Conversation(message=r)) for r in done]
    if asked:
        fail(
            state,
            "approval_required",
            "a tool call needs approval; pausing for approval is not supported yet",
        )
        return Phase.FINISH
    return Phase.DRAIN_STEERING


async def _gated(host: TurnHost, state: TurnState) -> CallExecutor | None:
    """A :class:`_Gated` executor, or ``None`` when the gate asked for an approval."""
    gate = host.hooks.gate
    denied = await _ask_gate(host, state, gate) if gate is not None else {}
    if denied is None:
        return None
    return _Gated(host.registry, denied, host.hooks.steps)


async def _ask_gate(host: TurnHost, state: TurnState, gate: ToolGate) -> dict[int, str] | None:
    """``{id(call): reason}`` for the denied calls, or ``None`` when one needs approval."""
    denied: dict[int, str] = {}
    for call in state.calls:
        decision = gate(GateRequest(host.session_id, call, state.calls, state))
        if inspect.isawaitable(decision):
            decision = await decision
        if isinstance(decision, Deny):
            denied[id(call)] = decision.reason
        elif isinstance(decision, Ask):
            return None
        elif not isinstance(decision, Allow):
            raise TypeError(f"a tool gate must answer Allow(), Deny(reason) or Ask(), got {decision!r:.80}")
    return denied


class _Gated:
    """A ``CallExecutor`` over ``registry``: denied calls get an error result instead of
    running; allowed ones run through ``steps.tool_call``."""

    __slots__ = ("denied", "registry", "steps")

    def __init__(self, registry: ToolRegistry, denied: dict[int, str], steps: StepRunner) -> None:
        self.registry, self.denied, self.steps = registry, denied, steps

    def prepare(self, call: ToolCall) -> Any:
        reason = self.denied.get(id(call))
        if reason is not None:
            return error_result(call, f"the call was denied: {reason}; the tool was not run")
        return self.registry.prepare(call)

    def is_sequential(self, call: ToolCall) -> bool:
        return self.registry.is_sequential(call)

    async def execute(self, call: ToolCall, prepared: Any) -> ToolResultMessage:
        return await self.steps.tool_call(call, lambda: self.registry.execute(call, prepared))
