"""In-memory sink: keeps every batch. The test double for every other sink."""

from __future__ import annotations

import pyarrow as pa

from telemetry.pipeline import Batch, ComponentStats, ExportResult


class MemorySink:
    name = "memory"

    def __init__(self) -> None:
        self.stats = ComponentStats("sink:memory")
        self.batches: list[Batch] = []
        self.closed = False

    def export(self, batch: Batch) -> ExportResult:
        self.batches.append(batch)
        self.stats.received += batch.num_rows
        self.stats.sent += batch.num_rows
        return ExportResult(True, batch.num_rows)

    def flush(self, force: bool = False) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def table(self, kind: str) -> pa.Table | None:
        tables = [b.table for b in self.batches if b.kind.name == kind]
        return pa.concat_tables(tables) if tables else None
