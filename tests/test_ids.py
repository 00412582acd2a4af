"""SCRU128 ids (https://github.com/scru128/spec): 25 lowercase base-36 characters, time-ordered;
our base-36 formatting matches the reference library's exactly."""

from __future__ import annotations

import os
import threading
import time
from array import array

import pytest
import scru128
from hypothesis import given
from hypothesis import strategies as st

from foundation_ai import ids
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


def test_new_ids_carry_the_current_millisecond_and_the_spec_fields() -> None:
    before = time.time_ns() // 1_000_000
    made = scru128.Scru128Id.from_str(new_scru128())
    after = time.time_ns() // 1_000_000
    assert before <= made.timestamp <= after
    assert 0 <= made.counter_hi < 2**24 and 0 <= made.counter_lo < 2**24 and 0 <= made.entropy < 2**32


def test_ids_made_by_many_threads_at_once_are_unique_and_increase_in_each_thread() -> None:
    per_thread: list[list[str]] = [[] for _ in range(8)]

    def make(out: list[str]) -> None:
        for _ in range(3000):
            out.append(new_scru128())

    threads = [threading.Thread(target=make, args=(out,)) for out in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [i for out in per_thread for i in out]
    assert len(set(everything)) == len(everything)
    assert all(out == sorted(out) for out in per_thread)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_makes_ids_its_parent_never_makes() -> None:
    new_scru128()  # the parent's generator is warm: counters and random words are in memory
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send 2000 ids and leave at once
        try:
            os.write(write, "".join(new_scru128() for _ in range(2000)).encode())
        finally:
            os._exit(0)
    os.close(write)
    parent = {new_scru128() for _ in range(2000)}
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    child = {data[i : i + 25].decode() for i in range(0, len(data), 25)}
    assert len(child) == 2000 and all(is_scru128(i) for i in child)
    assert not child & parent
    # the random bits are the child's own: a copy of the parent's would repeat its entropy
    # (two fresh sets of 2000 random 32-bit words share one word with odds of about 1 in 1000)
    entropy = {scru128.Scru128Id.from_str(i).entropy for i in parent}
    assert len({scru128.Scru128Id.from_str(i).entropy for i in child} & entropy) <= 2


def _one_id(monkeypatch: pytest.MonkeyPatch, ms: int, words: list[int]) -> str:
    """The first id of a fresh generator whose clock reads ``ms`` and whose random words are
    ``words`` (taken from the end: counter_lo, counter_hi, entropy)."""
    monkeypatch.setattr(time, "time_ns", lambda: ms * 1_000_000)
    monkeypatch.setattr(os, "urandom", lambda n: array("I", words * (n // 4 // len(words))).tobytes())
    make, _ = ids._generator()
    return make()


@given(
    st.integers(min_value=1, max_value=2**48 - 1),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.integers(min_value=0, max_value=2**32 - 1),
)
def test_a_new_id_is_the_reference_string_of_its_fields(ms: int, entropy: int, hi: int, lo: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        made = _one_id(mp, ms, [entropy, hi, lo])
    assert made == str(scru128.Scru128Id.from_fields(ms, hi >> 8, lo >> 8, entropy))


def test_an_id_past_its_blocks_13_digit_head_is_still_the_reference_string(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a millisecond whose ids (counter_hi 0) start within 2**56 of a multiple of 36**12: the
    # highest counter_lo and entropy carry into the next 13-digit head
    ms = next(m for m in range(1_700_000_000_000, 1_700_100_000_000) if (m << 80) % 36**12 > 36**12 - 2**55)
    made = _one_id(monkeypatch, ms, [2**32 - 1, 0, 2**32 - 1])
    assert made == str(scru128.Scru128Id.from_fields(ms, 0, 2**24 - 1, 2**32 - 1))
    assert int(made, 36) // 36**12 == (ms << 80) // 36**12 + 1
