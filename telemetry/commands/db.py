"""`railscope db migrate|status|ddl`: schema migrations of the store."""

from __future__ import annotations

import argparse
from typing import Any

from telemetry.commands.common import add_store_args, config_from_args, store_from_config


def register(sub: Any) -> list[str]:
    p = sub.add_parser(
        "db",
        help="store schema: migrate, status, ddl",
        description="Manage the ClickHouse schema. Migrations are versioned and idempotent.",
    )
    dsub = p.add_subparsers(dest="db_command", metavar="SUBCOMMAND", required=True)
    m = dsub.add_parser("migrate", help="apply pending migrations (idempotent)")
    s = dsub.add_parser(
        "status",
        help="list applied and pending migrations, and per table its rows' time range and TTL",
    )
    d = dsub.add_parser("ddl", help="print the DDL a fresh store runs (nothing is executed)")
    for q in (m, s, d):
        add_store_args(q)
        q.add_argument(
            "--cluster",
            metavar="NAME",
            help="ClickHouse cluster: ReplicatedMergeTree + Distributed tables, ON CLUSTER DDL",
        )
    m.set_defaults(func=migrate)
    s.set_defaults(func=status)
    d.set_defaults(func=ddl)
    return ["db"]


def _store(args: argparse.Namespace, *, reading: bool = False) -> Any:
    cfg = config_from_args(args, store__cluster=args.cluster)
    return store_from_config(cfg, reading=reading)


def migrate(args: argparse.Namespace) -> int:
    store = _store(args)
    applied = store.migrate()
    if applied:
        for m in applied:
            print(f"applied {m.version:4d}  {m.description}")
    else:
        print(f"{store.dsn.redacted()} database {store.database}: up to date, nothing to apply")
    return 0


def status(args: argparse.Namespace) -> int:
    store = _store(args, reading=True)
    applied = store.applied_versions()
    print(f"store {store.dsn.redacted()} database {store.database}")
    for v, desc, at in applied:
        print(f"  applied {v:4d}  {at:%Y-%m-%d %H:%M:%S}Z  {desc}")
    pending = store.pending()
    for m in pending:
        print(f"  pending {m.version:4d}  {m.description}")
    if not applied and not pending:
        print("  no migrations")
    print(f"{len(applied)} applied, {len(pending)} pending")
    if applied:
        from telemetry.store.retention import held

        print("tables (rows, their time range, TTL):")
        for h in held(store):
            print(f"  {h.describe()}")
    return 0


def ddl(args: argparse.Namespace) -> int:
    from telemetry.store.migrations import render_all
    from telemetry.store.migrations.loader import Context

    store = _store(args)
    for stmt in render_all(Context(store.database, store.cluster, store.ttl_overrides)):
        print(stmt.rstrip() + ";\n")
    return 0
