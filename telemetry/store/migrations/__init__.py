"""Versioned, idempotent schema migrations. Applied versions are rows in `schema_migrations`.

One script per migration, `NNNN_<name>.sql` next to this module (read by `loader`, which says
what a script may hold), applied in the order of NNNN. Rules: never edit a released script; add
a new one. Each script holds its own DDL text, frozen as it was released: a migration never
renders today's record kinds, so renaming or removing a field later cannot change what an old
migration does. Adding a field to a kind is a new script with
`ALTER TABLE` / `ADD COLUMN <column_sql(field)> AFTER <previous>`; adding a kind is a new script
with its `CREATE TABLE` as today's `TableDef.of(kind)` has it (print `create_table_sql` of it).
"""

from __future__ import annotations

import re
from importlib import resources

from telemetry.store.migrations.loader import Context, Migration, Rollup, alter_columns, parse
from telemetry.store.rollups import rollups_of
from telemetry.store.schema import (
    DEDUP_WINDOW,
    LOCAL_SUFFIX,
    TableDef,
    database_sql,
    table_ttl_sql,
    ttl_sql,
)

__all__ = [
    "MIGRATIONS",
    "Context",
    "Migration",
    "Rollup",
    "alter_columns",
    "bookkeeping_sql",
    "render_all",
]


def _load() -> list[Migration]:
    scripts = sorted(
        (int(m[1]), f)
        for f in resources.files(__package__).iterdir()
        if (m := re.fullmatch(r"(\d{4})_\w+\.sql", f.name))
    )
    versions = [v for v, _ in scripts]
    if versions != list(range(1, len(scripts) + 1)):
        raise RuntimeError(f"migration scripts must be numbered 1, 2, ... without gaps: {versions}")
    return [parse(v, f.read_text(encoding="utf-8")) for v, f in scripts]


MIGRATIONS: list[Migration] = _load()
_BY_VERSION = {m.version: m for m in MIGRATIONS}

# What other modules and tests ask of particular migrations.
MIGRATION_4_RENAMES: dict[str, str] = dict(_BY_VERSION[4].renames)
MIGRATION_7_SHARD_KEYS: dict[str, tuple[str, ...]] = dict(_BY_VERSION[7].shard_keys)
MIGRATION_12_ROLLUPS: tuple[Rollup, ...] = _BY_VERSION[12].rollups
MIGRATION_14_TABLES: tuple[TableDef, ...] = _BY_VERSION[14].tables


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
            f"ENGINE = Distributed({cl}, {db}, `schema_migrations{LOCAL_SUFFIX}`, version)",
        ]
    return [
        database_sql(ctx.database),
        f"CREATE TABLE IF NOT EXISTS {db}.`schema_migrations` {cols} "
        f"ENGINE = ReplacingMergeTree ORDER BY version SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}",
    ]


def render_all(ctx: Context) -> list[str]:
    """Every statement a fresh store runs, in order (for `db ddl` and tests), TTL overrides last."""
    from telemetry.records import KINDS

    out = bookkeeping_sql(ctx)
    for m in MIGRATIONS:
        out += m.statements(ctx)
    tables = {k.table: k for k in KINDS.values()}
    for table, days in ctx.ttl_overrides.items():
        if table in tables:
            out.append(ttl_sql(tables[table], ctx.database, days, ctx.cluster))
            out += [  # a rollup keeps what its source keeps
                table_ttl_sql(r.table, "bucket", ctx.database, days, ctx.cluster)
                for r in rollups_of(table)
            ]
    return out
