"""Store on the real embedded ClickHouse engine: migrations, DDL, dedup tokens, time-versioning."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

from telemetry.errors import StoreUnavailable
from telemetry.records import GPU_SAMPLE, KINDS, POD_IP_LEASE
from telemetry.store import Store
from telemetry.store.migrations import MIGRATIONS, Context, render_all
from tests.conftest import now_ms


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
        assert ("ReplacingMergeTree(updated_at)" in engine) == bool(k.version_field)
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
    import re

    stmts = render_all(Context("railscope", "prod", {}))
    replicated = {
        m
        for s in stmts
        if "ENGINE = Replicated" in s
        for m in re.findall(r"CREATE TABLE IF NOT EXISTS `railscope`\.`(\w+)_local`", s)
    }
    distributed = {
        m
        for s in stmts
        if "ENGINE = Distributed(`prod`" in s
        for m in re.findall(r"CREATE TABLE IF NOT EXISTS `railscope`\.`(\w+)`", s)
    }
    tables = {k.table for k in KINDS.values()} | {"schema_migrations"}
    assert replicated == tables and distributed == tables
    for stmt in stmts:
        assert "ON CLUSTER `prod`" in stmt
        formatted = store.query_rows("SELECT formatQuery({q:String})", {"q": stmt})[0][0]
        assert formatted.split()[0] in ("CREATE", "ALTER")


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
    assert df.row(0) == (df["ts"][0], "n9", 7, 412.25)
    assert int(df["ts"][0].timestamp() * 1000) == ts
    assert isinstance(store.query_arrow("SELECT 1 AS x"), pa.Table)
    assert time.time() > 0


def test_store_from_the_first_schema_migrates_to_the_current_one(store: Store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A store created by migration 1 of the first schema (git 01dd334) reaches today's tables."""
    import importlib.util
    import sys

    first = Path(__file__).resolve().parent / "first_schema_records.py"
    spec = importlib.util.spec_from_file_location("first_schema_records", first)
    assert spec and spec.loader
    old = importlib.util.module_from_spec(spec)
    sys.modules["first_schema_records"] = old
    spec.loader.exec_module(old)
    from telemetry.store.schema import table_sql

    db = store.database + "_old"
    store.client.command(f"CREATE DATABASE `{db}`")
    try:
        for k in old.KINDS.values():
            for stmt in table_sql(k, db):
                store.client.command(stmt)
        s = Store(store.dsn, database=db)
        from telemetry.store.migrations import bookkeeping_sql

        for stmt in bookkeeping_sql(s._ctx()):
            store.client.command(stmt)
        store.client.command(
            f"INSERT INTO `{db}`.schema_migrations VALUES (1, 'create the record tables', now64(3))"
        )
        applied = [m.version for m in s.migrate()]
        assert applied == [m.version for m in MIGRATIONS if m.version > 1]
        for k in KINDS.values():
            cols = s.query_rows(
                "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {t:String} ORDER BY name",
                {"db": db, "t": k.table},
            )
            assert dict(cols) == {f.name: f.clickhouse_type for f in k.fields}, k.table
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS `{db}`")
