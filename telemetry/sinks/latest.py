"""Latest value per series, shared by the Prometheus and OTLP sinks.

A series is (kind, label values); the value fields of a record kind are its metrics. Null values
are never exported: an unsupported field is absent, not a sentinel.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

from telemetry.pipeline import Batch
from telemetry.records import Field, RecordKind


@dataclass(frozen=True)
class Series:
    kind: RecordKind
    field: Field
    labels: dict[str, str]
    value: float

    @property
    def metric(self) -> str:
        return f"railscope_{self.kind.subsystem}_{self.field.name}"


class LatestValues:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, tuple[RecordKind, dict[tuple[str, ...], dict[str, float]]]] = {}

    def update(self, batch: Batch) -> None:
        kind = batch.kind
        values = kind.values()
        if not values:
            return
        labels = kind.labels()
        cols = batch.table.select([f.name for f in (*labels, *values)]).to_pydict()
        n = batch.num_rows
        with self._lock:
            _, series = self._data.setdefault(kind.name, (kind, {}))
            for i in range(n):
                key = tuple("" if cols[f.name][i] is None else str(cols[f.name][i]) for f in labels)
                row = series.setdefault(key, {})
                for f in values:
                    v = cols[f.name][i]
                    if v is None:
                        row.pop(f.name, None)  # became unsupported/unknown: stop exporting it
                    else:
                        row[f.name] = float(v)

    def series(self) -> Iterator[Series]:
        with self._lock:
            snapshot = [
                (k, {key: dict(row) for key, row in s.items()}) for k, s in self._data.values()
            ]
        for kind, rows in snapshot:
            names = [f.name for f in kind.labels()]
            for f in kind.values():
                for key, row in rows.items():
                    if f.name in row:
                        yield Series(kind, f, dict(zip(names, key, strict=True)), row[f.name])
