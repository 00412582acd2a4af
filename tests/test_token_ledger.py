"""``TokenLedger``: session and per-turn totals of usage reports, summed one report at a time in
the order recorded (docs/concepts.md: Requests, parameters and usage)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from foundation_ai.agentic.ledger import TokenLedger
from foundation_ai.types import CostStatus, UsageCosting, UsageReport

_RANK = {CostStatus.Unknown: 0, CostStatus.Estimated: 1, CostStatus.Actual: 2}
_BY_RANK = [CostStatus.Unknown, CostStatus.Estimated, CostStatus.Actual]


def _sum(reports: list[UsageReport]) -> tuple[list[float], CostStatus]:
    """Every figure summed left to right from 0.0, and the status of the sum: unknown only when
    every costed part is, actual only when every part is (a report with no cost counts as
    unknown)."""
    sums = [0.0] * 10
    ranks = set()
    for u in reports:
        if u == UsageReport():
            continue
        k = u.cost
        figures = [u.input, u.output, u.cache_read, u.cache_write, u.total_tokens]
        figures += [k.input, k.output, k.cache_read, k.cache_write, k.total]
        sums = [s + f for s, f in zip(sums, figures, strict=True)]
        ranks.add(_RANK[k.status])
    status = 0 if ranks <= {0} else 2 if ranks == {2} else 1
    return sums, _BY_RANK[status]


def _figures(u: UsageReport) -> tuple[list[float], CostStatus]:
    k = u.cost
    return [
        u.input,
        u.output,
        u.cache_read,
        u.cache_write,
        u.total_tokens,
        k.input,
        k.output,
        k.cache_read,
        k.cache_write,
        k.total,
    ], k.status


_AMOUNT = st.sampled_from([0.0, 0.1, 0.2, 0.3, 1e-9, 3.0, 1e16, 12345.678])
_COST = st.just(UsageCosting()) | st.builds(
    UsageCosting,
    input=_AMOUNT,
    output=_AMOUNT,
    cache_read=_AMOUNT,
    cache_write=_AMOUNT,
    total=_AMOUNT,
    status=st.sampled_from(list(CostStatus)),
)
_USAGE = st.just(UsageReport()) | st.builds(
    UsageReport,
    input=_AMOUNT,
    output=_AMOUNT,
    cache_read=_AMOUNT,
    cache_write=_AMOUNT,
    total_tokens=_AMOUNT,
    cost=_COST,
)


@settings(max_examples=300)
@given(st.lists(st.lists(_USAGE, max_size=5), max_size=60), st.booleans())
def test_totals_are_the_reports_summed_in_order(turns: list[list[UsageReport]], read_each_turn: bool) -> None:
    ledger = TokenLedger()
    everything: list[UsageReport] = []
    for reports in turns:  # up to 300 reports: more than the ledger keeps unsummed
        ledger.start_turn()
        for u in reports:
            ledger.record(u)
        everything += reports
        assert _figures(ledger.turn) == _sum(reports)
        if read_each_turn:
            assert _figures(ledger.total) == _sum(everything)
    assert _figures(ledger.total) == _sum(everything)
    sums, _ = _sum(everything)
    assert ledger.tokens == sums[0] + sums[1] + sums[2] + sums[3] and ledger.cost_usd == sums[9]
    assert ledger.generations == len(everything)
    snap = ledger.snapshot(turn_only=False)
    assert (snap.input, snap.output, snap.cache_read, snap.cache_write) == tuple(sums[:4])
