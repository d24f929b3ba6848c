"""Progress of long work (simulate, ingest, correlate) for the person or the log watching it.

On a terminal: a transient rich progress bar. Anywhere else (CI logs, `| tee`, a pod's log): one
plain line at most every `every` seconds and a last one when the work ends, so a long step is
never silent. It never changes what the work does; it only reports `update(done, total, note)`.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any


class Progress:
    def __init__(
        self,
        console: Any,
        label: str,
        unit: str,
        *,
        every: float = 3.0,
        terminal: bool | None = None,
    ) -> None:
        self.con = console
        self.label, self.unit, self.every = label, unit, every
        self.terminal = console.is_terminal if terminal is None else terminal
        self._bar: Any = None
        self._task: Any = None
        self._t0 = time.monotonic()
        self._last = self._t0
        self._state: tuple[int, int, str] | None = None

    def __enter__(self) -> Progress:
        if self.terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as Bar

            self._bar = Bar(
                TextColumn(f"  {self.label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(self.unit),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                console=self.con,
                transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=None, note="")
        return self

    def update(self, done: int, total: int, note: str = "") -> None:
        self._state = (done, total, note)
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total, note=note)
            return
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self._line()

    def _line(self) -> None:
        if self._state is None:
            return
        done, total, note = self._state
        pct = f" ({100 * done / total:.0f} %)" if total else ""
        self.con.print(
            f"  {self.label}: {done:,}/{total:,} {self.unit}{pct}"
            f"{', ' + note if note else ''}, {time.monotonic() - self._t0:.0f} s",
            markup=False,
            highlight=False,
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)
        elif exc_type is None and self._state is not None and self._last != self._t0:
            self._line()  # the end, when lines were printed along the way


__all__ = ["Progress"]
