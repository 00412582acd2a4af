"""The token ledger: input, output, cache and cost totals, and an optional budget.

Usage on streamed chunks is cumulative for a generation (docs/concepts.md: Requests, parameters and usage), so the ledger
records the **last** usage report of each generation (:meth:`TokenLedger.record`). Cost comes
from the report when the provider priced it, else from the model descriptor's prices (USD per
million tokens, ``CostStatus.Estimated``), else it stays 0 (``Unknown``).
"""

from __future__ import annotations

from collections.abc import Callable

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
    if usage.cost.status is not _UNKNOWN or descriptor is None:
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


_UNKNOWN, _ACTUAL = CostStatus.Unknown, CostStatus.Actual  # an Enum attribute costs a lookup


class _Totals(msgspec.Struct, frozen=True, gc=False):
    """Plain float sums of usage reports (faster than adding ``UsageReport``s). Immutable (an
    addition makes new totals) and only numbers: never part of a cycle, so untracked by the
    cycle collector (``gc=False``)."""

    i: float = 0.0
    o: float = 0.0
    cr: float = 0.0
    cw: float = 0.0
    tt: float = 0.0
    ci: float = 0.0
    co: float = 0.0
    ccr: float = 0.0
    ccw: float = 0.0
    c: float = 0.0
    rank: int = -1  # -1: nothing added yet

    def report(self) -> UsageReport:
        status = _STATUS[max(self.rank, 0)]
        # positional, in field order (input, output, cache_read, cache_write, total, status)
        cost = UsageCosting(self.ci, self.co, self.ccr, self.ccw, self.c, status)
        return UsageReport(self.i, self.o, self.cr, self.cw, self.tt, cost)


_EMPTY = UsageReport()
_STATUS = [CostStatus.Unknown, CostStatus.Estimated, CostStatus.Actual]
_ZERO = _Totals()


class TokenLedger:
    """Running totals of a session (tokens; USD), plus per-turn totals.

    Attributes:
        total: every generation of the session, summed (a ``UsageReport``).
        turn: the generations of the current turn, summed.
        generations: model calls recorded in the session.

    Cost status of a sum follows ``UsageCosting.__add__``: ``Unknown`` only when every part is
    unknown, ``Actual`` only when every part is actual, else ``Estimated``.
    """

    __slots__ = ("_total", "_turn", "budget", "generations")

    def __init__(self, budget: TokenBudget | None = None) -> None:
        self.budget = budget
        self._total = self._turn = _ZERO
        self.generations = 0

    @property
    def total(self) -> UsageReport:
        return self._total.report()

    @property
    def turn(self) -> UsageReport:
        return self._turn.report()

    def turn_usage(self) -> Callable[[], UsageReport]:
        """A function returning :attr:`turn` as it is now (the totals are immutable: what a
        finished turn reports, built only if someone reads it)."""
        return self._turn.report

    def start_turn(self) -> None:
        """Reset the per-turn totals."""
        self._turn = _ZERO

    def record(self, usage: UsageReport) -> None:
        """Add one generation's final (cumulative) usage."""
        self.generations += 1
        if usage == _EMPTY:  # the identity of UsageReport.__add__
            return
        k = usage.cost
        status = k.status  # compared by identity: hashing an Enum member runs Python code
        r = 0 if status is _UNKNOWN else 2 if status is _ACTUAL else 1
        i, o, cr, cw, tt = usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens
        ci, co, ccr, ccw, c = k.input, k.output, k.cache_read, k.cache_write, k.total
        # new totals (immutable), positional in field order; the rank of a sum's cost status
        # (0 unknown, 1 estimated, 2 actual) follows ``UsageCosting.__add__``
        t = self._total
        n = t.rank
        self._total = _Totals(
            t.i + i, t.o + o, t.cr + cr, t.cw + cw, t.tt + tt,
            t.ci + ci, t.co + co, t.ccr + ccr, t.ccw + ccw, t.c + c,
            r if n < 0 else n if n == r and r != 1 else 1 if (n or r) else 0,
        )  # fmt: skip
        t = self._turn
        n = t.rank
        self._turn = _Totals(
            t.i + i, t.o + o, t.cr + cr, t.cw + cw, t.tt + tt,
            t.ci + ci, t.co + co, t.ccr + ccr, t.ccw + ccw, t.c + c,
            r if n < 0 else n if n == r and r != 1 else 1 if (n or r) else 0,
        )  # fmt: skip

    @property
    def tokens(self) -> float:
        """Session tokens: input + output + cache read + cache write."""
        t = self._total
        return t.i + t.o + t.cr + t.cw

    @property
    def cost_usd(self) -> float:
        """Session cost in USD (0 when unknown)."""
        return self._total.c

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
        t = self._turn if turn_only else self._total
        return TokenSnapshot(t.i, t.o, t.cr, t.cw, t.tt, t.c)  # positional, in field order
