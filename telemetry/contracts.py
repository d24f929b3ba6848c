"""The contracts every component is written against: a `Batch` of records of one kind, the
`Source`, `Transform` and `Sink` protocols, and the `ComponentStats` each keeps so railscope
reports on itself. Imports nothing of railscope but the record table, so every module can
depend on it (telemetry/pipeline.py drives components through these; telemetry/problems.py
counts into ComponentStats).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from telemetry.records import KINDS, RecordKind

if TYPE_CHECKING:
    import pyarrow as pa


class Batch:
    """Records of one kind, as an Arrow table conforming to `kind.arrow_schema`.

    A batch built from rows of plain Python values (`from_rows`, what most sources do) keeps them
    as columns and builds its Arrow table the first time `table` is read: by a sink that stores
    or ships Arrow (ClickHouse, memory, JSON lines). The /metrics path reads `pylists` and never
    does, so `railscope node --no-store` does not import pyarrow. Rows that need Arrow to convert
    them (a datetime, a float in an integer field ...) are converted, and refused, at `from_rows`
    as always."""

    __slots__ = ("_cols", "_table", "kind")

    def __init__(
        self,
        kind: RecordKind,
        table: pa.Table | None = None,
        *,
        columns: dict[str, list[Any]] | None = None,
    ) -> None:
        """`table` conforming to `kind`, or `columns`: `kind.plain_columns` output."""
        if (table is None) == (columns is None):
            raise ValueError("Batch: give a table or plain columns, not both")
        self.kind = kind
        self._table = table
        self._cols = columns

    @classmethod
    def of(cls, kind: RecordKind | str, table: pa.Table) -> Batch:
        k = KINDS[kind] if isinstance(kind, str) else kind
        return cls(k, k.conform(table))

    @classmethod
    def from_rows(cls, kind: RecordKind | str, rows: Iterable[dict[str, Any]]) -> Batch:
        k = KINDS[kind] if isinstance(kind, str) else kind
        cols = k.to_columns(rows)
        plain = k.plain_columns(cols)
        if plain is None:
            return cls(k, k.arrow_from_columns(cols))
        return cls(k, columns=plain)

    @property
    def table(self) -> pa.Table:
        t = self._table
        if t is None:
            cols = self._cols
            if cols is None:  # another thread built it since (it sets the table first)
                return self._table
            t = self._table = self.kind.arrow_from_columns(cols)
            self._cols = None  # one copy of the rows
        return t

    @property
    def num_rows(self) -> int:
        cols = self._cols
        if cols is not None:
            return len(next(iter(cols.values()), ()))
        return int(self.table.num_rows)

    def pylists(self, names: Sequence[str]) -> dict[str, list[Any]]:
        """The values of these fields, as Python lists (`table.select(names).to_pydict()`), without
        building the Arrow table of a batch that has none. Not for time fields (an Arrow table
        gives datetimes, plain columns epoch milliseconds)."""
        cols = self._cols
        if cols is not None:
            return {n: cols[n] for n in names}
        return dict(self.table.select(list(names)).to_pydict())

    def fill_empty(self, name: str, value: str) -> Batch:
        """This batch with null or '' in string field `name` replaced by `value` (itself when
        none is)."""
        cols = self._cols
        if cols is not None:
            col = cols[name]
            if not any(v is None or v == "" for v in col):
                return self
            filled = [value if v is None or v == "" else v for v in col]
            return Batch(self.kind, columns={**cols, name: filled})
        import pyarrow as pa
        import pyarrow.compute as pc

        t = self.table
        col = t.column(name)
        empty = pc.or_(pc.is_null(col), pc.equal(col, ""))
        if not pc.any(empty).as_py():
            return self
        filled = pc.if_else(empty, pa.scalar(value), col)
        idx = t.column_names.index(name)
        return Batch(self.kind, t.set_column(idx, t.schema.field(idx), filled))

    def __repr__(self) -> str:
        form = "columns" if self._cols is not None else "table"
        return f"Batch({self.kind.name}, {self.num_rows} rows as {form})"


@dataclass
class ComponentStats:
    """What a component received, sent, dropped and failed, and how long it took."""

    name: str
    unit: str = "records"  # what `received` counts
    received: int = 0
    sent: int = 0
    dropped: int = 0
    failed: int = 0
    last_duration_seconds: float = 0.0
    last_success: bool = True
    last_error: str = ""  # one line: what went wrong last (empty after a success)
    errors: dict[str, int] = field(default_factory=dict)  # reason -> count
    extra: dict[str, float] = field(default_factory=dict)  # component-specific gauges
    # a source made of collectors (node): collector -> (last duration seconds, last success)
    collectors: dict[str, tuple[float, bool]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def error(self, reason: str, n: int = 1) -> None:
        with self.lock:
            self.failed += n
            self.errors[reason] = self.errors.get(reason, 0) + n

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "component": self.name,
                "unit": self.unit,
                "received": self.received,
                "sent": self.sent,
                "dropped": self.dropped,
                "failed": self.failed,
                "last_duration_seconds": self.last_duration_seconds,
                "success": self.last_success,
                "errors": dict(self.errors),
                **self.extra,
            }


def self_report(host: str | None, components: Iterable[ComponentStats]) -> Batch:
    """One component_stat row per component, as of now: how railscope itself is doing."""
    from telemetry.records import COMPONENT_STAT

    now = int(time.time() * 1000)
    rows = []
    for c in components:
        snap = c.snapshot()
        rows.append(
            {
                "ts": now,
                "host": host,
                "component": c.name,
                "received_total": snap["received"],
                "sent_total": snap["sent"],
                "dropped_total": snap["dropped"],
                "failed_total": snap["failed"],
                "last_duration_seconds": snap["last_duration_seconds"],
                "success": 1 if snap["success"] else 0,
                "spool_bytes": snap.get("spool_bytes"),
            }
        )
    return Batch.from_rows(COMPONENT_STAT, rows)


@runtime_checkable
class Source(Protocol):
    name: str
    stats: ComponentStats

    def collect(self) -> Sequence[Batch]: ...


@runtime_checkable
class Transform(Protocol):
    name: str

    def process(self, batch: Batch) -> Batch: ...


@dataclass
class ExportResult:
    ok: bool
    rows: int = 0
    message: str = ""


class InMemorySink:
    """Base of the sinks that take each batch whole into memory on export (kept as is, or folded
    into latest values); `keep` is what they do with it. Flushing does nothing unless a sink
    hands its memory on (otlp)."""

    stats: ComponentStats

    def keep(self, batch: Batch) -> None:
        raise NotImplementedError

    def export(self, batch: Batch) -> ExportResult:
        self.keep(batch)
        self.stats.received += batch.num_rows
        self.stats.sent += batch.num_rows
        return ExportResult(True, batch.num_rows)

    def flush(self, force: bool = False) -> None:
        pass


@runtime_checkable
class Sink(Protocol):
    name: str
    stats: ComponentStats

    def export(self, batch: Batch) -> ExportResult: ...

    def flush(self, force: bool = False) -> None:
        """Send what is due (everything with `force`)."""

    def close(self) -> None:
        """Flush everything and release resources."""


__all__ = [
    "Batch",
    "ComponentStats",
    "ExportResult",
    "InMemorySink",
    "Sink",
    "Source",
    "Transform",
    "self_report",
]
