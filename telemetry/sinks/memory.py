"""In-memory sink: keeps every batch. The test double for every other sink."""

from __future__ import annotations

import pyarrow as pa

from telemetry.contracts import Batch, ComponentStats, InMemorySink


class MemorySink(InMemorySink):
    name = "memory"

    def __init__(self) -> None:
        self.stats = ComponentStats("sink:memory")
        self.batches: list[Batch] = []
        self.closed = False

    def keep(self, batch: Batch) -> None:
        self.batches.append(batch)

    def close(self) -> None:
        self.closed = True

    def table(self, kind: str) -> pa.Table | None:
        tables = [b.table for b in self.batches if b.kind.name == kind]
        return pa.concat_tables(tables) if tables else None
