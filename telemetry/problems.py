"""The one way a source reports what went wrong: `problems.add(reason, subject, detail)`.

`reason` is one of the source's declared reasons (a bounded set: it becomes the `reason` label of
`railscope_component_failed_total`); `subject` (a file, key, endpoint, device) and `detail` (the
exception text) go only to the log, one line per (source, reason) per `log_every` seconds with a
count of what was left out. It never puts a path, address or message into a label.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from telemetry.contracts import ComponentStats

log = logging.getLogger("railscope.problems")

OTHER = "other"  # an undeclared reason is counted here (and named in the log line)
# an exception the component did not expect: counted under this one reason, never under its
# class name (a label value per exception class is not a bounded set); the class and text go
# to the log line
EXCEPTION = "exception"
LOG_EVERY_SECONDS = 60.0


class Problems:
    """Counts problems by declared reason into `stats` and logs them, rate-limited."""

    def __init__(
        self,
        stats: ComponentStats,
        source: str,
        reasons: Iterable[str],
        *,
        log_every: float = LOG_EVERY_SECONDS,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stats = stats
        self.source = source
        self.reasons = frozenset(reasons) | {OTHER, EXCEPTION}
        self.log_every = log_every
        self.log = logger or log
        self.clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def add(
        self, reason: str, subject: str = "", detail: str = "", n: int = 1, *, log: bool = True
    ) -> None:
        """Count `n` problems of `reason`; log subject and detail at most once per interval
        (`log=False`: the caller logged it already, e.g. a switch's down/up transition)."""
        undeclared = reason not in self.reasons
        label = OTHER if undeclared else reason
        self.stats.error(label, n)
        if not log:
            return
        now = self.clock()
        with self._lock:
            last = self._last.get(label)
            if last is not None and now - last < self.log_every:
                self._suppressed[label] = self._suppressed.get(label, 0) + n
                return
            self._last[label] = now
            more = self._suppressed.pop(label, 0)
        text = ": ".join(p for p in (subject, detail) if p)
        if undeclared:
            text = f"({reason}) {text}"
        if n > 1:
            text += f" ({n} at once)"
        if more:
            text += f" (+{more} more since the last line)"
        self.log.warning("%s: %s: %s", self.source, label, text)

    def exception(self, e: BaseException, subject: str = "", *, log: bool = True) -> None:
        """Count an unexpected exception under `exception`; its class and first line go to the
        log line (`log=False`: the caller logged it already)."""
        self.add(EXCEPTION, subject, describe(e), log=log)

    def about(self, who: str) -> About:
        """The same problems with `who` (a switch, an endpoint) put before every subject."""
        return About(self, who)

    def scoped(self, prefix: str) -> Scope:
        """A `(reason, message)` callback adding `PREFIX:reason` (one part of a source)."""
        return Scope(self, prefix)


class About:
    """`Problems.about(who)`: adds to the source's problems with `who` before the subject."""

    def __init__(self, problems: Problems, who: str) -> None:
        self.problems, self.who = problems, who

    def add(
        self, reason: str, subject: str = "", detail: str = "", n: int = 1, *, log: bool = True
    ) -> None:
        self.problems.add(reason, f"{self.who} {subject}".strip(), detail, n, log=log)


class Scope:
    """The problems of one part of a source (a node collector): `scope(reason, message)`.
    `count` says whether that part had any problem since the scope was made."""

    def __init__(self, problems: Problems, prefix: str) -> None:
        self.problems, self.prefix = problems, prefix
        self.count = 0

    def __call__(self, reason: str, message: str) -> None:
        self.count += 1
        self.problems.add(f"{self.prefix}:{reason}", message)


def describe(e: BaseException) -> str:
    """An exception in one line: its class and the first line of its text (300 characters)."""
    first = (str(e).strip().splitlines() or [""])[0][:300]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


__all__ = ["EXCEPTION", "OTHER", "About", "Problems", "Scope", "describe"]
