from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from exporters.node.counters import WRAP_32, CounterTracker, scaled


def test_first_reading_is_the_total() -> None:
    t = CounterTracker()
    assert t.update("mlx5_0/1", "port_rcv_data", 12345, bits=32) == 12345


def test_32bit_wrap_extends_to_64bit_total() -> None:
    t = CounterTracker()
    t.update("k", "c", WRAP_32 - 100, bits=32)
    assert t.update("k", "c", 50, bits=32) == WRAP_32 + 50  # moved by 150, not backwards
    assert t.update("k", "c", 70, bits=32) == WRAP_32 + 70
    assert t.reset_count("k") == 0


def test_implausible_wrap_is_a_reset() -> None:
    t = CounterTracker()
    t.update("k", "c", 1000, bits=32)  # a wrap from 1000 to 10 would need ~2^32 increments
    t.next_cycle()
    assert t.update("k", "c", 10, bits=32) == 1010
    assert t.reset_count("k") == 1


def test_64bit_counter_going_backwards_is_a_reset() -> None:
    t = CounterTracker()
    t.update("k", "c", 26509113295)  # already above 2^32: cannot be a 32-bit wrap
    t.next_cycle()
    assert t.update("k", "c", 1000, bits=32) == 26509113295 + 1000
    assert t.reset_count("k") == 1


def test_one_reset_per_series_per_cycle() -> None:
    t = CounterTracker()
    for name in ("a", "b", "c"):
        t.update("nic", name, 500)
    t.next_cycle()
    for name in ("a", "b", "c"):
        t.update("nic", name, 1)
    assert t.reset_count("nic") == 1  # one NIC reset zeroes all counters at once
    t.next_cycle()
    t.update("nic", "a", 0)
    assert t.reset_count("nic") == 2


def test_forget_drops_vanished_series() -> None:
    t = CounterTracker()
    t.update("gone", "c", 100)
    t.update("kept", "c", 100)
    t.forget({"kept"})
    assert t.update("gone", "c", 5) == 5  # fresh state: first reading again
    assert t.update("kept", "c", 105) == 105


@given(
    st.lists(st.integers(min_value=0, max_value=WRAP_32 - 1), min_size=1, max_size=40),
    st.sampled_from([32, 64]),
)
def test_total_never_decreases(raws: list[int], bits: int) -> None:
    t = CounterTracker()
    last = -1
    for r in raws:
        t.next_cycle()
        total = t.update("k", "c", r, bits=bits)
        assert total >= last
        last = total


def test_scaled_avoids_float_noise() -> None:
    assert scaled(94, 0.01) == 0.94
    assert scaled(2_500_000_000, 1e-9) == 2.5
    assert scaled(3, 4) == 12
