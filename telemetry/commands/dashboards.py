"""build Grafana dashboards (JSON + provisioning); check their queries on a store

Grafana dashboards as code (grafanalib; ClickHouse and Prometheus datasources). See
docs/dashboards.md.

`build` writes the dashboards and provisioning files under --out only; `check` runs every
dashboard query on a store with the datasource's macros expanded, and only reads the store.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from telemetry.commands.common import (
    Verb,
    add_out_arg,
    add_range_args,
    add_store_args,
    arg,
    store_from_args,
)
from telemetry.errors import UserError


def run_build(args: argparse.Namespace) -> int:
    import dashboards

    out = Path(args.out)
    single = None
    if args.single_machine:
        host, _, port = args.query_listen.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserError(f"--query-listen {args.query_listen!r}: expected HOST:PORT")
        single = dashboards.SingleMachine(args.query_listen, args.database, args.prometheus_url)
    try:
        written = dashboards.write(out, args.dashboards_path, single)
    except OSError as e:
        raise UserError(f"--out {out}: cannot write: {e.strerror or e}") from None
    for p in written:
        print(f"wrote {p}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    import dashboards
    from dashboards.clickhouse import ALL
    from telemetry.times import parse_time

    cfg, store = store_from_args(args, reading=True)
    start = parse_time(args.since)
    end = parse_time(args.until) if args.until else datetime.now(UTC)
    if end <= start:
        raise UserError(f"dashboards check: --until ({end}) is not after --since ({start})")
    values = {"cluster": cfg.cluster, "tenant": ALL, "node": ALL, "switch": ALL, "job": ALL}
    for spec in args.var:
        name, sep, value = spec.partition("=")
        if not sep or not name:
            raise UserError(f"--var {spec!r}: expected NAME=VALUE")
        values[name] = value
    if not any(s.startswith("job=") for s in args.var):
        jobs = store.query_rows(
            f"SELECT concat(namespace, '/', job) FROM {store.table('job', final=True)} "
            "WHERE cluster = {c:String} ORDER BY 1 LIMIT 1",
            {"c": values["cluster"]},
        )
        values["job"] = jobs[0][0] if jobs else ALL
    failed = 0
    for q, rows in dashboards.run(store, start, end, values, args.interval):
        if isinstance(rows, str):
            failed += 1
            print(f"FAILED  {q.where}: {rows}")
        else:
            print(f"{rows:>7}  {q.where}")
    print(f"{'all queries ran' if not failed else f'{failed} query(ies) failed'}")
    return 1 if failed else 0


# `railscope dashboards VERB` (registered by telemetry.cli)
VERBS = [
    Verb(
        "build",
        "write dashboards/*.json and provisioning/*/railscope.yaml",
        run_build,
        [
            add_out_arg,
            arg(
                "--dashboards-path",
                default="/var/lib/grafana/dashboards/railscope",
                metavar="PATH",
                help="where Grafana will find the JSON files (written into the dashboard provider)",
            ),
            arg(
                "--single-machine",
                action="store_true",
                help="point the ClickHouse datasource at `railscope serve` (--query-listen) and the "
                "Prometheus datasource at a local Prometheus, instead of Grafana's environment",
            ),
            arg(
                "--query-listen",
                default="127.0.0.1:8123",
                metavar="HOST:PORT",
                help="with --single-machine: serve's ClickHouse HTTP endpoint (default 127.0.0.1:8123)",
            ),
            arg(
                "--database",
                default="railscope",
                help="with --single-machine: the store's database (default railscope)",
            ),
            arg(
                "--prometheus-url",
                default="http://127.0.0.1:9090",
                metavar="URL",
                help="with --single-machine: the local Prometheus (default http://127.0.0.1:9090)",
            ),
        ],
    ),
    Verb(
        "check",
        "run every dashboard query on the store (macros and variables expanded)",
        run_check,
        [
            lambda p: add_range_args(p, since="1h"),
            arg(
                "--var",
                action="append",
                default=[],
                metavar="NAME=VALUE",
                help="template variable value (default cluster from the config, others All; "
                "job defaults to the first job in the store)",
            ),
            arg("--interval", type=int, default=60, metavar="SECONDS", help="$__interval_s"),
            add_store_args,
        ],
        description="Runs each ClickHouse panel query and template-variable query on the store "
        "over --since..--until and prints the rows each returns; exit 1 if any fails.",
    ),
]
