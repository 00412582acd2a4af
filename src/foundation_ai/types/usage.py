"""Token usage and its cost (docs/concepts.md: Requests, parameters and usage).

Token counts are ``float`` (some providers report fractional "tokens" for
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


_ZERO = 0.0
"""The shared default of every count and amount: a field holding this object is omitted from JSON."""


def _z(value: float) -> float:
    """``value`` as a float, zero as the shared default (msgspec omits defaults by identity for floats)."""
    return _ZERO if value == 0 else float(value)


_STATUS_RANK = {CostStatus.Unknown: 0, CostStatus.Estimated: 1, CostStatus.Actual: 2}


class UsageCosting(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """The cost of some usage, in USD, split like :class:`UsageReport`.

    Adding two costings adds every amount; the status of a sum is the least certain of the two
    (``Unknown`` only when both are unknown, else ``Estimated`` unless both are ``Actual``).
    """

    input: float = _ZERO
    """USD for input (prompt) tokens, cache reads excluded."""
    output: float = _ZERO
    """USD for output tokens, reasoning tokens included."""
    cache_read: float = _ZERO
    """USD for tokens read from the provider's prompt cache."""
    cache_write: float = _ZERO
    """USD for tokens written to the provider's prompt cache."""
    total: float = _ZERO
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
        result = UsageCosting(
            input=_z(self.input + other.input),
            output=_z(self.output + other.output),
            cache_read=_z(self.cache_read + other.cache_read),
            cache_write=_z(self.cache_write + other.cache_write),
            total=_z(self.total + other.total),
            status=status,
        )
        return _NO_COST if result == _NO_COST else result


_NO_COST = UsageCosting()
"""The shared zero costing: a frozen default, omitted from JSON when unchanged."""


class UsageReport(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """Token usage of one generation (docs/concepts.md: Requests, parameters and usage). Units: tokens, cost in USD.

    Streaming backends report **cumulative** usage on each chunk: the last chunk's report is the
    generation's usage. ``a + b`` adds two reports field by field (for totals across generations); an empty report
    is the identity.
    """

    input: float = _ZERO
    """Input (prompt) tokens, not counting cache reads."""
    output: float = _ZERO
    """Output tokens, reasoning tokens included."""
    cache_read: float = _ZERO
    """Input tokens served from the provider's prompt cache."""
    cache_write: float = _ZERO
    """Input tokens written to the provider's prompt cache."""
    total_tokens: float = _ZERO
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
            input=_z(self.input + other.input),
            output=_z(self.output + other.output),
            cache_read=_z(self.cache_read + other.cache_read),
            cache_write=_z(self.cache_write + other.cache_write),
            total_tokens=_z(self.total_tokens + other.total_tokens),
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
        total = input + output + cache_read + cache_write
        if (
            cost is None
            and not cache_read
            and not cache_write
            and type(input) is float
            and type(output) is float
        ):
            # the usual report of a chunk: two float counts (``float(x)`` is ``x``), no cache
            return cls(
                _ZERO if input == 0 else input,
                _ZERO if output == 0 else output,
                _ZERO,
                _ZERO,
                _ZERO if total == 0 else total,
                _NO_COST,
            )
        return cls(  # positional, in field order; ``_z`` inlined (this runs for every chunk)
            _ZERO if input == 0 else float(input),
            _ZERO if output == 0 else float(output),
            _ZERO if cache_read == 0 else float(cache_read),
            _ZERO if cache_write == 0 else float(cache_write),
            _ZERO if total == 0 else float(total),
            _NO_COST if cost is None else cost,
        )


_EMPTY_REPORT = UsageReport()


class TokenSnapshot(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """Cumulative token totals at a point in a session (docs/concepts.md: Stores: ``Summary``).

    Units: tokens; ``cost_usd`` in USD.
    """

    input: float = _ZERO
    output: float = _ZERO
    cache_read: float = _ZERO
    cache_write: float = _ZERO
    total_tokens: float = _ZERO
    cost_usd: float = _ZERO

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
