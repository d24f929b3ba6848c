"""Render ClickHouse DDL from the record kinds: single-server MergeTree tables, or, with a cluster
name, ReplicatedMergeTree `*_local` tables plus `Distributed` tables with ON CLUSTER.

Pure string rendering: nothing here talks to ClickHouse, so the DDL can be reviewed and parsed.
"""

from __future__ import annotations

from collections.abc import Mapping

from telemetry.records import KINDS, RecordKind

# Plain MergeTree honours insert_deduplication_token only within this many recent blocks.
DEDUP_WINDOW = 10_000
LOCAL_SUFFIX = "_local"


def _q(name: str) -> str:
    return f"`{name}`"


def columns_sql(kind: RecordKind) -> str:
    lines = []
    for f in kind.fields:
        col = f"    {_q(f.name)} {f.clickhouse_type}"
        if f.clickhouse_codec:
            col += f" CODEC({f.clickhouse_codec})"
        col += " COMMENT " + _literal(f.doc)
        lines.append(col)
    return ",\n".join(lines)


def _literal(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def engine_sql(kind: RecordKind, database: str, cluster: str | None, table: str) -> str:
    base = "ReplacingMergeTree" if kind.version_field else "MergeTree"
    args: list[str] = []
    if cluster:
        base = "Replicated" + base
        args += [f"'/clickhouse/tables/{{shard}}/{database}/{table}'", "'{replica}'"]
    if kind.version_field:
        args.append(_q(kind.version_field))
    return f"{base}({', '.join(args)})"


def table_sql(
    kind: RecordKind,
    database: str,
    *,
    cluster: str | None = None,
    ttl_days: int | str | None = "default",
) -> list[str]:
    """CREATE TABLE statements for one kind (one statement, or two in cluster mode)."""
    ttl = kind.ttl_days if ttl_days == "default" else ttl_days
    name = kind.table + (LOCAL_SUFFIX if cluster else "")
    on_cluster = f" ON CLUSTER {_q(cluster)}" if cluster else ""
    parts = [
        f"CREATE TABLE IF NOT EXISTS {_q(database)}.{_q(name)}{on_cluster}\n(\n{columns_sql(kind)}\n)",
        f"ENGINE = {engine_sql(kind, database, cluster, name)}",
    ]
    if kind.partition_by:
        parts.append(f"PARTITION BY {kind.partition_by}")
    parts.append(f"ORDER BY ({', '.join(_q(c) for c in kind.order_by)})")
    if ttl:
        parts.append(f"TTL toDateTime({_q(kind.time_field)}) + INTERVAL {int(ttl)} DAY")
    if not cluster:
        # Replicated tables deduplicate by default; plain MergeTree needs a window.
        parts.append(f"SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}")
    parts.append("COMMENT " + _literal(kind.doc))
    stmts = ["\n".join(parts)]
    if cluster:
        stmts.append(
            f"CREATE TABLE IF NOT EXISTS {_q(database)}.{_q(kind.table)}{on_cluster} "
            f"AS {_q(database)}.{_q(name)}\n"
            f"ENGINE = Distributed({_q(cluster)}, {_q(database)}, {_q(name)}, rand())"
        )
    return stmts


def database_sql(database: str, cluster: str | None = None) -> str:
    on_cluster = f" ON CLUSTER {_q(cluster)}" if cluster else ""
    return f"CREATE DATABASE IF NOT EXISTS {_q(database)}{on_cluster}"


def ttl_sql(kind: RecordKind, database: str, days: int | None, cluster: str | None = None) -> str:
    name = kind.table + (LOCAL_SUFFIX if cluster else "")
    on_cluster = f" ON CLUSTER {_q(cluster)}" if cluster else ""
    if not days:
        return f"ALTER TABLE {_q(database)}.{_q(name)}{on_cluster} REMOVE TTL"
    return (
        f"ALTER TABLE {_q(database)}.{_q(name)}{on_cluster} "
        f"MODIFY TTL toDateTime({_q(kind.time_field)}) + INTERVAL {int(days)} DAY"
    )


def _alter_column_sql(
    kind: RecordKind, field_name: str, database: str, cluster: str | None, verb: str
) -> list[str]:
    f = kind.by_name[field_name]
    col = f"{_q(f.name)} {f.clickhouse_type}" + (
        f" CODEC({f.clickhouse_codec})" if f.clickhouse_codec else ""
    )
    on_cluster = f" ON CLUSTER {_q(cluster)}" if cluster else ""
    names = [kind.table + LOCAL_SUFFIX, kind.table] if cluster else [kind.table]
    return [f"ALTER TABLE {_q(database)}.{_q(n)}{on_cluster} {verb} {col}" for n in names]


def add_column_sql(
    kind: RecordKind, field_name: str, database: str, cluster: str | None = None
) -> list[str]:
    """ALTER statements adding one field of `kind` (both tables in cluster mode)."""
    return _alter_column_sql(kind, field_name, database, cluster, "ADD COLUMN IF NOT EXISTS")


def modify_column_sql(
    kind: RecordKind, field_name: str, database: str, cluster: str | None = None
) -> list[str]:
    """ALTER statements changing one field of `kind` to its current type and codec."""
    return _alter_column_sql(kind, field_name, database, cluster, "MODIFY COLUMN")


def all_tables_sql(
    database: str,
    *,
    cluster: str | None = None,
    ttl_overrides: Mapping[str, int | None] | None = None,
) -> list[str]:
    out = [database_sql(database, cluster)]
    for k in KINDS.values():
        ttl = (ttl_overrides or {}).get(k.table, "default")
        out += table_sql(k, database, cluster=cluster, ttl_days=ttl)
    return out
