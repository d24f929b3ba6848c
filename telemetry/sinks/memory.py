"""In-memory sink: keeps every batch. The test double for every other sink."""

from __future__ import annotations

import pyarrow as pa

from telemetry.pipeline import Batch, ComponentStats, ExportResult, delivered


class MemorySink:
    name = "memory"

    def __init__(self) -> None:
        self.stats = ComponentStats("sink:memory")
        self.batches: list[Batch] = []
        self.closed = False

    def export(self, batch: Batch) -> ExportResult:
        self.batches.append(batch)
        return delivered(self.stats, batch)

    def flush(self, force: bool = False) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def table(self, kind: str) -> pa.Table | None:
        tables = [b.table for b in self.batches if b.kind.name == kind]
        return pa.concat_tables(tables) if tables else None
