"""Token usage and its cost (seed 000, section 9).

Token counts are ``float`` as in the seed (some providers report fractional "tokens" for
images); costs are in USD.
"""

from __future__ import annotations

import enum

import msgspec

__all__ = ["CostStatus", "TokenSnapshot", "UsageCosting", "UsageReport"]


class CostStatus(enum.Enum):
    """How trustworthy a :class:`UsageCosting` is.

    - ``Unknown``: no price is known for the model; the amounts are 0.
    - ``Estimated``: computed from a price table (``genai-prices``) and token counts.
    - ``Actual``: reported by the provider itself.
    """

    Unknown = "unknown"
    Estimated = "estimated"
    Actual = "actual"


_STATUS_RANK = {CostStatus.Unknown: 0, CostStatus.Estimated: 1, CostStatus.Actual: 2}


class UsageCosting(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """The cost of some usage, in USD, split like :class:`UsageReport`.

    Adding two costings adds every amount; the status of a sum is the least certain of the two
    (``Unknown`` only when both are unknown, else ``Estimated`` unless both are ``Actual``).
    """

    input: float = 0.0
    """USD for input (prompt) tokens, cache reads excluded."""
    output: float = 0.0
    """USD for output tokens, reasoning tokens included."""
    cache_read: float = 0.0
    """USD for tokens read from the provider's prompt cache."""
    cache_write: float = 0.0
    """USD for tokens written to the provider's prompt cache."""
    total: float = 0.0
    """USD, the sum of the four amounts above."""
    status: CostStatus = CostStatus.Unknown
    """Where the figures come from."""

    def __add__(self, other: UsageCosting) -> UsageCosting:
        if not isinstance(other, UsageCosting):
            return NotImplemented
        a, b = _STATUS_RANK[self.status], _STATUS_RANK[other.status]
        if a == 0 and b == 0:
            status = CostStatus.Unknown
        elif a == 2 and b == 2:
            status = CostStatus.Actual
        else:
            status = CostStatus.Estimated
        return UsageCosting(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            total=self.total + other.total,
            status=status,
        )


_NO_COST = UsageCosting()
"""The shared zero costing: a frozen default, omitted from JSON when unchanged."""


class UsageReport(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """Token usage of one generation (seed 000, section 9). Units: tokens, cost in USD.

    Streaming backends report **cumulative** usage on each chunk: the last chunk's report is the
    generation's usage. ``a + b`` adds two reports field by field (for totals across generations); an empty report
    is the identity.
    """

    input: float = 0.0
    """Input (prompt) tokens, not counting cache reads."""
    output: float = 0.0
    """Output tokens, reasoning tokens included."""
    cache_read: float = 0.0
    """Input tokens served from the provider's prompt cache."""
    cache_write: float = 0.0
    """Input tokens written to the provider's prompt cache."""
    total_tokens: float = 0.0
    """All tokens: input + output + cache_read + cache_write (as the provider reports it)."""
    cost: UsageCosting = _NO_COST
    """The cost of this usage in USD."""

    def __add__(self, other: UsageReport) -> UsageReport:
        if not isinstance(other, UsageReport):
            return NotImplemented
        # An empty report (no tokens, no cost) is the identity, so ``sum(reports, UsageReport())``
        # keeps an ``Actual`` cost status instead of degrading it to ``Estimated``.
        if other == _EMPTY_REPORT:
            return self
        if self == _EMPTY_REPORT:
            return other
        return UsageReport(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            total_tokens=self.total_tokens + other.total_tokens,
            cost=self.cost + other.cost,
        )

    @classmethod
    def of(
        cls,
        input: float = 0.0,
        output: float = 0.0,
        cache_read: float = 0.0,
        cache_write: float = 0.0,
        cost: UsageCosting | None = None,
    ) -> UsageReport:
        """Build a report whose ``total_tokens`` is the sum of the four counts."""
        return cls(
            input=float(input),
            output=float(output),
            cache_read=float(cache_read),
            cache_write=float(cache_write),
            total_tokens=float(input + output + cache_read + cache_write),
            cost=cost if cost is not None else _NO_COST,
        )


_EMPTY_REPORT = UsageReport()


class TokenSnapshot(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """Cumulative token totals at a point in a session (seed 000, section 11: ``Summary``).

    Units: tokens; ``cost_usd`` in USD.
    """

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total_tokens: float = 0.0
    cost_usd: float = 0.0

    @classmethod
    def from_usage(cls, usage: UsageReport) -> TokenSnapshot:
        """Snapshot the counts and total cost of a :class:`UsageReport`."""
        return cls(
            input=usage.input,
            output=usage.output,
            cache_read=usage.cache_read,
            cache_write=usage.cache_write,
            total_tokens=usage.total_tokens,
            cost_usd=usage.cost.total,
        )
