"""The derived tables railscope keeps, declared once for live code: the per-interval rollups.

Each summarizes one record kind per `ROLLUP_SECONDS` interval (`bucket`). Four are kept on insert
by a materialized view (the view's SELECT lives in its migration); `job_port_intervals` is written
by the engine itself, with `JOB_PORT_SELECT`, since migration 13. Migrations keep their own frozen
copies (telemetry/store/migrations/0012_interval_rollups.sql); tests/integration/core/test_store.py
checks that this declaration and the migrations agree, and live code reads only this one.
"""

from __future__ import annotations

from dataclasses import dataclass

ROLLUP_SECONDS = 10
ROLLUP_INTERVAL = f"INTERVAL {ROLLUP_SECONDS} SECOND"  # as ClickHouse's toStartOfInterval takes it


@dataclass(frozen=True)
class Rollup:
    """`table` summarizes the rows of record kind `kind` (stored in `source`) per interval;
    `samples` counts the rows each interval's null counts are out of."""

    table: str
    kind: str
    source: str
    samples: str
    by_engine: bool = False  # written by the engine (attribution), not by a materialized view


ROLLUPS: tuple[Rollup, ...] = (
    Rollup("switch_port_intervals", "switch_port_sample", "switch_port_samples", "samples"),
    Rollup("switch_queue_intervals", "switch_queue_sample", "switch_queue_samples", "samples"),
    Rollup("nic_intervals", "nic_sample", "nic_samples", "samples"),
    # a GPU's counters are over its up samples only
    Rollup("gpu_intervals", "gpu_sample", "gpu_samples", "up_samples"),
    Rollup("job_port_intervals", "attributed_flow", "attributed_flows", "flows", by_engine=True),
)

# What the engine inserts into job_port_intervals from attributed flows (`{source}`: a subquery)
JOB_PORT_SELECT = f"""
SELECT `cluster`, `src_namespace`, `src_job`, `switch`, `out_port`, toDateTime(toStartOfInterval(`ts`, {ROLLUP_INTERVAL}), 'UTC') AS `bucket`,
       count() AS `flows`, sum(`bytes`) AS `bytes`
FROM {{source}}
GROUP BY `cluster`, `src_namespace`, `src_job`, `switch`, `out_port`, `bucket`
"""

BY_KIND: dict[str, Rollup] = {r.kind: r for r in ROLLUPS}
TABLES: frozenset[str] = frozenset(r.table for r in ROLLUPS)


def rollups_of(table: str) -> list[Rollup]:
    """The rollups kept from the rows of `table` (a record kind's table)."""
    return [r for r in ROLLUPS if r.source == table]


__all__ = [
    "BY_KIND",
    "JOB_PORT_SELECT",
    "ROLLUPS",
    "ROLLUP_INTERVAL",
    "ROLLUP_SECONDS",
    "TABLES",
    "Rollup",
    "rollups_of",
]
