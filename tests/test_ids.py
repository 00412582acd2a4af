"""SCRU128 ids (https://github.com/scru128/spec): 25 lowercase base-36 characters, time-ordered;
our base-36 formatting matches the reference library's exactly."""

from __future__ import annotations

import scru128
from hypothesis import given
from hypothesis import strategies as st

from foundation_ai.ids import base36_25, is_scru128, new_scru128


@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_base36_matches_the_reference_string(value: int) -> None:
    assert base36_25(value) == str(scru128.Scru128Id(value))


def test_base36_at_the_digit_boundaries() -> None:
    for value in (0, 1, 35, 36, 36**3 - 1, 36**3, 36**12 - 1, 36**12, 36**24, 2**64, 2**128 - 1):
        text = base36_25(value)
        assert len(text) == 25 and int(text, 36) == value


def test_new_ids_are_canonical_unique_and_ordered() -> None:
    ids = [new_scru128() for _ in range(5000)]
    assert all(is_scru128(i) for i in ids)
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    assert all(str(scru128.Scru128Id.from_str(i)) == i for i in ids)
