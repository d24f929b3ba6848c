"""Spool durability: one process per spool directory (a second gets one line, exit 2), and a spool
on a full filesystem (a real 512 KiB tmpfs) never stops the pipeline or loses rows uncounted:
rows stored = rows produced - rows counted as dropped, none twice."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from telemetry.pipeline import Pipeline
from telemetry.store import Store
from telemetry.store.spool import Spool
from tests.conftest import now_ms
from tests.integration.core.test_exactly_once import (
    FlakyClient,
    ListSource,
    assert_exact,
    gpu_batch,
)
from tests.integration.security.test_retry_codes import make_sink

ROOT = Path(__file__).parents[3]


def test_a_second_process_on_the_same_spool_gets_one_line(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    cfg = tmp_path / "railscope.yaml"
    cfg.write_text(
        f"store: {{dsn: 'chdb://{tmp_path / 'db'}'}}\nsink: {{spool_dir: '{tmp_path / 'spool'}'}}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "telemetry.cli", "--config", str(cfg), "sflow",
         "--bind", "127.0.0.1:0", "--no-metrics"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    spool.close()
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[-1] == (
        f"railscope: error: spool {tmp_path / 'spool'} is in use by another railscope process "
        f"(pid {os.getpid()}): give each process its own sink.spool_dir"
    ), out.stderr
    assert "Traceback" not in out.stderr
    Spool(tmp_path / "spool").close()  # released: the next owner gets it


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)],
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_spool_disk_keeps_the_pipeline_running_and_counts_the_loss(
    store: Store, tiny_fs: Path
) -> None:
    flaky = FlakyClient(store.client)
    flaky.down = True  # ClickHouse away: everything goes to the spool until the disk is full
    sink, clock = make_sink(
        Store(store.dsn, database=store.database, client=flaky),
        tiny_fs,
        batch_rows=500,  # ~150 KB of Arrow IPC: three fit on the 512 KiB disk
        memory_max_rows=1_500,
    )
    ts0 = now_ms() - 60_000
    source = ListSource([])
    pipe = Pipeline([source], [sink])
    produced = 0
    for _ in range(40):  # 20,000 rows: far more than the disk plus 1,500 rows in memory
        source.batches = [gpu_batch(produced, 500, ts0)]
        produced += 500
        clock[0] += 5
        pipe.run_once()  # never raises
    assert sink.stats.errors.get("spool_write_failed", 0) > 0
    assert 0 < sink.stats.dropped < produced
    spooled = sum(e.rows for e in sink.spool.entries())
    assert spooled >= 1_000  # the disk holds what fits ...
    assert sink.stats.extra["buffered_rows"] <= 1_500 + 500  # ... memory a bounded rest
    assert not list((tiny_fs / "spool").glob("*.tmp"))  # no half-written file left
    flaky.down = False  # ClickHouse back: the spool drains, the held batches follow
    for _ in range(10):
        clock[0] += 60
        pipe.run_once()
    pipe.close()
    stored, distinct = store.query_rows(
        f"SELECT count(), uniqExact(node, gpu, ts, power_watts) FROM {store.table('gpu_sample')}"
    )[0]
    assert stored == distinct == produced - sink.stats.dropped
    assert stored >= spooled + 1_000  # the spool and the memory buffer both reached the store
    assert sink.spool.entries() == []


def test_a_batch_cut_off_after_it_was_sent_and_then_evicted_is_unconfirmed_not_dropped(
    store: Store, tmp_path: Path
) -> None:
    """The store writes a batch but the connection breaks before its answer; the batch stays
    spooled (its replay would carry the same token). While the store then refuses connections
    the spool overflows and evicts it: its rows count as unconfirmed, not as dropped, so rows
    stored = rows produced - rows dropped still holds. Batches whose inserts never reached the
    store are evicted as dropped."""
    flaky = FlakyClient(store.client)
    sink, clock = make_sink(Store(store.dsn, database=store.database, client=flaky), tmp_path)
    ts0 = now_ms() - 60_000
    flaky.lost_acks = 1  # written, then "connection reset by peer"
    sink.export(gpu_batch(0, 10, ts0))
    assert sink.down and [e.rows for e in sink.spool.entries()] == [10]
    assert len(list(sink.spool.dir.glob("*.unconfirmed"))) == 1
    sink.spool.max_bytes = int(sink.spool.bytes() * 2.5)  # room for two batches
    flaky.down = True  # "connection refused": nothing of these reaches the store
    for k in range(1, 5):
        clock[0] += 10  # past the backoff: every export tries the spool again
        sink.export(gpu_batch(k * 10, 10, ts0))
    assert (sink.spool.unconfirmed_rows, sink.stats.dropped) == (10, 20)
    assert sink.stats.extra["spool_unconfirmed_rows"] == 10
    flaky.down = False
    clock[0] += 100
    sink.flush(force=True)
    assert sink.spool.entries() == [] and not list(sink.spool.dir.glob("*.unconfirmed"))
    assert_exact(store, 50 - sink.stats.dropped)  # the cut-off batch did land


def test_real_client_errors_tell_a_refused_connection_from_one_cut_after_sending() -> None:
    """The clickhouse-connect errors the sink classifies (may_have_landed), raised for real: a
    closed port (never reached) against a server that reads the request and closes without an
    answer, or accepts and closes (the client cannot tell whether anything was written)."""
    import socket
    import threading

    import clickhouse_connect

    from telemetry.sinks.clickhouse import is_transient, may_have_landed

    def serve(read: bool) -> int:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)

        def run() -> None:
            while True:
                c, _ = srv.accept()
                c.settimeout(2)
                if read:
                    try:
                        while (d := c.recv(65536)) and b"\r\n\r\n" not in d:
                            pass
                    except OSError:
                        pass
                c.close()

        threading.Thread(target=run, daemon=True).start()
        return int(srv.getsockname()[1])

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    closed = int(probe.getsockname()[1])
    probe.close()

    def error(port: int) -> BaseException:
        try:
            client = clickhouse_connect.get_client(
                host="127.0.0.1", port=port, connect_timeout=2, send_receive_timeout=3,
                autogenerate_session_id=False, query_retries=0,
            )  # fmt: skip
            client.raw_insert("t", ["a"], insert_block=b"x" * 10, fmt="ArrowStream")
        except Exception as e:
            return e
        raise AssertionError(f"port {port} answered")

    refused, cut, closed_early = error(closed), error(serve(read=True)), error(serve(read=False))
    assert all(is_transient(e) for e in (refused, cut, closed_early))
    assert not may_have_landed(refused), refused
    assert may_have_landed(cut), cut
    assert may_have_landed(closed_early), closed_early
