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


def _reference(clock: list[int], word: int) -> list[str]:
    """The SCRU128 spec's generator (https://github.com/scru128/spec) over the millisecond
    readings ``clock`` when every random 32-bit word is ``word``: the reference strings."""
    ts = ts_hi = hi = lo = 0
    out = []
    for now in clock:
        if now > ts:
            ts, lo = now, word >> 8
        elif now + 10_000 >= ts:
            lo += 1
            if lo > 0xFFFFFF:
                lo, hi = 0, hi + 1
                if hi > 0xFFFFFF:
                    hi, ts, lo = 0, ts + 1, word >> 8
        else:
            ts, ts_hi, lo = now, 0, word >> 8
        if ts - ts_hi >= 1000 or ts_hi < 1:
            ts_hi, hi = ts, word >> 8
        out.append(str(scru128.Scru128Id.from_fields(ts, hi, lo, word)))
    return out


def _made(monkeypatch: pytest.MonkeyPatch, clock: list[int], word: int) -> list[str]:
    """The ids of a fresh generator reading ``clock`` (one reading per id) whose random words
    are all ``word``."""
    readings = iter(clock)
    monkeypatch.setattr(time, "time_ns", lambda: next(readings) * 1_000_000)
    monkeypatch.setattr(os, "urandom", lambda n: array("I", [word] * (n // 4)).tobytes())
    make, _ = ids._generator()
    return [make() for _ in clock]


@given(
    st.integers(min_value=1, max_value=2**48 - 1 - 400 * 1000 - 1),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.lists(st.sampled_from([0, 0, 0, 1, 999, 1000]), min_size=1, max_size=400),
)
def test_ids_in_a_row_are_the_reference_strings(ms: int, word: int, steps: list[int]) -> None:
    # many ids per millisecond (counter_lo steps, and past 0xFFFFFF carries into counter_hi and
    # then the next millisecond), new milliseconds, counter_hi renewed after a second
    clock = [ms]
    for step in steps:
        clock.append(clock[-1] + step)
    with pytest.MonkeyPatch.context() as mp:
        assert _made(mp, clock, word) == _reference(clock, word)


@pytest.mark.parametrize("word", [0, 0xFFFFFEFF, 0xFFFFFFFF, 0xFFFFFE00 | 0x7F])
def test_counter_overflow_within_one_millisecond_gives_the_reference_strings(
    monkeypatch: pytest.MonkeyPatch, word: int
) -> None:
    clock = [1_700_000_000_123] * 600
    assert _made(monkeypatch, clock, word) == _reference(clock, word)


@pytest.mark.parametrize("crossing", [1, 2, 3, 7])
def test_an_id_crossing_into_the_next_13_digit_head_mid_millisecond_is_the_reference_string(
    monkeypatch: pytest.MonkeyPatch, crossing: int
) -> None:
    # the millisecond whose low 12 digits (counter_hi = counter_lo = word >> 8) start just below
    # 36**12 so that the id number ``crossing`` (0-based) of that millisecond carries into the head:
    # ``rest`` = ((ms << 24 | hi) << 56) mod 36**12 is a multiple of 2**24, solved for ``ms``
    word = 100 << 8 | 7
    lo = hi = word >> 8
    b12, m3 = 36**12, 3**24
    rest = (b12 - word - ((lo + crossing - 1) << 32)) // 2**24 * 2**24
    ms = ((rest // 2**24 - (hi << 32)) * pow(2**56, -1, m3)) % m3
    assert ((ms << 24 | hi) << 56) % b12 == rest and ms > 0
    clock = [ms] * (crossing + 3)
    made = _made(monkeypatch, clock, word)
    assert made == _reference(clock, word)
    heads = [int(i, 36) // b12 for i in made]
    assert heads[crossing] == heads[crossing - 1] + 1 and len(set(heads)) == 2
