"""Render ClickHouse DDL: single-server MergeTree tables, or, with a cluster name,
ReplicatedMergeTree `*_local` tables plus `Distributed` tables with ON CLUSTER.

Distributed tables shard by a stable key, `cityHash64` of the entity columns (the non-time
columns of the sorting key): a retried batch splits across the shards exactly as the first try
did, so each shard's insert deduplication sees the same block again, and rows that a
ReplacingMergeTree collapses always meet on one shard.

Pure string rendering: nothing here talks to ClickHouse, so the DDL can be reviewed and parsed.
Migrations render frozen `TableDef`s (the table as that migration created it); `TableDef.of(kind)`
renders today's definition of a record kind (what a new migration copies when it adds a kind).
"""

from __future__ import annotations

from dataclasses import dataclass

from telemetry.records import Field, RecordKind

# Plain MergeTree honours insert_deduplication_token only within this many recent blocks.
DEDUP_WINDOW = 10_000
LOCAL_SUFFIX = "_local"


def quote(name: str) -> str:
    return f"`{name}`"


def literal(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def column_sql(f: Field) -> str:
    """One column definition: name, type, codec, comment."""
    col = f"{quote(f.name)} {f.clickhouse_type}"
    if f.clickhouse_codec:
        col += f" CODEC({f.clickhouse_codec})"
    return col + " COMMENT " + literal(f.doc)


@dataclass(frozen=True)
class TableDef:
    """A table as DDL text: `columns` holds one column definition per line."""

    name: str
    columns: str
    order_by: str
    comment: str
    ttl: tuple[str, int] | None = None  # (time column, days)
    partition_by: str | None = "toYYYYMMDD(ts)"
    version: str | None = None  # ReplacingMergeTree version column
    shard_by: tuple[str, ...] = ()  # Distributed sharding key columns (() = rand(), before 7)
    # AggregatingMergeTree / SummingMergeTree for a rollup (None: MergeTree, or
    # ReplacingMergeTree with `version`); a rollup is written by its materialized view only
    engine: str | None = None

    @classmethod
    def of(cls, kind: RecordKind) -> TableDef:
        return cls(
            kind.table,
            "\n".join(column_sql(f) for f in kind.fields),
            ", ".join(quote(c) for c in kind.order_by),
            kind.doc,
            (kind.time_field, kind.ttl_days) if kind.ttl_days else None,
            kind.partition_by,
            kind.version_field,
            entity_columns(kind),
        )


def entity_columns(kind: RecordKind) -> tuple[str, ...]:
    """The columns naming the entity a row is about: the sorting key less its time columns."""
    times = {f.name for f in kind.fields if f.clickhouse_type.startswith("DateTime")}
    return tuple(c for c in kind.order_by if c not in times)


def shard_key(columns: tuple[str, ...]) -> str:
    """The Distributed sharding expression: stable across processes, versions and retries."""
    return f"cityHash64({', '.join(quote(c) for c in columns)})" if columns else "rand()"


def _on(cluster: str | None) -> str:
    return f" ON CLUSTER {quote(cluster)}" if cluster else ""


def _names(table: str, cluster: str | None) -> list[str]:
    """The tables one logical table is in cluster mode (local + Distributed) or on one server."""
    return [table + LOCAL_SUFFIX, table] if cluster else [table]


def _engine(t: TableDef, database: str, cluster: str | None, name: str) -> str:
    base = t.engine or ("ReplacingMergeTree" if t.version else "MergeTree")
    args: list[str] = []
    if cluster:
        base = "Replicated" + base
        args += [f"'/clickhouse/tables/{{shard}}/{database}/{name}'", "'{replica}'"]
    if t.version:
        args.append(quote(t.version))
    return f"{base}({', '.join(args)})"


def distributed_sql(
    table: str,
    database: str,
    cluster: str,
    shard_by: tuple[str, ...] = (),
    *,
    replace: bool = False,
) -> str:
    """The Distributed table over `table`'s `*_local` replicas, sharded by `shard_by` (rand()
    when empty: what migrations before 7 created); `replace` swaps an existing one (a
    Distributed table holds no data of its own)."""
    db, local = quote(database), quote(table + LOCAL_SUFFIX)
    create = "CREATE OR REPLACE TABLE" if replace else "CREATE TABLE IF NOT EXISTS"
    return (
        f"{create} {db}.{quote(table)}{_on(cluster)} AS {db}.{local}\n"
        f"ENGINE = Distributed({quote(cluster)}, {db}, {local}, {shard_key(shard_by)})"
    )


def create_table_sql(t: TableDef, database: str, cluster: str | None = None) -> list[str]:
    """CREATE TABLE statements for one table (one statement, or two in cluster mode)."""
    name = t.name + (LOCAL_SUFFIX if cluster else "")
    columns = ",\n".join(f"    {c}" for c in t.columns.strip().splitlines())
    parts = [
        f"CREATE TABLE IF NOT EXISTS {quote(database)}.{quote(name)}{_on(cluster)}\n(\n{columns}\n)",
        f"ENGINE = {_engine(t, database, cluster, name)}",
    ]
    if t.partition_by:
        parts.append(f"PARTITION BY {t.partition_by}")
    parts.append(f"ORDER BY ({t.order_by})")
    if t.ttl:
        parts.append(f"TTL toDateTime({quote(t.ttl[0])}) + INTERVAL {int(t.ttl[1])} DAY")
    if not cluster:
        # Replicated tables deduplicate by default; plain MergeTree needs a window. A rollup
        # needs it too: its view runs on a retried block the source drops, and the rollup drops
        # that view's block in turn (tests/integration/correlate/test_rollups.py).
        parts.append(f"SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}")
    parts.append("COMMENT " + literal(t.comment))
    stmts = ["\n".join(parts)]
    if cluster:
        stmts.append(distributed_sql(t.name, database, cluster, t.shard_by))
    return stmts


def materialized_view_sql(
    name: str, target: str, source: str, select: str, database: str, cluster: str | None = None
) -> str:
    """A materialized view `name` that runs `select` (its `{source}` the source table) on every
    block inserted into `source` and writes the result to `target`. In cluster mode both are the
    `*_local` replicas and the view exists on every node: each shard rolls up its own rows (a
    rollup is sharded by its source's entity, so a series lives on one shard). The view runs
    with the rights of the user who created it (the migration's admin), so a collector that may
    only INSERT into `source` needs no grant on the rollup nor SELECT on its own table."""
    db, sfx = quote(database), LOCAL_SUFFIX if cluster else ""
    body = select.strip().format(source=f"{db}.{quote(source + sfx)}")
    return (
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.{quote(name)}{_on(cluster)} "
        f"TO {db}.{quote(target + sfx)}\nDEFINER = CURRENT_USER SQL SECURITY DEFINER\nAS {body}"
    )


def drop_view_sql(name: str, database: str, cluster: str | None = None) -> str:
    """Drop a (materialized) view, on every node in cluster mode; its target table stays."""
    return f"DROP VIEW IF EXISTS {quote(database)}.{quote(name)}{_on(cluster)}"


def backfill_sql(target: str, source: str, select: str, database: str) -> str:
    """`INSERT INTO target SELECT ...` over what `source` held before the view existed (the
    Distributed tables in cluster mode: rows land on the shard their entity hashes to, where
    that shard's view puts new ones)."""
    db = quote(database)
    body = select.strip().format(source=f"{db}.{quote(source)}")
    return f"INSERT INTO {db}.{quote(target)}\n{body}"


def table_sql(kind: RecordKind, database: str, *, cluster: str | None = None) -> list[str]:
    """CREATE TABLE statements for today's definition of `kind`."""
    return create_table_sql(TableDef.of(kind), database, cluster)


def database_sql(database: str, cluster: str | None = None) -> str:
    return f"CREATE DATABASE IF NOT EXISTS {quote(database)}{_on(cluster)}"


def ttl_sql(kind: RecordKind, database: str, days: int | None, cluster: str | None = None) -> str:
    return table_ttl_sql(kind.table, kind.time_field, database, days, cluster)


def table_ttl_sql(
    table: str, column: str, database: str, days: int | None, cluster: str | None = None
) -> str:
    """Set (or, with no days, remove) the TTL of `table` on its time column `column`."""
    name = table + (LOCAL_SUFFIX if cluster else "")
    target = f"{quote(database)}.{quote(name)}{_on(cluster)}"
    if not days:
        return f"ALTER TABLE {target} REMOVE TTL"
    return f"ALTER TABLE {target} MODIFY TTL toDateTime({quote(column)}) + INTERVAL {int(days)} DAY"


def alter_sql(table: str, action: str, database: str, cluster: str | None = None) -> list[str]:
    """`ALTER TABLE ... <action>` on a table (the local and the Distributed table in cluster
    mode), e.g. action = "ADD COLUMN IF NOT EXISTS `x` UInt8 COMMENT '...'"."""
    return [
        f"ALTER TABLE {quote(database)}.{quote(n)}{_on(cluster)} {action}"
        for n in _names(table, cluster)
    ]


def rename_sql(old: str, new: str, database: str, cluster: str | None = None) -> list[str]:
    """Rename a table. In cluster mode the replicas are renamed and the Distributed table, which
    names its local table, is recreated over them."""
    db = quote(database)
    if not cluster:
        return [f"RENAME TABLE {db}.{quote(old)} TO {db}.{quote(new)}"]
    return [
        f"RENAME TABLE {db}.{quote(old + LOCAL_SUFFIX)} TO {db}.{quote(new + LOCAL_SUFFIX)}"
        f"{_on(cluster)}",
        f"DROP TABLE IF EXISTS {db}.{quote(old)}{_on(cluster)}",
        distributed_sql(new, database, cluster),
    ]
