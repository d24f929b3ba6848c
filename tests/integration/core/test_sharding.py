"""Cluster mode shards by a stable key: every Distributed table ends sharded by cityHash64 of its
entity columns (a subset of the local table's sorting key, so ReplacingMergeTree rows of one
key meet on one shard), the DDL is the same in every process, and it executes on the real
engine (a Distributed table over `*_local` tables, a two-shard cluster from a config file).

No ClickHouse server runs here, and the embedded engine sends a Distributed insert over the
network even to 127.0.0.1, so rows are not inserted through the Distributed tables: the shard
a row goes to (key % 2 with equal weights) is computed by the engine from the same expression.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from telemetry.records import KINDS
from telemetry.store.migrations import (
    MIGRATION_7_SHARD_KEYS,
    MIGRATION_12_ROLLUPS,
    MIGRATION_14_TABLES,
    render_all,
)
from telemetry.store.migrations.loader import Context
from telemetry.store.schema import entity_columns

ROOT = Path(__file__).parents[3]
DIST = re.compile(
    r"CREATE (?:OR REPLACE TABLE|TABLE IF NOT EXISTS) `railscope`\.`(\w+)` ON CLUSTER `prod` "
    r"AS `railscope`\.`\w+_local`\s+ENGINE = Distributed\(`prod`, `railscope`, `\w+_local`, (.+)\)$"
)


def final_keys(stmts: list[str]) -> dict[str, str]:
    """Played in order: each Distributed table's sharding key at the end."""
    keys: dict[str, str] = {}
    for s in stmts:
        if m := DIST.match(s):
            keys[m[1]] = m[2]
        elif m := re.match(r"DROP TABLE IF EXISTS `railscope`\.`(\w+)`", s):
            keys.pop(m[1], None)
    return keys


def keys_of(cols: tuple[str, ...]) -> str:
    return "cityHash64(" + ", ".join(f"`{c}`" for c in cols) + ")"


def test_every_distributed_table_ends_sharded_by_its_entity() -> None:
    keys = final_keys(render_all(Context("railscope", "prod", {})))
    for k in KINDS.values():
        cols = entity_columns(k)
        assert keys.pop(k.table) == keys_of(cols)
        assert cols and set(cols) <= set(k.order_by) and "cluster" in cols, k.table
        # the frozen key of migration 7 is today's (a changed key needs a new migration); a kind
        # created by a later migration carries its key in its own TableDef (the render above)
        assert MIGRATION_7_SHARD_KEYS.get(k.table, cols) == cols, k.table
    # a rollup is sharded by its source's entity: the rows its view writes on a shard are the
    # ones the source's Distributed table sent there, and a backfill sends them there too
    for r in MIGRATION_12_ROLLUPS:
        source = next(k for k in KINDS.values() if k.table == r.source)
        assert keys.pop(r.table.name) == keys_of(entity_columns(source)), r.table.name
    # the lease index: one row per cluster, on the shard of its cluster
    for t in MIGRATION_14_TABLES:
        assert keys.pop(t.name) == keys_of(("cluster",)), t.name
    assert keys == {"schema_migrations": "version"}
    assert "rand()" not in " ".join(keys.values())
    # a single server gets no Distributed tables and migration 7 renders nothing
    assert final_keys(render_all(Context("railscope", None, {}))) == {}


def test_cluster_ddl_is_the_same_in_every_process() -> None:
    code = "from telemetry.store.migrations import Context, render_all; import json; print(json.dumps(render_all(Context('railscope', 'prod', {}))))"
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        res = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
        )
        assert res.returncode == 0, res.stderr
        outs.append(json.loads(res.stdout))
    assert outs[0] == outs[1] == render_all(Context("railscope", "prod", {}))


RUN = textwrap.dedent("""
    import dataclasses, json, re, sys
    import chdb
    from telemetry.records import KINDS
    from telemetry.store.migrations import MIGRATIONS, Context
    from telemetry.store.schema import TableDef, create_table_sql
    conn = chdb.connect(f"file:{sys.argv[1]}?config-file={sys.argv[2]}")
    cur = conn.cursor()
    def run(q):
        cur.execute(q)
        return cur.fetchall()
    run("CREATE DATABASE IF NOT EXISTS railscope")
    for k in KINDS.values():  # the replicas' tables, as plain MergeTree (no Keeper here)
        local = dataclasses.replace(TableDef.of(k), name=k.table + "_local")
        for s in create_table_sql(local, "railscope"):
            run(s)
    (m7,) = [m for m in MIGRATIONS if m.version == 7]
    for s in m7.statements(Context("railscope", "prod", {})):
        run(s.replace(" ON CLUSTER `prod`", ""))  # ON CLUSTER needs Keeper's DDL queue
    engines = dict(run("SELECT name, engine_full FROM system.tables WHERE database = 'railscope' AND engine = 'Distributed'"))
    # where a retried batch of GPU samples goes: the shard of each row, as Distributed picks it
    shards = run("SELECT node, gpu, uniqExact(shard), any(shard) FROM "
                 "(SELECT cityHash64(cluster, node, gpu) % 2 AS shard, * FROM "
                 "(SELECT 'c1' AS cluster, concat('n', toString(number % 64)) AS node, "
                 "toUInt8(intDiv(number, 64) % 8) AS gpu FROM numbers(100000))) "
                 "GROUP BY node, gpu ORDER BY node, gpu")
    print(json.dumps({"engines": engines, "shards": [list(r) for r in shards]}))
""")

CLUSTER = """<clickhouse><remote_servers><prod>
  <shard><replica><host>clickhouse-shard0</host><port>9000</port></replica></shard>
  <shard><replica><host>clickhouse-shard1</host><port>9000</port></replica></shard>
</prod></remote_servers></clickhouse>"""


def test_resharding_executes_on_the_engine_and_routes_an_entity_to_one_shard(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.xml").write_text(CLUSTER)
    runs = []
    for i in range(2):  # two processes, two stores: the routing is the same
        res = subprocess.run(
            [sys.executable, "-c", RUN, str(tmp_path / f"s{i}"), str(tmp_path / "config.xml")],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert res.returncode == 0, res.stderr[-3000:]
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    engines = runs[0]["engines"]
    assert set(engines) == set(MIGRATION_7_SHARD_KEYS)  # the tables that existed at 7
    assert "cityHash64(cluster, node, gpu)" in engines["gpu_samples"].replace("`", "")
    shards = runs[0]["shards"]
    assert len(shards) == 512 and {n for _, _, n, _ in shards} == {1}  # one shard per GPU
    assert {s for _, _, _, s in shards} == {0, 1}  # and both shards get some
    assert runs[0] == runs[1]
