"""Rows a batch run keeps back (engine.Correlator.run): the last row of each key, per table,
inserted at a flush. The engine's output tables are ReplacingMergeTree by `updated_at`, so what
FINAL reads after a flush is what inserting every evaluation's rows would have left."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from telemetry.records import RecordKind
from telemetry.store import Store


class Pending:
    """The rows kept back, per table, the last of each ORDER BY key (the key its
    ReplacingMergeTree keeps one row of: `RecordKind.order_by`); `flush` inserts them."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[RecordKind, dict[tuple[Any, ...], dict[str, Any]]]] = {}

    def add(self, record: RecordKind, rows: Iterable[dict[str, Any]]) -> None:
        if record.version_field is None:  # every row counts: none may stand for another
            raise ValueError(f"{record.name}: not a versioned (ReplacingMergeTree) record")
        kept = self._kept.setdefault(record.name, (record, {}))[1]
        kept.update((tuple(r[k] for k in record.order_by), r) for r in rows)

    def flush(self, store: Store) -> int:
        """Insert each table's rows, one statement per table; returns how many. An insert that
        fails raises and its table keeps its rows for the next flush."""
        n = 0
        for record, kept in self._kept.values():
            if kept:
                store.insert(record, record.to_arrow(list(kept.values())))
                n += len(kept)
                kept.clear()
        return n


__all__ = ["Pending"]
