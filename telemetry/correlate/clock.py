"""The engine's one notion of "now": an injectable clock. `SystemClock` is the wall clock;
`ManualClock` is moved by its owner (the simulator's live driver, tests), so the engine runs
unchanged at any pace and a test measures latency without sleeping on the wall clock.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol

from telemetry.times import as_utc


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time (UTC, aware)."""
        ...

    def wait_until(self, t: datetime, stop: threading.Event) -> bool:
        """Block until `now() >= t` or `stop` is set; False when stopped."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def wait_until(self, t: datetime, stop: threading.Event) -> bool:
        while not stop.is_set():
            left = (t - self.now()).total_seconds()
            if left <= 0:
                return True
            stop.wait(min(left, 1.0))
        return False


class ManualClock:
    """A clock that moves only when told to (`set`, `advance`). Waiters wake when it passes
    their time; `wait_idle` lets the driver wait until the waiter is blocked again (lockstep)."""

    def __init__(self, start: datetime) -> None:
        self._now = as_utc(start)
        self._cond = threading.Condition()
        self._targets: list[datetime] = []  # times waiters are blocked on

    def now(self) -> datetime:
        with self._cond:
            return self._now

    def set(self, t: datetime) -> None:
        with self._cond:
            if t < self._now:
                raise ValueError(f"clock cannot go back from {self._now} to {t}")
            self._now = t
            self._cond.notify_all()

    def advance(self, seconds: float) -> None:
        self.set(self.now() + timedelta(seconds=seconds))

    def wait_until(self, t: datetime, stop: threading.Event) -> bool:
        with self._cond:
            self._targets.append(t)
            self._cond.notify_all()
            try:
                while self._now < t:
                    if stop.is_set():
                        return False
                    self._cond.wait(0.05)  # a stop event cannot notify this condition
                return not stop.is_set()
            finally:
                self._targets.remove(t)
                self._cond.notify_all()

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until someone waits on a time still ahead of the clock (it has caught up)."""
        with self._cond:
            return self._cond.wait_for(lambda: any(t > self._now for t in self._targets), timeout)
