"""Versioned, idempotent schema migrations. Applied versions are rows in `schema_migrations`.

Rules: never edit a released migration's meaning; add a new one. Adding a field to a kind is
`add_columns(kind, field)` in a new migration (fresh stores get it from version 1 already, and
ADD COLUMN IF NOT EXISTS makes that harmless).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from telemetry.records import KINDS
from telemetry.store.schema import (
    DEDUP_WINDOW,
    LOCAL_SUFFIX,
    add_column_sql,
    database_sql,
    modify_column_sql,
    table_sql,
)


@dataclass(frozen=True)
class Context:
    database: str
    cluster: str | None
    ttl_overrides: Mapping[str, int | None]


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: Callable[[Context], list[str]]


def create_tables(*kind_names: str) -> Callable[[Context], list[str]]:
    def render(ctx: Context) -> list[str]:
        out: list[str] = []
        for name in kind_names or tuple(KINDS):
            k = KINDS[name]
            out += table_sql(
                k,
                ctx.database,
                cluster=ctx.cluster,
                ttl_days=ctx.ttl_overrides.get(k.table, "default"),
            )
        return out

    return render


def add_columns(kind_name: str, *fields: str) -> Callable[[Context], list[str]]:
    def render(ctx: Context) -> list[str]:
        return [
            s
            for f in fields
            for s in add_column_sql(KINDS[kind_name], f, ctx.database, ctx.cluster)
        ]

    return render


def modify_columns(kind_name: str, *fields: str) -> Callable[[Context], list[str]]:
    def render(ctx: Context) -> list[str]:
        return [
            s
            for f in fields
            for s in modify_column_sql(KINDS[kind_name], f, ctx.database, ctx.cluster)
        ]

    return render


def steps(*parts: Callable[[Context], list[str]]) -> Callable[[Context], list[str]]:
    return lambda ctx: [s for p in parts for s in p(ctx)]


MIGRATIONS: list[Migration] = [
    Migration(1, "create the record tables", create_tables()),
    # Stores created from the first schema: the exporters' and the engine's kinds and fields.
    Migration(
        2,
        "exporter and correlation kinds and fields",
        steps(
            create_tables(
                "nic_priority_sample",
                "switch_status",
                "ecmp_group_sample",
                "hdfs_placement_total",
                "hdfs_namenode_sample",
                "hdfs_datanode_sample",
                "dci_usage",
                "attributed_flow",
                "namespace",
            ),
            add_columns(
                "nic_sample",
                "pod",
                "namespace",
                "container",
                "pfc_rx_pause_duration_seconds_total",
                "link_downed_total",
                "symbol_errors_total",
                "xmit_wait_total",
                "rx_dropped_total",
            ),
            add_columns(
                "switch_queue_sample",
                "ecn_marked_bytes_total",
                "dropped_bytes_total",
                "headroom_watermark_bytes",
            ),
            add_columns("flow_sample", "ecmp_group"),
            modify_columns(
                "gpu_sample", "power_violation_seconds_total", "thermal_violation_seconds_total"
            ),
            modify_columns("flow_sample", "src_port", "dst_port", "protocol", "dscp", "ecn"),
        ),
    ),
    Migration(
        3,
        "attributed flows carry rail, NIC and leaf port of both ends",
        add_columns(
            "attributed_flow",
            "src_rail",
            "src_nic",
            "src_leaf_port",
            "dst_rail",
            "dst_nic",
            "dst_leaf_port",
        ),
    ),
]


def bookkeeping_sql(ctx: Context) -> list[str]:
    db = f"`{ctx.database}`"
    cols = "(version UInt32, description String, applied_at DateTime64(3, 'UTC'))"
    if ctx.cluster:
        cl = f"`{ctx.cluster}`"
        return [
            database_sql(ctx.database, ctx.cluster),
            f"CREATE TABLE IF NOT EXISTS {db}.`schema_migrations{LOCAL_SUFFIX}` ON CLUSTER {cl} {cols} "
            f"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{{shard}}/{ctx.database}/schema_migrations', '{{replica}}') ORDER BY version",
            f"CREATE TABLE IF NOT EXISTS {db}.`schema_migrations` ON CLUSTER {cl} AS {db}.`schema_migrations{LOCAL_SUFFIX}` "
            f"ENGINE = Distributed({cl}, {db}, `schema_migrations{LOCAL_SUFFIX}`)",
        ]
    return [
        database_sql(ctx.database),
        f"CREATE TABLE IF NOT EXISTS {db}.`schema_migrations` {cols} "
        f"ENGINE = ReplacingMergeTree ORDER BY version SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}",
    ]


def render_all(ctx: Context) -> list[str]:
    """Every statement a fresh store runs, in order (for `db migrate --print` and tests)."""
    out = bookkeeping_sql(ctx)
    for m in MIGRATIONS:
        out += m.statements(ctx)
    return out
