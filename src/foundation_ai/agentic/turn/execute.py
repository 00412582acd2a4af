"""Phase ``execute_tools``: approvals and the tool gate, then the calls of one response
(``depends_on`` stages, see :mod:`foundation_ai.agentic.dag`) under the tool policy, each run
through the step runner (``docs/tools.md``)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from ...types import AgentProgress, SessionRecord, Stream, ToolCall, ToolResultMessage
from ..context import interrupted_results
from ..dag import CallExecutor, run_calls
from ..events import TurnOutcome
from ..tools import ToolRegistry, error_result
from ..toolsets.policy import DEFAULT_POLICY, LoopTracker, PolicyExecutor
from .hooks import IN_PROCESS, Allow, Ask, Deny, GateDecision, GateRequest, Phase
from .host import TurnHost
from .persist import persist
from .state import NO_DECISIONS, TurnState, fail

__all__ = ["decide_calls", "execute_tools", "requires_approval"]


async def execute_tools(host: TurnHost, state: TurnState) -> Phase:
    """Decide about every call (:func:`decide_calls`: a human decision from ``approve``/``deny``,
    else the :data:`~foundation_ai.agentic.turn.hooks.ToolGate`, else ``Ask`` for a tool marked
    ``requires_approval``). Any ``Ask`` pauses the turn before a call runs: outcome
    ``AwaitingApproval``, the calls in ``state.awaiting`` -> ``finish`` (which stores their ids in
    the ``Summary``). Otherwise denied calls get an error result with the reason and the others
    run (``depends_on`` stages) under the session's
    :class:`~foundation_ai.agentic.toolsets.policy.ToolPolicy` (retries, error policy, loop
    detection) through the step runner; every result is persisted in call order. Steering or
    abort while deciding or running stops the calls still running; each of them gets an
    "interrupted" result (emits ``ToolCallCancelled``). Emits ``FlushingRecords``,
    ``ExecutingTools(completed=total)`` and the results (streaming only).
    Next: ``drain_steering``; ``finish`` after an ``Ask``, a detected loop or an error the policy
    says fails the turn."""
    steering, calls, results, out = host.steering, state.calls, state.results, state.out
    interrupted = steering.wanted
    if state.tracker is None:
        state.tracker = LoopTracker()
    tracker: LoopTracker = state.tracker
    if not interrupted:
        steering.waiting = asyncio.current_task()  # the task a steer or an abort interrupts
        try:
            executor: CallExecutor | None = _ungated(host, state, tracker)
            if executor is None:  # a gate, a human decision or a tool that asks: decide first
                executor = await _executor(host, state, tracker)
                if executor is None:
                    state.outcome = TurnOutcome.AwaitingApproval
                    state.results = []
                    return Phase.FINISH
            if len(calls) == 1 and not calls[0].depends_on:  # one stage of one call (run_calls' own path)
                c = calls[0]
                prepared = executor.prepare(c)
                results[0] = (
                    prepared
                    if type(prepared) is not tuple and isinstance(prepared, ToolResultMessage)
                    else await executor.execute(c, prepared)
                )
            else:
                await run_calls(calls, executor, results)
        except asyncio.CancelledError as exc:
            if not steering.is_interrupt(exc):
                raise
            interrupted = True
        finally:
            steering.waiting = None
    state.decisions = NO_DECISIONS
    done = []
    for r in results:  # a loop: no comprehension frame for the usual one or two results
        if r is not None:
            done.append(r)
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
    if tracker.looped is not None and not interrupted:
        c = tracker.looped
        fail(
            state,
            "loop_detected",
            f"the model repeated the call {c.name} past the loop detection's nudge",
            tool=c.name,
        )
        return Phase.FINISH
    if tracker.failed is not None and not interrupted:
        c, detail = tracker.failed
        fail(state, "tool_failed", detail, tool=c.name)
        return Phase.FINISH
    return Phase.DRAIN_STEERING


def requires_approval(registry: ToolRegistry, call: ToolCall) -> bool:
    """True when the tool behind ``call`` is marked ``requires_approval`` (an attribute of the
    tool object, e.g. ``toolsets.shell_tools``) and the call would run: a call that fails
    validation (unknown or inactive tool, bad arguments) gets its error result without asking."""
    t = registry.get(call.name)
    if t is None or not getattr(t, "requires_approval", False):
        return False
    return not isinstance(registry.prepare(call), ToolResultMessage)


async def decide_calls(host: TurnHost, state: TurnState) -> list[GateDecision]:
    """One decision per call of ``state.calls``, in order: the human decision recorded for it
    (``state.decisions``), else the session's gate's answer, else ``Ask`` when its tool is
    marked ``requires_approval``, else ``Allow``.

    Raises:
        TypeError: the gate answered something other than ``Allow``, ``Deny`` or ``Ask``.
    """
    gate = host.hooks.gate
    decisions: list[GateDecision] = []
    for call in state.calls:
        decision: Any = state.decisions.get(call.id)
        if decision is None:
            if gate is not None:
                decision = gate(GateRequest(host.session_id, call, state.calls, state))
                if inspect.isawaitable(decision):
                    decision = await decision
            elif requires_approval(host.registry, call):
                decision = Ask(f"run {call.name}?")
            else:
                decision = _ALLOW
        if not isinstance(decision, Allow | Deny | Ask):
            raise TypeError(f"a tool gate must answer Allow(), Deny(reason) or Ask(), got {decision!r:.80}")
        decisions.append(decision)
    return decisions


_ALLOW = Allow()


def _ungated(host: TurnHost, state: TurnState, tracker: LoopTracker) -> PolicyExecutor | None:
    """The policy executor when no call needs a decision (no gate, no human decision, no tool
    marked ``requires_approval``), else ``None`` (:func:`_executor` decides)."""
    hooks = host.hooks
    if hooks.gate is not None or state.decisions:
        return None
    registry = host.registry
    for c in state.calls:
        t = registry.get(c.name)  # requires_approval, its usual answer inlined
        if t is not None and getattr(t, "requires_approval", False) and requires_approval(registry, c):
            return None
    policy = hooks.policy if hooks.policy is not None else DEFAULT_POLICY
    return PolicyExecutor(
        registry, policy, tracker, None if hooks.steps is IN_PROCESS else hooks.steps.tool_call
    )


async def _executor(host: TurnHost, state: TurnState, tracker: LoopTracker) -> CallExecutor | None:
    """The executor of this stage, or ``None`` (and ``state.awaiting`` set) when a call needs
    approval."""
    hooks = host.hooks
    policy = hooks.policy if hooks.policy is not None else DEFAULT_POLICY
    run = None if hooks.steps is IN_PROCESS else hooks.steps.tool_call
    needs_gate = hooks.gate is not None or bool(state.decisions)
    if not needs_gate:
        registry = host.registry
        for c in state.calls:
            if requires_approval(registry, c):
                needs_gate = True
                break
    denied: dict[int, str] = {}
    if needs_gate:
        decisions = await decide_calls(host, state)
        asked = [c for c, d in zip(state.calls, decisions, strict=True) if isinstance(d, Ask)]
        if asked:
            state.awaiting = asked
            host.awaiting = list(asked)
            host.paused_calls = list(state.calls)
            return None
        denied = {id(c): d.reason for c, d in zip(state.calls, decisions, strict=True) if isinstance(d, Deny)}
    inner = PolicyExecutor(host.registry, policy, tracker, run)
    if not denied:
        return inner
    return _Gated(inner, denied)


class _Gated:
    """A ``CallExecutor``: denied calls get an error result instead of running; the others go
    to ``inner`` (the policy executor)."""

    __slots__ = ("denied", "inner")

    def __init__(self, inner: PolicyExecutor, denied: dict[int, str]) -> None:
        self.inner, self.denied = inner, denied

    def prepare(self, call: ToolCall) -> Any:
        reason = self.denied.get(id(call))
        if reason is not None:
            return error_result(call, f"the call was denied: {reason}; the tool was not run")
        return self.inner.prepare(call)

    def is_sequential(self, call: ToolCall) -> bool:
        return self.inner.is_sequential(call)

    async def execute(self, call: ToolCall, prepared: Any) -> ToolResultMessage:
        return await self.inner.execute(call, prepared)
