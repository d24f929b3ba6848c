"""Read a migration script (`NNNN_<name>.sql` in this package) into a `Migration`.

A script holds what a migration changes, frozen as released; `telemetry.store.schema` writes
each change for the store at hand (database, single server or cluster). The loader only reads
scripts: it never talks to ClickHouse and never renders today's record kinds.

A script starts with its description: the `-- ` lines up to the first blank line, joined by
spaces (what `schema_migrations` records). Then statements, each ending with `;` at the end of
a line; other lines starting with `--` are comments. Tables are named without a database, and
nothing the schema functions add is written out: the database, IF [NOT] EXISTS, ON CLUSTER, the
replicated engine and the Distributed table of a cluster, a single server's dedup SETTINGS.

- `CREATE TABLE `t`` (create_table_sql): `(`, one column per line (comma-separated), `)`, then
  one line per clause: `ENGINE = X` or `X(`version`)`, `PARTITION BY` (none when absent),
  `ORDER BY (...)`, `TTL toDateTime(`col`) + INTERVAL N DAY`, `SHARD BY (`a`, ...)` (the
  Distributed table's sharding columns on a cluster; rand() when absent), `COMMENT '...'`.
- `ALTER TABLE `t`` (alter_sql), then one action per line (comma-separated): `ADD COLUMN ...`,
  `MODIFY COLUMN ...` or `DROP COLUMN `c``. One statement: one ALTER.
- `ALTER TABLE `t` SHARD BY (`a`, ...)`: on a cluster, recreate t's Distributed table sharded
  by those columns (distributed_sql); nothing on a single server.
- `RENAME TABLE `old` TO `new`` (rename_sql).
- `CREATE MATERIALIZED VIEW `t_mv` TO `t` AS`, then its SELECT with `FROM `source`` on a line
  of its own (materialized_view_sql), followed by the backfill of `t` from what `source` already
  held (backfill_sql). `t` is created earlier in the same script.
- `DROP VIEW `v`` (drop_view_sql).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import groupby

from telemetry.store.schema import (
    TableDef,
    alter_sql,
    backfill_sql,
    create_table_sql,
    distributed_sql,
    drop_view_sql,
    literal,
    materialized_view_sql,
    quote,
    rename_sql,
)


@dataclass(frozen=True)
class Context:
    database: str
    cluster: str | None
    ttl_overrides: Mapping[str, int | None]


Step = Callable[[Context], list[str]]


@dataclass(frozen=True)
class Rollup:
    """A table kept by a materialized view on inserts into `source` (frozen like a TableDef):
    `select` reads `{source}`; the view is `<table.name>_mv`."""

    table: TableDef
    source: str
    select: str


@dataclass(frozen=True)
class Migration:
    """One script: its statements for a context, and what it created or named (for the code
    and tests that ask about a migration's tables)."""

    version: int
    description: str
    statements: Step
    tables: tuple[TableDef, ...] = ()  # CREATE TABLE, the rollups' tables included
    rollups: tuple[Rollup, ...] = ()
    renames: Mapping[str, str] = field(default_factory=dict)
    shard_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


_VERBS = {
    "ADD": "ADD COLUMN IF NOT EXISTS",
    "MODIFY": "MODIFY COLUMN",
    "DROP": "DROP COLUMN IF EXISTS",
}


def alter_columns(columns: Callable[[], tuple[tuple[str, str, str], ...]]) -> Step:
    """(table, ADD | MODIFY | DROP, column text) -> ALTER TABLE on both tables in cluster mode.
    A run of one verb on one table is one ALTER with its actions comma-separated: one metadata
    change (and in cluster mode one DDL-queue entry) instead of one per column, which made a
    fresh store's migration ~3x faster."""

    def stmts(ctx: Context) -> list[str]:
        return [
            s
            for (table, verb), run in groupby(columns(), key=lambda c: c[:2])
            for s in alter_sql(
                table,
                ", ".join(f"{_VERBS[verb]} {c}" for _, _, c in run),
                ctx.database,
                ctx.cluster,
            )
        ]

    return stmts


_NAME = r"`([^`]+)`"
_NAMES = re.compile(_NAME)


def _names(text: str) -> tuple[str, ...]:
    return tuple(_NAMES.findall(text))


def _unquote(literal: str) -> str:
    """The text of a ClickHouse string literal as schema.literal writes it."""
    if not (literal.startswith("'") and literal.endswith("'")):
        raise ValueError(f"not a string literal: {literal}")
    return re.sub(r"\\(.)", r"\1", literal[1:-1])


def _table(lines: list[str]) -> TableDef:
    (name,) = _names(lines[0])
    end = lines.index(")")
    if lines[1] != "(" or end < 3:
        raise ValueError(f"{name}: columns go one per line between '(' and ')'")
    columns = [c.removeprefix("    ") for c in lines[2:end]]
    columns = [c.removesuffix(",") for c in columns[:-1]] + columns[-1:]
    clauses = dict(line.split(" ", 1) for line in lines[end + 1 :])
    unknown = set(clauses) - {"ENGINE", "PARTITION", "ORDER", "TTL", "SHARD", "COMMENT"}
    if unknown:
        raise ValueError(f"{name}: unknown clause {sorted(unknown)}")
    engine = re.fullmatch(r"= (\w+)(?:\(`(\w+)`\))?", clauses["ENGINE"])
    ttl = re.fullmatch(r"toDateTime\(`(\w+)`\) \+ INTERVAL (\d+) DAY", clauses.get("TTL", ""))
    if not engine or ("TTL" in clauses and not ttl):
        raise ValueError(f"{name}: ENGINE = X or X(`version`); TTL toDateTime(`col`) + N DAY")
    base, version = engine[1], engine[2]
    return TableDef(
        name,
        "\n".join(columns) + "\n",
        clauses["ORDER"].removeprefix("BY (").removesuffix(")"),
        _unquote(clauses["COMMENT"]),
        ttl=(ttl[1], int(ttl[2])) if ttl else None,
        partition_by=clauses["PARTITION"].removeprefix("BY ") if "PARTITION" in clauses else None,
        version=version,
        shard_by=_names(clauses.get("SHARD", "")),
        engine=None if base == ("ReplacingMergeTree" if version else "MergeTree") else base,
    )


def table_script(t: TableDef) -> str:
    """`t` as a script's CREATE TABLE, what `_table` reads back: a migration that adds a kind
    pastes `table_script(TableDef.of(kind))` (`python -m telemetry.store.migrations KIND`)."""
    base = t.engine or ("ReplacingMergeTree" if t.version else "MergeTree")
    columns = t.columns.strip().splitlines()
    lines = [f"CREATE TABLE {quote(t.name)}", "(", *(f"    {c}," for c in columns), ")"]
    lines[-2] = lines[-2].removesuffix(",")
    lines.append(f"ENGINE = {base}" + (f"({quote(t.version)})" if t.version else ""))
    if t.partition_by:
        lines.append(f"PARTITION BY {t.partition_by}")
    lines.append(f"ORDER BY ({t.order_by})")
    if t.ttl:
        lines.append(f"TTL toDateTime({quote(t.ttl[0])}) + INTERVAL {int(t.ttl[1])} DAY")
    if t.shard_by:
        lines.append(f"SHARD BY ({', '.join(quote(c) for c in t.shard_by)})")
    lines.append(f"COMMENT {literal(t.comment)}")
    return "\n".join(lines) + ";\n"


def _alter(lines: list[str]) -> Step:
    (table,) = _names(lines[0])
    actions = [a.strip() for a in lines[1:]]
    actions = [a.removesuffix(",") for a in actions[:-1]] + actions[-1:]
    out = []
    for a in actions:
        verb, column = a.split(" COLUMN ", 1)
        if verb not in _VERBS:
            raise ValueError(f"{table}: {a!r} is not ADD, MODIFY or DROP COLUMN")
        out.append((table, verb, column))
    frozen = tuple(out)
    return alter_columns(lambda: frozen)


def _rollup(lines: list[str], tables: Mapping[str, TableDef]) -> Rollup:
    view, target = _names(lines[0])
    if view != target + "_mv":
        raise ValueError(f"{view}: the view of {target} is {target}_mv")
    (source,) = [_names(line)[0] for line in lines if line.startswith("FROM ")]
    select = "\n".join("FROM {source}" if s.startswith("FROM ") else s for s in lines[1:])
    return Rollup(tables[target], source, select)


def _create(t: TableDef) -> Step:
    return lambda ctx: create_table_sql(t, ctx.database, ctx.cluster)


def _reshard(table: str, columns: tuple[str, ...]) -> Step:
    return lambda ctx: (
        [distributed_sql(table, ctx.database, ctx.cluster, columns, replace=True)]
        if ctx.cluster
        else []
    )


def _rename(old: str, new: str) -> Step:
    return lambda ctx: rename_sql(old, new, ctx.database, ctx.cluster)


def _view(r: Rollup) -> Step:
    """The view, then what the source held before it: the view only sees new inserts (a row
    inserted between the two is counted twice in the sums, never in the min/max/any columns the
    engine prunes with)."""
    name = r.table.name
    return lambda ctx: [
        materialized_view_sql(name + "_mv", name, r.source, r.select, ctx.database, ctx.cluster),
        backfill_sql(name, r.source, r.select, ctx.database),
    ]


def _drop_view(view: str) -> Step:
    return lambda ctx: [drop_view_sql(view, ctx.database, ctx.cluster)]


def parse(version: int, text: str) -> Migration:
    """A script's text -> its Migration (ValueError on a statement it does not know)."""
    head, _, body = text.partition("\n\n")
    if not head.startswith("-- "):
        raise ValueError(f"migration {version}: no description ('-- ' lines at the top)")
    description = " ".join(line.removeprefix("-- ") for line in head.splitlines())
    statements: list[list[str]] = [[]]
    for line in body.splitlines():
        if line.startswith("--") or (not line and not statements[-1]):
            continue
        statements[-1].append(line.removesuffix(";"))
        if line.endswith(";"):
            statements.append([])
    if statements.pop():
        raise ValueError(f"migration {version}: the last statement has no ';'")

    parts: list[Step] = []
    tables: dict[str, TableDef] = {}
    rollups: list[Rollup] = []
    renames: dict[str, str] = {}
    shard_keys: dict[str, tuple[str, ...]] = {}
    for s in statements:
        first = s[0]
        if first.startswith("CREATE TABLE "):
            t = _table(s)
            tables[t.name] = t
            parts.append(_create(t))
        elif m := re.fullmatch(rf"ALTER TABLE {_NAME} SHARD BY \((.+)\)", first):
            shard_keys[m[1]] = _names(m[2])
            parts.append(_reshard(m[1], shard_keys[m[1]]))
        elif first.startswith("ALTER TABLE "):
            parts.append(_alter(s))
        elif first.startswith("RENAME TABLE "):
            old, new = _names(first)
            renames[old] = new
            parts.append(_rename(old, new))
        elif first.startswith("CREATE MATERIALIZED VIEW "):
            rollups.append(_rollup(s, tables))
            parts.append(_view(rollups[-1]))
        elif first.startswith("DROP VIEW "):
            parts.append(_drop_view(*_names(first)))
        else:
            raise ValueError(f"migration {version}: unknown statement {first!r}")
    return Migration(
        version,
        description,
        lambda ctx: [stmt for p in parts for stmt in p(ctx)],
        tuple(tables.values()),
        tuple(rollups),
        renames,
        shard_keys,
    )
