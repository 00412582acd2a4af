"""Approval and access control for tool calls (see ``docs/tools.md``).

    def can_use_tool(call, context):
        if call.name == "shell" and "rm " in str(call.arguments):
            return Deny("no deleting")
        return Ask(f"run {call.name}?") if context.requires_approval else Allow()

    agent = AgentSession.builder(model).with_tools(...).with_can_use_tool(can_use_tool).build()
    turn = agent.run_turn("clean up")
    if turn.outcome is TurnOutcome.AwaitingApproval:
        for c in turn.awaiting:
            agent.approve(c.id)           # or agent.deny(c.id, "not now"); the last one continues

- :class:`ToolContext`: what ``can_use_tool`` receives besides the call.
- :func:`can_use_tool_gate`: a ``can_use_tool`` hook as the turn loop's ``ToolGate``.
- :func:`mark_requires_approval`: mark any tool so it asks before each call.
- :func:`estimated_spend_check`: a ``can_spend`` check estimating a request's cost against the
  remaining budget.

The decisions are the turn loop's ``Allow()``, ``Deny(reason)`` and ``Ask(question)``
(``foundation_ai.agentic.turn``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ...types import ToolCall
from ..tools import ToolRegistry
from ..turn.hooks import Allow, Ask, Deny, GateDecision, GateRequest, SpendRequest, ToolGate

__all__ = [
    "Allow",
    "Ask",
    "CanUseTool",
    "Deny",
    "ToolContext",
    "can_use_tool_gate",
    "estimated_spend_check",
    "mark_requires_approval",
]

BYTES_PER_TOKEN = 4
"""The estimate of :func:`estimated_spend_check`: a token per 4 bytes of JSON request."""


@dataclass(frozen=True)
class ToolContext:
    """What ``can_use_tool(call, context)`` knows besides the call.

    Attributes:
        session_id: the session.
        tool: the tool object the call names (``None``: no such tool; the call will get an
            "unknown tool" error result anyway).
        requires_approval: the tool is marked ``requires_approval`` (an ``Allow`` for it counts
            as the approval).
        calls: every call of the response, in order.
        state: the running turn (read only).
    """

    session_id: str
    tool: Any
    requires_approval: bool
    calls: Sequence[ToolCall]
    state: Any


CanUseTool = Callable[[ToolCall, ToolContext], Any]
"""``can_use_tool(call, context) -> Allow() | Deny(reason) | Ask(question)`` or an awaitable of
one."""


def can_use_tool_gate(can_use_tool: CanUseTool, registry: ToolRegistry) -> ToolGate:
    """The turn loop's ``ToolGate`` calling ``can_use_tool(call, ToolContext(...))``."""

    async def gate(request: GateRequest) -> GateDecision:
        t = registry.get(request.call.name)
        context = ToolContext(
            session_id=request.session_id,
            tool=t,
            requires_approval=bool(t is not None and getattr(t, "requires_approval", False)),
            calls=request.calls,
            state=request.state,
        )
        decision = can_use_tool(request.call, context)
        if inspect.isawaitable(decision):
            decision = await decision
        return decision  # type: ignore[no-any-return]

    return gate


def mark_requires_approval(tool: Any, required: bool = True) -> Any:
    """Mark ``tool`` (a ``FunctionTool``, class tool, ``MCPTool``...) so that, without a
    ``can_use_tool`` hook allowing it, every call pauses the turn for approval. Returns it."""
    tool.requires_approval = required
    return tool


def estimated_spend_check(request: SpendRequest) -> str | None:
    """Refuse a generation whose estimated input (the request's JSON size /
    :data:`BYTES_PER_TOKEN`) does not fit in the budget's remaining tokens, or whose estimated
    input cost (the model descriptor's ``input_price``, USD per million tokens) does not fit in
    the remaining USD. ``None`` (allowed) without a budget."""
    ledger = request.ledger
    budget = getattr(ledger, "budget", None)
    if budget is None:
        return None
    i = request.interaction
    size = len(msgspec.json.encode([i.messages, i.system_prompt, i.soul, i.tools_shed]))
    tokens = size / BYTES_PER_TOKEN
    if budget.max_tokens is not None and ledger.tokens + tokens > budget.max_tokens:
        left = max(budget.max_tokens - ledger.tokens, 0)
        return f"the next request (about {tokens:.0f} input tokens) exceeds the {left:.0f} tokens left in the budget"
    price = getattr(getattr(request.model, "descriptor", None), "input_price", None)
    if budget.max_cost_usd is not None and price is not None:
        cost = tokens * price / 1e6
        if ledger.cost_usd + cost > budget.max_cost_usd:
            left = max(budget.max_cost_usd - ledger.cost_usd, 0.0)
            return f"the next request (about ${cost:.6f} of input) exceeds the ${left:.6f} left in the budget"
    return None


_ = (Allow, Ask, Deny)  # re-exported decisions
