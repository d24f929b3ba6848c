"""The ClickHouse sink on the real embedded engine: every row stored exactly once through a
million-row run, an outage mid-stream and a writer killed between insert and acknowledgement."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from clickhouse_connect.driver.exceptions import OperationalError

from telemetry.contracts import Batch, ComponentStats
from telemetry.pipeline import Pipeline
from telemetry.records import GPU_SAMPLE
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from tests.conftest import now_ms


def gpu_batch(start: int, n: int, ts0: int) -> Batch:
    """n GPU samples with unique (node, gpu, ts) so duplicates are detectable."""
    i = np.arange(start, start + n)
    t = pa.table(
        {
            "ts": pa.array(ts0 + i // 64, pa.timestamp("ms", tz="UTC")),
            "cluster": pa.array(["c"] * n),
            "node": pa.array([f"n{k:03d}" for k in (i % 64) // 8]),
            "gpu": pa.array((i % 8).astype(np.uint16)),
            "up": pa.array(np.ones(n, np.uint8)),
            "power_watts": pa.array(i.astype(np.float64)),
        }
    )
    return Batch.of(GPU_SAMPLE, t)


class ListSource:
    name = "list"

    def __init__(self, batches: list[Batch]) -> None:
        self.batches = batches
        self.stats = ComponentStats("source:list")

    def collect(self) -> list[Batch]:
        out, self.batches = self.batches, []
        return out


def assert_exact(store: Store, n: int) -> None:
    total, distinct = store.query_rows(
        f"SELECT count(), uniqExact(node, gpu, ts) FROM {store.table(GPU_SAMPLE)}"
    )[0]
    assert (total, distinct) == (n, n)


def test_million_gpu_samples_stored_exactly(store: Store, tmp_path: Path) -> None:
    ts0 = now_ms() - 60_000
    batches = [gpu_batch(k * 50_000, 50_000, ts0) for k in range(20)]
    sink = ClickHouseSink(store, spool_dir=str(tmp_path / "spool"), batch_rows=250_000)
    p = Pipeline([ListSource(batches)], [sink])
    p.run_once()
    p.close()
    assert_exact(store, 1_000_000)
    assert sink.spool.entries() == []
    assert sink.stats.received == sink.stats.sent == 1_000_000
    assert sink.stats.extra["spool_bytes"] == 0


class FlakyClient:
    """A fault-injecting transport around the real client: while `down`, inserts fail the way an
    unreachable server fails (OperationalError); `fail_after_write` simulates a lost ack."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.down = False
        self.lost_acks = 0
        self.attempts = 0

    def raw_insert(self, *a: Any, **kw: Any) -> Any:
        return self._insert(lambda: self.real.raw_insert(*a, **kw))

    def command(self, cmd: str, *a: Any, **kw: Any) -> Any:
        if not cmd.startswith("INSERT"):
            return self.real.command(cmd, *a, **kw)
        # a spool file the embedded engine reads in place (Store.insert_arrow_file)
        return self._insert(lambda: self.real.command(cmd, *a, **kw))

    def _insert(self, write: Any) -> Any:
        self.attempts += 1
        if self.down:
            raise OperationalError(
                "Error HTTPConnectionPool(host='ch', port=8123): Connection refused"
            )
        r = write()
        if self.lost_acks:
            self.lost_acks -= 1  # written, but the reply never arrives
            raise OperationalError("Error reading response: connection reset by peer")
        return r

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_outage_mid_stream_loses_nothing_and_duplicates_nothing(
    store: Store, tmp_path: Path
) -> None:
    flaky = FlakyClient(store.client)
    s = Store(store.dsn, database=store.database, client=flaky)
    clock = [0.0]
    sink = ClickHouseSink(
        s,
        spool_dir=str(tmp_path / "spool"),
        batch_rows=10_000,
        batch_seconds=1,
        retry_initial_seconds=1,
        retry_max_seconds=4,
        clock=lambda: clock[0],
    )
    ts0 = now_ms() - 60_000
    offered = 0
    for k in range(20):  # 200,000 rows in 20 batches of 10,000
        if k == 5:
            flaky.down = True
        if k == 12:
            flaky.down = False
            flaky.lost_acks = 1  # the first insert after recovery is written but not acknowledged
        sink.export(gpu_batch(offered, 10_000, ts0))
        offered += 10_000
        clock[0] += 5  # past any backoff: each batch retries the spool
        sink.flush()
        if 5 <= k < 12:
            assert sink.down and len(sink.spool.entries()) == k - 4
    clock[0] += 100
    sink.flush(force=True)
    assert offered == 200_000
    assert_exact(store, 200_000)
    assert sink.spool.entries() == []
    assert sink.stats.errors.get("unreachable", 0) >= 7
    assert not sink.down


def test_backoff_grows_and_caps(store: Store, tmp_path: Path) -> None:
    flaky = FlakyClient(store.client)
    flaky.down = True
    clock = [0.0]
    sink = ClickHouseSink(
        Store(store.dsn, database=store.database, client=flaky),
        spool_dir=str(tmp_path / "s"),
        batch_rows=1,
        retry_initial_seconds=1,
        retry_max_seconds=8,
        clock=lambda: clock[0],
    )
    sink.export(gpu_batch(0, 1, now_ms()))
    attempts = [flaky.attempts]
    for _ in range(40):
        clock[0] += 0.5
        sink.flush()
        attempts.append(flaky.attempts)
    gaps = np.diff([i for i in range(1, len(attempts)) if attempts[i] != attempts[i - 1]])
    assert gaps.max() <= 16 and gaps[-1] >= gaps[0]  # half-second ticks: cap 8 s (+jitter 0.5-1x)
    assert len(sink.spool.entries()) == 1


def test_rejected_batch_is_kept_aside_not_retried_forever(store: Store, tmp_path: Path) -> None:
    sink = ClickHouseSink(store, spool_dir=str(tmp_path / "spool"), batch_rows=1)
    store.client.command(f"DROP TABLE {store.table(GPU_SAMPLE)}")
    sink.export(gpu_batch(0, 5, now_ms()))
    assert sink.spool.entries() == []
    rejected = list((tmp_path / "spool" / "rejected").glob("*.arrow"))
    assert len(rejected) == 1 and sink.stats.errors == {"rejected": 1}
    assert (
        "UNKNOWN_TABLE" in rejected[0].with_suffix(".reason.txt").read_text()
        or "doesn't exist" in rejected[0].with_suffix(".reason.txt").read_text()
    )


WRITER = textwrap.dedent("""
    import os, sys, numpy as np, pyarrow as pa
    sys.path.insert(0, {root!r})
    from telemetry.store import Store
    from telemetry.sinks.clickhouse import ClickHouseSink
    from tests.integration.core.test_exactly_once import gpu_batch
    mode, n_batches = sys.argv[1], int(sys.argv[2])
    store = Store("chdb://{path}", database="killtest")
    if mode == "write":
        store.migrate()
        class DiesAfterInsert(Store):
            calls = 0
            def insert_arrow_file(self, kind, path, *, token=None):
                n = super().insert_arrow_file(kind, path, token=token)
                DiesAfterInsert.calls += 1
                if DiesAfterInsert.calls == 3:
                    os._exit(9)  # killed after the batch is written, before it is acknowledged
                return n
        store = DiesAfterInsert("chdb://{path}", database="killtest")
        sink = ClickHouseSink(store, spool_dir={spool!r}, batch_rows=10_000)
        for k in range(n_batches):
            sink.export(gpu_batch(k * 10_000, 10_000, {ts0}))
        sink.close()
    elif mode == "restart":
        sink = ClickHouseSink(store, spool_dir={spool!r}, batch_rows=10_000)
        sink.flush(force=True)
        print(len(sink.spool.entries()))
    total, distinct = store.query_rows("SELECT count(), uniqExact(node, gpu, ts) FROM killtest.gpu_samples")[0]
    print(total, distinct)
""")


def test_writer_killed_between_insert_and_ack(tmp_path: Path) -> None:
    root = str(Path(__file__).resolve().parents[3])
    script = tmp_path / "writer.py"
    script.write_text(
        WRITER.format(
            root=root, path=tmp_path / "store", spool=str(tmp_path / "spool"), ts0=now_ms() - 60_000
        )
    )
    # The writer dies on its 3rd insert: batches 1-2 acknowledged, 3 written but unacknowledged.
    r = subprocess.run(
        [sys.executable, str(script), "write", "8"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 9, r.stderr
    spooled = sorted(p.name for p in (tmp_path / "spool").glob("*.arrow"))
    assert len(spooled) == 1  # batch 3 is still in the spool: its insert was never acknowledged
    # Restart: the spool replays batch 3 with its original token; ClickHouse drops the duplicate.
    r = subprocess.run(
        [sys.executable, str(script), "restart", "0"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    left, counts = r.stdout.strip().splitlines()
    assert left == "0"
    assert counts == "30000 30000"


def test_closed_port_spools_then_replays_when_target_returns(
    store: Store, tmp_path: Path, free_port: int
) -> None:
    """A real server DSN on a closed port: the real client's failure is classified transient, rows
    wait in the spool; when the target answers again they are stored once."""
    target = Store(f"http://default@127.0.0.1:{free_port}/{store.database}", connect_timeout=1)
    sink = ClickHouseSink(
        target, spool_dir=str(tmp_path / "spool"), batch_rows=1_000, retry_initial_seconds=0.01
    )
    ts0 = now_ms() - 60_000
    for k in range(5):
        sink.export(gpu_batch(k * 1_000, 1_000, ts0))
        sink.flush(force=True)
    assert len(sink.spool.entries()) == 5 and sink.down
    assert "rejected" not in sink.stats.errors and sink.stats.errors["unreachable"] >= 5
    target._client = store.client  # the target is back (same database, reachable client)
    sink.flush(force=True)
    assert_exact(store, 5_000)
    assert sink.spool.entries() == [] and not sink.down


def test_pipeline_stores_its_own_component_stats(store: Store, tmp_path: Path) -> None:
    sink = ClickHouseSink(store, spool_dir=str(tmp_path / "spool"), batch_rows=10)
    p = Pipeline([ListSource([gpu_batch(0, 25, now_ms())])], [sink], report_host="h1")
    p.run_once()
    p.close()
    rows = dict(
        store.query_rows(
            "SELECT component, sent_total FROM {db:Identifier}.component_stats WHERE host = 'h1'",
            {"db": store.database},
        )
    )
    assert rows["source:list"] == 0  # ListSource does not count; BaseSource-based sources do
    assert (
        rows["sink:clickhouse"] == 25
    )  # the 25-row batch passed batch_rows and went in before the report
