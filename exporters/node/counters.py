"""Turns raw hardware counter readings into monotonically rising 64-bit totals.

Reads nothing itself: callers feed it (series key, counter name, raw value). It must never hand
out a total that goes backwards, so a rate computed downstream can never be negative.
"""

from __future__ import annotations

from dataclasses import dataclass

WRAP_32 = 1 << 32
# A 32-bit wrap is only believed when the wrapped delta is below this: a real wrap between two
# scrapes moves the counter by less than half its range; a "wrap" that would need more than that
# is a reset (NIC reset, driver reload) that happened to land on a smaller number.
_PLAUSIBLE_WRAP = 1 << 31


@dataclass
class _State:
    last_raw: int
    total: int


class CounterTracker:
    """Per-counter state: extends 32-bit counters across wraps and absorbs resets.

    The first reading of a counter is its total (so a fresh exporter reports what the hardware
    says). After that the total only grows: by the delta, by the wrapped delta when the counter
    is 32-bit and the wrap is plausible, or by the new raw value after a reset (the counter
    restarted from zero). Each reset is counted per series key in `resets`.
    """

    def __init__(self) -> None:
        self._state: dict[tuple[str, str], _State] = {}
        self.resets: dict[str, int] = {}
        self._cycle = 0
        self._reset_in_cycle: dict[str, int] = {}

    def next_cycle(self) -> None:
        """Call once per collection: a NIC reset zeroes all its counters at once, and that is
        one reset, not one per counter."""
        self._cycle += 1

    def update(self, key: str, name: str, raw: int, *, bits: int = 64) -> int:
        st = self._state.get((key, name))
        if st is None:
            self._state[(key, name)] = _State(raw, raw)
            return raw
        if raw >= st.last_raw:
            st.total += raw - st.last_raw
        elif bits == 32 and st.last_raw < WRAP_32 and raw + WRAP_32 - st.last_raw < _PLAUSIBLE_WRAP:
            st.total += raw + WRAP_32 - st.last_raw
        else:
            # Went backwards without a plausible wrap: the device restarted counting from zero.
            st.total += raw
            if self._reset_in_cycle.get(key) != self._cycle:
                self._reset_in_cycle[key] = self._cycle
                self.resets[key] = self.resets.get(key, 0) + 1
        st.last_raw = raw
        return st.total

    def seen(self, key: str, name: str) -> bool:
        """Whether this counter of this series has been read before."""
        return (key, name) in self._state

    def reset_count(self, key: str) -> int:
        return self.resets.get(key, 0)

    def forget(self, keep: set[str]) -> None:
        """Drop state of series no longer present (a removed VF must not pin memory forever)."""
        for k in [k for k in self._state if k[0] not in keep]:
            del self._state[k]


def scaled(raw: float, scale: float) -> float:
    """raw x scale, dividing for sub-unit scales so 94 % reads 0.94, not 0.9400000000000001."""
    if scale == 1:
        return raw
    if scale < 1:
        return raw / round(1 / scale)
    return raw * scale
