"""The ClickHouse sink retries by error code: the real embedded engine raises TOO_MANY_PARTS (a
parts limit with merges stopped), UNKNOWN_TABLE (a dropped table) and NO_SUCH_COLUMN_IN_TABLE (a
dropped column); codes the engine cannot be made to raise here (a replica without Keeper, memory,
timeouts, syntax, type mismatch) are injected at the client boundary with the server's message.
Rejected batches count against the spool limit and go back in line with `spool replay-rejected`;
a backlog replays a bounded number of batches per cycle."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from telemetry.records import GPU_SAMPLE
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.sinks.clickhouse_codes import PERMANENT, RETRYABLE
from telemetry.store import Store
from telemetry.store.spool import Spool
from tests.conftest import now_ms
from tests.integration.core.test_exactly_once import assert_exact, gpu_batch

ROOT = Path(__file__).parents[3]


class FailsWith:
    """The real client, except that the next insert fails with a server error `code`."""

    def __init__(self, real: Any) -> None:
        self.real, self.code, self.attempts = real, 0, 0

    def raw_insert(self, *a: Any, **kw: Any) -> Any:
        return self._insert(lambda: self.real.raw_insert(*a, **kw))

    def command(self, cmd: str, *a: Any, **kw: Any) -> Any:
        if not cmd.startswith("INSERT"):
            return self.real.command(cmd, *a, **kw)
        # a spool file the embedded engine reads in place (Store.insert_arrow_file)
        return self._insert(lambda: self.real.command(cmd, *a, **kw))

    def _insert(self, write: Any) -> Any:
        self.attempts += 1
        if self.code:
            name = RETRYABLE.get(self.code) or PERMANENT[self.code]
            raise DatabaseError(
                f"Received ClickHouse exception, code: {self.code}, server response: "
                f"Code: {self.code}. DB::Exception: injected. ({name}) (for url http://ch:8123)"
            )
        return write()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def make_sink(
    store: Store, tmp_path: Path, batch_rows: int = 10, **kw: Any
) -> tuple[ClickHouseSink, list[float]]:
    """A sink spooling to tmp_path/spool on a clock the test moves (retries after 1 s)."""
    clock = [0.0]
    sink = ClickHouseSink(store, spool_dir=str(tmp_path / "spool"), batch_rows=batch_rows,
                          retry_initial_seconds=1, clock=lambda: clock[0], **kw)  # fmt: skip
    return sink, clock


def test_too_many_parts_from_the_engine_is_retried_then_stored(
    store: Store, tmp_path: Path
) -> None:
    table = store.table(GPU_SAMPLE)
    store.client.command(f"SYSTEM STOP MERGES {table}")
    store.client.command(f"ALTER TABLE {table} MODIFY SETTING parts_to_throw_insert = 1")
    sink, clock = make_sink(store, tmp_path)
    ts0 = now_ms() - 60_000
    sink.export(gpu_batch(0, 10, ts0))  # the first part
    sink.export(gpu_batch(10, 10, ts0))  # a second part: over the limit
    assert [e.rows for e in sink.spool.entries()] == [10]
    assert sink.stats.errors == {"too_many_parts": 1} and sink.down
    assert not sink.spool.rejected_entries()
    store.client.command(f"ALTER TABLE {table} MODIFY SETTING parts_to_throw_insert = 3000")
    clock[0] += 10
    sink.flush()
    assert sink.spool.entries() == [] and not sink.down
    assert_exact(store, 20)


@pytest.mark.parametrize("code", [242, 241, 159, 252, 209, 62, 53])
def test_each_code_retries_or_rejects_once(store: Store, tmp_path: Path, code: int) -> None:
    """A retryable code keeps the batch in the spool and retries it; a permanent one rejects it
    at the first attempt (the reason names the code)."""
    flaky = FailsWith(store.client)
    sink, clock = make_sink(Store(store.dsn, database=store.database, client=flaky), tmp_path)
    flaky.code = code
    sink.export(gpu_batch(0, 10, now_ms()))
    clock[0] += 10
    sink.flush()
    if code in PERMANENT:
        assert flaky.attempts == 1 and sink.stats.errors == {"rejected": 1}
        (rej,) = sink.spool.rejected_entries()
        assert PERMANENT[code] in rej.path.with_suffix(".reason.txt").read_text()
        return
    assert flaky.attempts == 2 and len(sink.spool.entries()) == 1
    assert sink.stats.errors == {RETRYABLE[code].lower(): 2}
    flaky.code = 0
    clock[0] += 10
    sink.flush()
    assert sink.spool.entries() == [] and not sink.spool.rejected_entries()
    assert_exact(store, 10)


def test_a_new_reason_while_down_is_logged_once_and_the_same_reason_not_again(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Down for one reason (a replica without Keeper: read-only), then another (too many
    parts), then the first again: one line per change, none per retry of the same reason."""
    flaky = FailsWith(store.client)
    sink, clock = make_sink(Store(store.dsn, database=store.database, client=flaky), tmp_path)
    caplog.set_level(logging.ERROR, logger="telemetry.sinks.clickhouse")
    flaky.code = 242
    sink.export(gpu_batch(0, 10, now_ms()))
    for code in (242, 242, 252, 252, 242):
        flaky.code = code
        clock[0] += 100
        sink.flush()
    lines = [r.getMessage() for r in caplog.records if "retrying with backoff" in r.getMessage()]
    assert [(m.split(" (")[0], m.partition("(before: ")[2]) for m in lines] == [
        ("clickhouse table is read only", ""),
        ("clickhouse too many parts", "table is read only)"),
        ("clickhouse table is read only", "too many parts)"),
    ], lines
    assert sink.stats.errors == {"table_is_read_only": 4, "too_many_parts": 2}
    flaky.code = 0
    clock[0] += 100
    sink.flush()
    assert not sink.down and sink.spool.entries() == []
    assert_exact(store, 10)


def test_engine_permanent_errors_reject_and_replay_after_the_fix(
    store: Store, tmp_path: Path
) -> None:
    table = store.table(GPU_SAMPLE)
    sink, clock = make_sink(store, tmp_path)
    ts0 = now_ms() - 60_000
    store.client.command(f"ALTER TABLE {table} DROP COLUMN power_watts")
    sink.export(gpu_batch(0, 10, ts0))
    store.client.command(f"DROP TABLE {table}")
    sink.export(gpu_batch(10, 10, ts0))
    reasons = [e.path.with_suffix(".reason.txt").read_text() for e in sink.spool.rejected_entries()]
    assert len(reasons) == 2 and sink.stats.errors == {"rejected": 2}
    assert reasons[0].startswith("NO_SUCH_COLUMN_IN_TABLE") and reasons[1].startswith(
        "UNKNOWN_TABLE"
    )
    # rejected batches count in the spool's bytes
    assert sink.stats.extra["spool_bytes"] == sink.spool.bytes() > 0
    assert sink.stats.extra["spool_rejected_batches"] == 2
    # the fix (the table migrated again), then replay: each batch stored once
    store.client.command(f"DROP DATABASE {store.database}")
    store.client.command(f"CREATE DATABASE {store.database}")
    store.migrate()
    back = sink.spool.replay_rejected()
    assert len(back) == 2 and not sink.spool.rejected_entries()
    clock[0] += 10
    sink.flush()
    assert_exact(store, 20)
    assert sink.spool.entries() == []


def test_rejected_batches_are_bounded_by_the_spool_limit(store: Store, tmp_path: Path) -> None:
    store.client.command(f"DROP TABLE {store.table(GPU_SAMPLE)}")
    sink, _ = make_sink(store, tmp_path)
    sink.export(gpu_batch(0, 10, now_ms()))
    one = sink.spool.bytes()
    sink.spool.max_bytes = int(one * 2.5)  # room for two
    for k in range(1, 5):
        sink.export(gpu_batch(k * 10, 10, now_ms()))
    assert len(sink.spool.rejected_entries()) == 2
    assert sink.spool.dropped_rows == 30 and sink.spool.bytes() <= sink.spool.max_bytes


def test_backlog_replays_a_bounded_number_of_batches_per_cycle(
    store: Store, tmp_path: Path
) -> None:
    spool = Spool(tmp_path / "spool")
    ts0 = now_ms() - 60_000
    for k in range(40):
        spool.append("gpu_sample", gpu_batch(k * 10, 10, ts0).table)
    spool.close()
    sink, _ = make_sink(store, tmp_path, replay_batches_per_cycle=16)
    sink.flush()
    assert len(sink.spool.entries()) == 24 and sink.stats.sent == 160
    sink.flush()
    sink.flush()
    assert sink.spool.entries() == [] and sink.stats.sent == 400
    assert_exact(store, 400)


def test_cli_spool_status_and_replay_rejected(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool" / "sflow")  # serve's layout: one directory per source
    e = spool.append("gpu_sample", gpu_batch(0, 7, now_ms()).table)
    spool.reject(e, "UNKNOWN_TABLE: test")
    spool.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAILSCOPE_DSN": "chdb:///nonexistent-unused"}

    def cli(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "telemetry.cli", "spool", *args,
                              "--spool-dir", str(tmp_path / "spool")],
                             capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert "0 waiting (0 rows), 1 rejected (7 rows)" in cli("status")
    assert "1 rejected batch(es) (7 rows) back in line" in cli("replay-rejected")
    assert "1 waiting (7 rows), 0 rejected (0 rows)" in cli("status")
    assert "may be stored already" not in cli("status")
    spool = Spool(tmp_path / "spool" / "sflow")
    spool.mark_unconfirmed(spool.entries()[0])
    spool.close()
    assert "; 1 waiting batch(es) may be stored already" in cli("status")
