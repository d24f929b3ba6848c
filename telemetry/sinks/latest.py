"""Latest value per series, shared by the Prometheus and OTLP sinks.

A series is (kind, label values); the value fields of a record kind are its metrics. Null values
are never exported: an unsupported field is absent, not a sentinel.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from telemetry.contracts import Batch
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
    def __init__(
        self, stale_after_seconds: float | None = 300.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Series not updated for `stale_after_seconds` stop being exported (a pod that ended, a
        GPU that is gone): /metrics must not keep yesterday's label sets forever."""
        self._lock = threading.Lock()
        self._data: dict[str, tuple[RecordKind, dict[tuple[str, ...], dict[str, float]]]] = {}
        self._seen: dict[tuple[str, tuple[str, ...]], float] = {}
        self.stale_after = stale_after_seconds
        self.clock = clock

    def update(self, batch: Batch) -> None:
        kind = batch.kind
        values = kind.values()
        if not values:
            return
        labels = kind.labels()
        cols = batch.pylists([f.name for f in (*labels, *values)])
        n = batch.num_rows
        now = self.clock()
        with self._lock:
            _, series = self._data.setdefault(kind.name, (kind, {}))
            for i in range(n):
                key = tuple("" if cols[f.name][i] is None else str(cols[f.name][i]) for f in labels)
                self._seen[(kind.name, key)] = now
                row = series.setdefault(key, {})
                for f in values:
                    v = cols[f.name][i]
                    if v is None:
                        row.pop(f.name, None)  # became unsupported/unknown: stop exporting it
                    else:
                        row[f.name] = float(v)

    def _prune(self) -> None:
        if self.stale_after is None:
            return
        cutoff = self.clock() - self.stale_after
        for (kind, key), t in list(self._seen.items()):
            if t < cutoff:
                del self._seen[(kind, key)]
                self._data[kind][1].pop(key, None)

    def snapshot(self) -> list[tuple[RecordKind, dict[tuple[str, ...], dict[str, float]]]]:
        """(kind, label values -> {field: value}) for every kind, stale series pruned."""
        with self._lock:
            self._prune()
            return [(k, {key: dict(row) for key, row in s.items()}) for k, s in self._data.values()]

    def series(self) -> Iterator[Series]:
        for kind, rows in self.snapshot():
            names = [f.name for f in kind.labels()]
            for f in kind.values():
                for key, row in rows.items():
                    if f.name in row:
                        yield Series(kind, f, dict(zip(names, key, strict=True)), row[f.name])
