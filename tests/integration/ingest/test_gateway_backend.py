"""The gateway as one of serve's backends: it acts on the guard's plan (an INSERT's target, a
read's root kind, the format a statement names), never on the statement's text, and a user's
limits and settings bound the reads it passes to the store, for that request only."""

from __future__ import annotations

from pathlib import Path

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from bench.ingest import gpu_table
from telemetry.store import Store
from tests.conftest import now_ms
from tests.integration.ingest.test_gateway import Gw, gpu_keys


def test_an_insert_is_read_from_the_plan(store: Store, tmp_path: Path) -> None:
    """A comment ahead of the INSERT and a column list: the store's parse finds the target, as a
    ClickHouse server would (the gateway's old pattern refused it as a syntax error)."""
    import io

    import pyarrow.ipc as ipc

    g = Gw(store, tmp_path)
    try:
        table = gpu_table(6, now_ms() - 60_000)
        buf = io.BytesIO()
        with ipc.new_stream(buf, table.schema) as w:
            w.write_table(table)
        remote = Store(f"http://{g.host}:{g.port}/{store.database}")
        cols = ", ".join(f"`{c}`" for c in table.column_names)
        remote.client.raw_insert(
            f"/* agent */ `{store.database}`.`gpu_samples` ({cols})",
            None,
            buf.getvalue(),
            fmt="ArrowStream",
        )
        g.flush()
        assert gpu_keys(store) == (6, 6)
        # what reads no rows of the store, or changes the session, is not passed through
        for sql in ("EXPLAIN SELECT 1", "SET max_threads = 1", f"USE `{store.database}`"):
            with pytest.raises(DatabaseError, match="NOT_IMPLEMENTED"):
                remote.client.command(sql)
        # a read naming its own format gets it from the store
        body = remote.client.raw_query("SELECT 1 AS one FORMAT JSONEachRow")
        assert body == b'{"one":1}\n'
    finally:
        g.svc.stop()


def test_a_users_limits_bound_its_reads_for_that_request_only(store: Store, tmp_path: Path) -> None:
    users = [
        {"name": "small", "password": "p", "limits": {"max_result_rows": 5000}},
        {"name": "big", "password": "q"},
    ]
    g = Gw(store, tmp_path, users=users)
    try:
        small = Store(f"http://small:p@{g.host}:{g.port}/{store.database}")
        big = Store(f"http://big:q@{g.host}:{g.port}/{store.database}")
        sql = "SELECT number FROM numbers(6000)"
        with pytest.raises(DatabaseError, match="TOO_MANY_ROWS_OR_BYTES"):
            small.client.raw_query(sql)
        assert len(small.client.raw_query("SELECT number FROM numbers(5000)").split()) == 5000
        # the store's connection keeps nothing of that request: the next user, and the store
        # itself, read all 6000 rows
        assert len(big.client.raw_query(sql).split()) == 6000
        assert len(store.query_rows(sql)) == 6000
        # a user's own setting, judged by serve's rules (lower only), reaches the store too
        with pytest.raises(DatabaseError, match="TOO_MANY_ROWS_OR_BYTES"):
            big.client.raw_query(sql, settings={"max_result_rows": 3000})
        with pytest.raises(DatabaseError, match="SETTING_CONSTRAINT_VIOLATION"):
            small.client.raw_query(sql, settings={"max_result_rows": 9000})
    finally:
        g.svc.stop()
