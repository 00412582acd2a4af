"""Seed 000 section 9: ``UsageReport`` / ``UsageCosting`` (tokens; costs in USD)."""

from __future__ import annotations

from foundation_ai.types import CostStatus, TokenSnapshot, UsageCosting, UsageReport, from_json, to_json


def test_defaults_are_zero_and_unknown() -> None:
    u = UsageReport()
    assert (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens) == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert u.cost == UsageCosting()
    assert u.cost.status is CostStatus.Unknown
    assert to_json(u) == b"{}"


def test_of_sums_total_tokens() -> None:
    u = UsageReport.of(input=100, output=20, cache_read=300, cache_write=50)
    assert u.total_tokens == 470


def test_adding_reports_adds_every_field() -> None:
    a = UsageReport.of(
        input=100,
        output=20,
        cache_read=5,
        cache_write=1,
        cost=UsageCosting(0.001, 0.002, 0.0001, 0.0002, 0.0033, CostStatus.Actual),
    )
    b = UsageReport.of(
        input=50,
        output=10,
        cache_read=0,
        cache_write=4,
        cost=UsageCosting(0.0005, 0.001, 0.0, 0.0008, 0.0023, CostStatus.Actual),
    )
    s = a + b
    assert (s.input, s.output, s.cache_read, s.cache_write, s.total_tokens) == (150, 30, 5, 5, 190)
    assert abs(s.cost.total - 0.0056) < 1e-12
    assert abs(s.cost.input - 0.0015) < 1e-12
    assert abs(s.cost.cache_write - 0.001) < 1e-12
    assert s.cost.status is CostStatus.Actual
    assert sum([a, b], UsageReport()) == s


def test_costing_status_of_a_sum_is_the_least_certain() -> None:
    unknown = UsageCosting()
    estimated = UsageCosting(total=1.0, status=CostStatus.Estimated)
    actual = UsageCosting(total=2.0, status=CostStatus.Actual)
    assert (unknown + unknown).status is CostStatus.Unknown
    assert (actual + actual).status is CostStatus.Actual
    assert (actual + estimated).status is CostStatus.Estimated
    assert (actual + unknown).status is CostStatus.Estimated
    assert (estimated + unknown).total == 1.0


def test_adding_other_types_is_not_supported() -> None:
    assert UsageReport().__add__(3) is NotImplemented  # type: ignore[operator]
    assert UsageCosting().__add__("x") is NotImplemented  # type: ignore[operator]


def test_round_trip_and_snapshot() -> None:
    u = UsageReport.of(input=1.5, output=2, cost=UsageCosting(total=0.25, status=CostStatus.Estimated))
    assert from_json(to_json(u), UsageReport) == u
    snap = TokenSnapshot.from_usage(u)
    assert snap == TokenSnapshot(input=1.5, output=2, total_tokens=3.5, cost_usd=0.25)
    assert from_json(to_json(snap), TokenSnapshot) == snap
