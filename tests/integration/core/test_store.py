"""Store on the real embedded ClickHouse engine: migrations, DDL, dedup tokens, time-versioning."""

from __future__ import annotations

import pytest

from telemetry.errors import StoreUnavailable
from telemetry.records import GPU_SAMPLE, KINDS, POD_IP_LEASE
from telemetry.store import Store, time_range
from telemetry.store.migrations import (
    MIGRATION_12_ROLLUPS,
    MIGRATION_14_TABLES,
    MIGRATIONS,
    render_all,
)
from telemetry.store.migrations.loader import Context
from tests.conftest import now_ms

# the rollups written by the correlation engine, not by a view (migration 13 dropped theirs)
ENGINE_WRITES = {"job_port_intervals"}
# the engine's own tables that are no record kind: the lease index (migration 14)
ENGINE_TABLES = {t.name for t in MIGRATION_14_TABLES}


def test_migrate_twice_changes_nothing(store: Store) -> None:
    # the fixture already migrated once
    assert [v for v, _, _ in store.applied_versions()] == [m.version for m in MIGRATIONS]
    before = store.query_rows(
        "SELECT name, metadata_modification_time FROM system.tables WHERE database = {db:String} ORDER BY name",
        {"db": store.database},
    )
    assert store.migrate() == []
    after = store.query_rows(
        "SELECT name, metadata_modification_time FROM system.tables WHERE database = {db:String} ORDER BY name",
        {"db": store.database},
    )
    assert before == after
    assert store.pending() == []


def test_tables_match_record_definitions(store: Store) -> None:
    for k in KINDS.values():
        cols = store.query_rows(
            "SELECT name, type, compression_codec FROM system.columns WHERE database = {db:String} AND table = {t:String} ORDER BY position",
            {"db": store.database, "t": k.table},
        )
        assert [c[0] for c in cols] == k.columns, k.table
        assert [c[1] for c in cols] == [f.clickhouse_type for f in k.fields], k.table
        engine = store.query_rows(
            "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = {t:String}",
            {"db": store.database, "t": k.table},
        )[0][0]
        assert engine.startswith(
            f"ReplacingMergeTree({k.version_field})" if k.version_field else "MergeTree"
        ), k.table
        if k.ttl_days:
            assert f"toIntervalDay({k.ttl_days})" in engine


def test_ttl_override_is_reconciled_once(store: Store) -> None:
    s2 = Store(store.dsn, database=store.database, ttl_overrides={"flow_samples": 2})
    s2.migrate()
    q = "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = 'flow_samples'"
    assert "toIntervalDay(2)" in store.query_rows(q, {"db": store.database})[0][0]
    t = store.query_rows(
        "SELECT metadata_modification_time FROM system.tables WHERE database = {db:String} AND name = 'flow_samples'",
        {"db": store.database},
    )
    s2.migrate()
    assert t == store.query_rows(
        "SELECT metadata_modification_time FROM system.tables WHERE database = {db:String} AND name = 'flow_samples'",
        {"db": store.database},
    )


def test_cluster_ddl_parses_with_clickhouse_format_query(store: Store) -> None:
    """Played in order, the cluster DDL ends with a ReplicatedMergeTree `*_local` table and a
    Distributed table over it for every kind: renamed tables get their Distributed table
    recreated over the renamed replicas."""
    import re

    stmts = render_all(Context("railscope", "prod", {}))
    local: set[str] = set()
    distributed: dict[str, str] = {}  # table -> the local table it reads
    views: dict[str, tuple[str, str]] = {}  # view -> (local table it reads, local table it writes)
    for stmt in stmts:
        if m := re.match(
            r"INSERT INTO `railscope`\.`(\w+)`\nSELECT .*\sFROM `railscope`\.`(\w+)`\n", stmt, re.S
        ):
            # a rollup's backfill: data, run once through the Distributed tables
            assert m[1] in distributed and m[2] in distributed, stmt
            formatted = store.query_rows("SELECT formatQuery({q:String})", {"q": stmt})[0][0]
            assert formatted.startswith("INSERT INTO")
            continue
        assert "ON CLUSTER `prod`" in stmt, stmt
        if m := re.match(
            r"CREATE MATERIALIZED VIEW IF NOT EXISTS `railscope`\.`(\w+)` ON CLUSTER `prod` "
            r"TO `railscope`\.`(\w+)_local`\nDEFINER = CURRENT_USER SQL SECURITY DEFINER\nAS SELECT .*\sFROM `railscope`\.`(\w+)_local`\n",
            stmt,
            re.S,
        ):
            assert m[2] in local and m[3] in local, stmt  # each shard rolls up its own rows
            views[m[1]] = (m[3], m[2])
        elif m := re.match(r"CREATE TABLE IF NOT EXISTS `railscope`\.`(\w+)_local`", stmt):
            assert "ENGINE = Replicated" in stmt
            local.add(m[1])
        elif m := re.match(r"CREATE TABLE IF NOT EXISTS `railscope`\.`(\w+)` ON CLUSTER", stmt):
            (target,) = re.findall(
                r"ENGINE = Distributed\(`prod`, `railscope`, `(\w+)_local`", stmt
            )
            distributed[m[1]] = target
        elif m := re.match(
            r"RENAME TABLE `railscope`\.`(\w+)_local` TO `railscope`\.`(\w+)_local`", stmt
        ):
            local.remove(m[1])
            local.add(m[2])
        elif m := re.match(r"DROP TABLE IF EXISTS `railscope`\.`(\w+)`", stmt):
            del distributed[m[1]]
        elif m := re.match(r"DROP VIEW IF EXISTS `railscope`\.`(\w+)` ON CLUSTER", stmt):
            del views[m[1]]  # migration 13: the engine writes that rollup itself
        formatted = store.query_rows("SELECT formatQuery({q:String})", {"q": stmt})[0][0]
        assert formatted.split()[0] in ("CREATE", "ALTER", "RENAME", "DROP")
    rollups = {r.table.name: r.source for r in MIGRATION_12_ROLLUPS}
    tables = {k.table for k in KINDS.values()} | {"schema_migrations"} | set(rollups)
    tables |= ENGINE_TABLES
    assert local == tables
    assert distributed == {t: t for t in tables}
    assert views == {f"{t}_mv": (src, t) for t, src in rollups.items() if t not in ENGINE_WRITES}
    for t in rollups:  # the rollups' engines, replicated like every other table
        (stmt,) = [
            s for s in stmts if s.startswith(f"CREATE TABLE IF NOT EXISTS `railscope`.`{t}_local`")
        ]
        assert re.search(
            r"ENGINE = Replicated(Aggregating|Summing)MergeTree\('/clickhouse/tables/\{shard\}/railscope/"
            + t
            + r"_local', '\{replica\}'\)",
            stmt,
        ), stmt


def test_dedup_token_makes_retry_idempotent(store: Store) -> None:
    t = GPU_SAMPLE.to_arrow(
        [{"ts": now_ms() + i, "node": "n", "gpu": 0, "up": 1} for i in range(100)]
    )
    store.insert(GPU_SAMPLE, t, token="batch-1")
    store.insert(GPU_SAMPLE, t, token="batch-1")  # a retry of the same batch
    assert store.count(GPU_SAMPLE) == 100
    store.insert(GPU_SAMPLE, t, token="batch-2")  # identical content, different batch: kept
    assert store.count(GPU_SAMPLE) == 200


def test_null_values_stay_null(store: Store) -> None:
    t = GPU_SAMPLE.to_arrow([{"ts": now_ms(), "node": "n", "gpu": 0, "up": 1, "power_watts": None}])
    store.insert(GPU_SAMPLE, t)
    assert store.query_rows(f"SELECT power_watts IS NULL FROM {store.table(GPU_SAMPLE)}") == [(1,)]


def test_ip_lease_history_asof(store: Store) -> None:
    """Two pods holding one IP one after the other: ASOF resolves each lease, nothing in the gap."""
    t0 = now_ms() - 3_600_000
    rows = [
        {
            "ip": "10.0.0.7",
            "namespace": "a",
            "pod": "p1",
            "node": "n1",
            "primary": True,
            "valid_from": t0,
            "valid_to": t0 + 600_000,
            "updated_at": t0 + 600_000,
        },
        {
            "ip": "10.0.0.7",
            "namespace": "b",
            "pod": "p2",
            "node": "n2",
            "primary": True,
            "valid_from": t0 + 900_000,
            "valid_to": None,
            "updated_at": t0 + 900_000,
        },
    ]
    store.insert(POD_IP_LEASE, POD_IP_LEASE.to_arrow(rows))
    q = f"""
        SELECT q.t, l.pod FROM (SELECT '10.0.0.7' AS ip, fromUnixTimestamp64Milli(arrayJoin({{ts:Array(Int64)}}), 'UTC') AS t) AS q
        ASOF LEFT JOIN (SELECT * FROM {store.table(POD_IP_LEASE)} FINAL) AS l ON q.ip = l.ip AND q.t >= l.valid_from
        WHERE l.valid_to IS NULL OR q.t < l.valid_to
        ORDER BY q.t
    """
    got = store.query_rows(q, {"ts": [t0 + 60_000, t0 + 700_000, t0 + 1_000_000]})
    pods = [p for _, p in got]
    assert pods[0] == "p1" and pods[-1] == "p2"
    assert len(got) == 2  # the moment in the gap resolves to nobody


def test_unreachable_server_is_one_line(free_port: int) -> None:
    s = Store(f"http://default@127.0.0.1:{free_port}/railscope", connect_timeout=1)
    with pytest.raises(StoreUnavailable) as e:
        s.ping()
    msg = str(e.value)
    assert f"127.0.0.1:{free_port}" in msg and "unreachable" in msg and "\n" not in msg


def test_second_embedded_path_is_refused(store: Store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    other = Store(f"chdb://{tmp_path}/other")
    with pytest.raises(StoreUnavailable, match="one data path per process"):
        other.ping()


def test_arrow_table_round_trip(store: Store) -> None:
    ts = now_ms()
    store.insert(
        GPU_SAMPLE,
        GPU_SAMPLE.to_arrow([{"ts": ts, "node": "n9", "gpu": 7, "up": 1, "power_watts": 412.25}]),
    )
    df = store.query_df(f"SELECT ts, node, gpu, power_watts FROM {store.table(GPU_SAMPLE)}")
    assert df.columns == ["ts", "node", "gpu", "power_watts"]
    assert df.row(0)[1:] == ("n9", 7, 412.25)
    assert int(df["ts"][0].timestamp() * 1000) == ts  # milliseconds survive the round trip
    arrow = store.query_arrow(f"SELECT node, gpu FROM {store.table(GPU_SAMPLE)}")
    assert arrow.to_pylist() == [{"node": "n9", "gpu": 7}]


def _columns(store: Store, db: str, table: str) -> list[tuple[str, str]]:
    return [
        (str(n), str(t))
        for n, t in store.query_rows(
            "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {t:String} ORDER BY position",
            {"db": db, "t": table},
        )
    ]


def test_store_from_the_first_schema_migrates_to_the_current_one(store: Store) -> None:
    """A store created by migration 1 alone (the first schema, frozen in the migrations module),
    with rows in tables that later migrations rename, reaches today's tables: same columns in
    the record kinds' order, rows kept under the new names, the old names gone."""
    from telemetry.store.migrations import MIGRATION_4_RENAMES, bookkeeping_sql

    db = store.database + "_old"
    s = Store(store.dsn, database=db)
    try:
        for stmt in bookkeeping_sql(s._ctx()) + MIGRATIONS[0].statements(s._ctx()):
            store.client.command(stmt)
        store.client.command(
            f"INSERT INTO `{db}`.schema_migrations VALUES (1, 'create the record tables', now64(3))"
        )
        first = {
            r[0]
            for r in store.query_rows(
                "SELECT name FROM system.tables WHERE database = {db:String}", {"db": db}
            )
        }
        assert "inv_pods" in first and "flows_attributed" not in first  # migration 2 adds it
        t = now_ms()
        store.client.command(
            f"INSERT INTO `{db}`.inv_pods (cluster, namespace, pod, node, valid_from, updated_at) "
            f"VALUES ('c', 'ns', 'p1', 'n1', fromUnixTimestamp64Milli({t}), fromUnixTimestamp64Milli({t}))"
        )
        store.client.command(
            f"INSERT INTO `{db}`.gpu_nic_affinity (ts, cluster, node, gpu, nic, direct_nic) "
            f"VALUES (fromUnixTimestamp64Milli({t}), 'c', 'n1', 3, 'mlx5_3', 1)"
        )
        applied = [m.version for m in s.migrate()]
        assert applied == [m.version for m in MIGRATIONS if m.version > 1]
        tables = {
            r[0]
            for r in store.query_rows(
                "SELECT name FROM system.tables WHERE database = {db:String}", {"db": db}
            )
        }
        rollups = {r.table.name for r in MIGRATION_12_ROLLUPS}
        assert (
            tables
            == {k.table for k in KINDS.values()}
            | {"schema_migrations"}
            | rollups
            | {f"{r}_mv" for r in rollups - ENGINE_WRITES}
            | ENGINE_TABLES
        )
        assert not tables & set(MIGRATION_4_RENAMES)
        for k in KINDS.values():
            assert _columns(store, db, k.table) == [
                (f.name, f.clickhouse_type) for f in k.fields
            ], k.table
        assert s.query_rows(f"SELECT namespace, pod, node FROM {s.table('pod', final=True)}") == [
            ("ns", "p1", "n1")
        ]
        assert s.query_rows(f"SELECT node, gpu, nic FROM {s.table('gpu_nic_affinity')}") == [
            ("n1", 3, "mlx5_3")
        ]
        assert s.migrate() == []  # idempotent on a migrated store too
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS `{db}`")


def test_fresh_store_tables_are_todays_kinds_in_order(store: Store) -> None:
    """Migrations 1..N on an empty store give every kind's columns in the kind's field order."""
    for k in KINDS.values():
        assert _columns(store, store.database, k.table) == [
            (f.name, f.clickhouse_type) for f in k.fields
        ], k.table


def test_a_run_of_column_changes_is_one_alter_per_table() -> None:
    """alter_columns groups consecutive changes of one verb on one table into one ALTER (one
    metadata change, one DDL-queue entry in cluster mode); a change of table or verb starts a
    new statement, so the order of the changes is kept."""
    from telemetry.store.migrations.loader import alter_columns

    step = alter_columns(
        lambda: (
            ("t", "ADD", "`a` UInt8"),
            ("t", "ADD", "`b` UInt8"),
            ("t", "DROP", "`c`"),
            ("u", "ADD", "`d` UInt8"),
            ("t", "ADD", "`e` UInt8"),
        )
    )
    assert step(Context("db", None, {})) == [
        "ALTER TABLE `db`.`t` ADD COLUMN IF NOT EXISTS `a` UInt8, ADD COLUMN IF NOT EXISTS `b` UInt8",
        "ALTER TABLE `db`.`t` DROP COLUMN IF EXISTS `c`",
        "ALTER TABLE `db`.`u` ADD COLUMN IF NOT EXISTS `d` UInt8",
        "ALTER TABLE `db`.`t` ADD COLUMN IF NOT EXISTS `e` UInt8",
    ]
    # migration 6 adds ~100 columns to two tables: two statements, not one per column
    six = next(m for m in MIGRATIONS if m.version == 6).statements(Context("db", None, {}))
    assert len(six) == 2, [s[:60] for s in six]


def test_table_helper_quotes_and_renders_final_for_versioned_kinds(store: Store) -> None:
    db = f"`{store.database}`"
    assert store.table("attributed_flow") == f"{db}.`attributed_flows`"
    assert store.table("gpu_sample", final=True) == f"{db}.`gpu_samples`"  # not versioned
    assert store.table("pod", final=True) == f"{db}.`pods` FINAL"
    assert time_range("pod", "a", "b") == (
        "`valid_from` >= {a:DateTime64(3, 'UTC')} AND `valid_from` < {b:DateTime64(3, 'UTC')}"
    )
    assert time_range("finding", None, "b") == "`first_seen` < {b:DateTime64(3, 'UTC')}"
