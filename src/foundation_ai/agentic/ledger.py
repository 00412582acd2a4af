"""The token ledger: input, output, cache and cost totals, and an optional budget.

Usage on streamed chunks is cumulative for a generation (seed 000, section 9), so the ledger
records the **last** usage report of each generation (:meth:`TokenLedger.record`). Cost comes
from the report when the provider priced it, else from the model descriptor's prices (USD per
million tokens, ``CostStatus.Estimated``), else it stays 0 (``Unknown``).
"""

from __future__ import annotations

import msgspec

from ..types import CostStatus, TokenSnapshot, UsageCosting, UsageReport

__all__ = ["TokenBudget", "TokenLedger", "price_usage"]


class TokenBudget(msgspec.Struct, frozen=True, kw_only=True):
    """Limits for a session: ``max_tokens`` (input + output + cache tokens) and/or
    ``max_cost_usd`` (USD). ``None`` means no limit."""

    max_tokens: float | None = None
    max_cost_usd: float | None = None


def price_usage(usage: UsageReport, descriptor: object | None) -> UsageReport:
    """``usage`` with an estimated cost from ``descriptor``'s prices (USD per million tokens)
    when the report carries none; unchanged otherwise."""
    if usage.cost.status is not CostStatus.Unknown or descriptor is None:
        return usage
    ip = getattr(descriptor, "input_price", None)
    op = getattr(descriptor, "output_price", None)
    if ip is None and op is None:
        return usage
    crp = getattr(descriptor, "cache_read_price", None)
    cwp = getattr(descriptor, "cache_write_price", None)
    i = usage.input * (ip or 0.0) / 1e6
    o = usage.output * (op or 0.0) / 1e6
    cr = usage.cache_read * (crp if crp is not None else (ip or 0.0)) / 1e6
    cw = usage.cache_write * (cwp if cwp is not None else (ip or 0.0)) / 1e6
    cost = UsageCosting(
        input=i, output=o, cache_read=cr, cache_write=cw, total=i + o + cr + cw, status=CostStatus.Estimated
    )
    return msgspec.structs.replace(usage, cost=cost)


class TokenLedger:
    """Running totals of a session (tokens; USD), plus per-turn totals.

    Attributes:
        total: every generation of the session, summed.
        turn: the generations of the current turn, summed.
        generations: model calls recorded in the session.
    """

    __slots__ = ("budget", "generations", "total", "turn")

    def __init__(self, budget: TokenBudget | None = None) -> None:
        self.budget = budget
        self.total = UsageReport()
        self.turn = UsageReport()
        self.generations = 0

    def start_turn(self) -> None:
        """Reset the per-turn totals."""
        self.turn = UsageReport()

    def record(self, usage: UsageReport) -> None:
        """Add one generation's final (cumulative) usage."""
        self.total = self.total + usage
        self.turn = self.turn + usage
        self.generations += 1

    @property
    def tokens(self) -> float:
        """Session tokens: input + output + cache read + cache write."""
        t = self.total
        return t.input + t.output + t.cache_read + t.cache_write

    @property
    def cost_usd(self) -> float:
        """Session cost in USD (0 when unknown)."""
        return self.total.cost.total

    def exhausted(self) -> str | None:
        """Why the budget is used up, or ``None`` while there is some left (or no budget)."""
        b = self.budget
        if b is None:
            return None
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return f"token budget exhausted: {self.tokens:.0f} of {b.max_tokens:.0f} tokens used"
        if b.max_cost_usd is not None and self.cost_usd >= b.max_cost_usd:
            return f"cost budget exhausted: ${self.cost_usd:.6f} of ${b.max_cost_usd:.6f} used"
        return None

    def snapshot(self, turn_only: bool = True) -> TokenSnapshot:
        """The turn's (or session's) totals as a ``TokenSnapshot``."""
        return TokenSnapshot.from_usage(self.turn if turn_only else self.total)
