"""The simulator as a pipeline source (fast path): each `collect()` returns the record batches of
the next chunk of simulated time, so simulated data takes the same road as real exporters'
(transforms -> ClickHouse sink with its spool). It never writes to the store itself.
"""

from __future__ import annotations

from collections.abc import Iterator

from telemetry.contracts import Batch
from telemetry.pipeline import BaseSource
from telemetry.sim.engine import Simulation


class SimSource(BaseSource):
    name = "sim"

    def __init__(self, sim: Simulation) -> None:
        super().__init__()
        self.sim = sim
        self._it: Iterator[list[Batch]] = sim.batches()
        self.chunks_done = 0
        self.done = False
        self.rows_by_kind: dict[str, int] = {}

    @property
    def chunks(self) -> int:
        return self.sim.n_chunks

    def _collect(self) -> list[Batch]:
        if self.done:
            return []  # quiet: the run is over
        try:
            batches = next(self._it)
        except StopIteration:
            self.done = True
            return []
        self.chunks_done += 1
        if self.chunks_done >= self.chunks:
            self.done = True
        for b in batches:
            self.rows_by_kind[b.kind.name] = self.rows_by_kind.get(b.kind.name, 0) + b.num_rows
        return batches


__all__ = ["SimSource"]
