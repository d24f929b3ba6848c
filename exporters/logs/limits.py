"""A token bucket per pod: how many lines a pod may have read now. Injectable clock."""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """`rate` tokens a second up to `burst`; starts full."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.tokens = float(burst)
        self._at = clock()

    def available(self) -> int:
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self._at) * self.rate)
        self._at = now
        return int(self.tokens)

    def take(self, n: int) -> None:
        self.tokens = max(0.0, self.tokens - n)


__all__ = ["TokenBucket"]
