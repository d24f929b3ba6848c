"""Bounded memory in the ingest path (issue 21 item 3), on the real embedded engine: the spool
file of a sealed batch holds exactly its rows in record batches of bounded size, the store gets
exactly those rows, and neither the driver nor the sink keeps a sealed batch once it is spooled."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pyarrow as pa

from telemetry.contracts import Batch, ComponentStats, ExportResult
from telemetry.pipeline import Pipeline
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.store.spool import RECORD_BATCH_BYTES, Spool, record_batches
from tests.conftest import now_ms
from tests.integration.core.test_exactly_once import ListSource, assert_exact, gpu_batch


def _chunks(n_chunks: int, rows: int, ts0: int) -> list[Batch]:
    return [gpu_batch(k * rows, rows, ts0) for k in range(n_chunks)]


def test_spool_file_holds_the_sealed_rows_in_bounded_record_batches(tmp_path: Path) -> None:
    ts0 = now_ms()
    small = pa.concat_tables([b.table for b in _chunks(500, 7, ts0)])  # a node's few rows/cycle
    big = pa.concat_tables([b.table for b in _chunks(3, 200_000, ts0)])
    sp = Spool(tmp_path)
    for table in (small, big):
        entry = sp.append("gpu_sample", table)
        assert Spool.read(entry).equals(table)  # same rows, same order, same values
        with pa.memory_map(str(entry.path)) as f:
            batches = list(pa.ipc.open_stream(f))
        assert sum(b.num_rows for b in batches) == table.num_rows
        assert max(b.nbytes for b in batches) <= RECORD_BATCH_BYTES * 1.1
        if table is small:  # 500 chunks of 7 rows are joined, not written one by one
            assert len(batches) == 1
        else:
            assert len(batches) >= table.nbytes // RECORD_BATCH_BYTES


def test_rows_stored_equal_rows_sent(store: Store, tmp_path: Path) -> None:
    ts0 = now_ms()
    chunks = _chunks(12, 50_000, ts0)
    sent = pa.concat_tables([b.table for b in chunks])
    sink = ClickHouseSink(store, spool_dir=str(tmp_path / "spool"), batch_rows=sent.num_rows)
    Pipeline([ListSource(chunks)], [sink]).run_once()
    sink.close()
    assert sink.spool.entries() == []
    cols = ", ".join(f"`{c}`" for c in sent.column_names)
    stored = store.query_arrow(
        f"SELECT {cols} FROM {store.table('gpu_sample')} ORDER BY power_watts"
    ).cast(sent.schema)
    assert stored.equals(sent.sort_by("power_watts"))


class _Watcher:
    """A sink that, at each export, records which earlier batches are still alive somewhere."""

    name = "watch"

    def __init__(self) -> None:
        self.stats = ComponentStats("sink:watch")
        self.refs: list[weakref.ref[pa.Table]] = []
        self.alive_at_export: list[int] = []

    def export(self, batch: Batch) -> ExportResult:
        gc.collect()
        self.alive_at_export.append(sum(r() is not None for r in self.refs))
        self.refs.append(weakref.ref(batch.table))
        return ExportResult(True, batch.num_rows)

    def flush(self, force: bool = False) -> None: ...

    def close(self) -> None: ...


def test_driver_lets_go_of_published_batches() -> None:
    """A cycle's batches are not all held by the driver until the cycle ends: once every sink has
    a batch, the driver's reference is gone (a sealed, spooled batch then has no other holder)."""
    w = _Watcher()
    Pipeline([ListSource(_chunks(5, 10, now_ms()))], [w]).run_once()
    assert w.alive_at_export == [0, 0, 0, 0, 0]


def test_sink_lets_go_of_a_sealed_batch_before_the_store_reads_it(
    store: Store, tmp_path: Path
) -> None:
    """While the store reads a spool file, the rows of that batch are nowhere in memory: not in
    the sink's buffer, not in the list of sealed batches (the file is the one extra copy)."""
    refs: list[weakref.ref[pa.Table]] = []
    alive: list[int] = []

    class Sink(ClickHouseSink):
        def _insert(self, entry):  # type: ignore[no-untyped-def]
            gc.collect()
            # the batch being exported is still its caller's; the sealed ones before it are not
            alive.append(sum(r() is not None for r in refs[:-1]))
            super()._insert(entry)

    sink = Sink(store, spool_dir=str(tmp_path / "spool"), batch_rows=1_000)
    ts0 = now_ms()
    for k in range(4):
        b = gpu_batch(k * 250, 250, ts0)
        refs.append(weakref.ref(b.table))
        sink.export(b)  # the 4th seals 1,000 rows, spools them and inserts the file
        del b
    assert alive == [0]
    assert store.count("gpu_sample") == 1_000
    sink.close()


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        line = next(ln for ln in f if ln.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def test_embedded_store_gives_memory_back_after_a_large_insert(store: Store) -> None:
    """The engine's allocator keeps what an insert used for reuse; `release_memory()` (the
    sink calls it after storing a batch of 32 MiB or more) returns it to the system."""
    table = gpu_batch(0, 400_000, now_ms()).table
    store.insert("gpu_sample", table)
    del table
    before = _rss_mib()
    store.release_memory()
    assert before - _rss_mib() >= 16, "no memory handed back by the embedded engine"


def test_a_large_sealed_batch_is_spooled_in_pieces_each_stored_once(
    store: Store, tmp_path: Path
) -> None:
    """A sealed batch past `spool_file_bytes` becomes several spool files (the embedded engine
    reads one at a time), in order, each with its own token: a lost acknowledgement of one
    piece replays that piece alone, and every row is stored exactly once."""
    from tests.integration.core.test_exactly_once import FlakyClient

    flaky = FlakyClient(store.client)
    s = Store(store.dsn, database=store.database, client=flaky)
    batch = gpu_batch(0, 40_000, now_ms())
    limit = batch.table.nbytes // 4 + 1
    sink = ClickHouseSink(
        s, spool_dir=str(tmp_path / "spool"), batch_rows=40_000, spool_file_bytes=limit,
        retry_initial_seconds=0,
    )  # fmt: skip
    flaky.down = True
    sink.export(batch)  # seals 40,000 rows: spooled, not stored
    pieces = sink.spool.entries()
    assert len(pieces) == 4 and sum(e.rows for e in pieces) == 40_000
    assert len({e.token for e in pieces}) == 4
    flaky.down, flaky.lost_acks = False, 1  # the first piece lands, its answer is lost
    sink.flush(force=True)
    sink.close()
    assert flaky.attempts == 1 + 5  # the refused attempt, then 4 pieces and 1 replay
    assert_exact(store, 40_000)


def test_large_chunks_are_spooled_without_a_copy_and_small_ones_joined() -> None:
    """`record_batches` copies only to join small chunks: a table of large chunks comes out as
    slices of the same buffers (the spool writes them as they lie), a table of many tiny chunks
    as one joined batch, and both keep every row in order."""
    ts0 = now_ms()
    target = 1 << 20
    big = pa.concat_tables([b.table for b in _chunks(3, 10_000, ts0)])  # ~4 MiB chunks
    small = pa.concat_tables([b.table for b in _chunks(200, 7, ts0)])
    for table in (big, small):
        out = list(record_batches(table, target))
        assert pa.Table.from_batches(out).equals(table)
        assert max(b.nbytes for b in out) <= target * 1.1
    col = big.schema.get_field_index("power_watts")
    spans = [
        (c.buffers()[1].address, c.buffers()[1].address + c.buffers()[1].size)
        for c in big.column(col).chunks
    ]
    for b in record_batches(big, target):
        at = b.column(col).buffers()[1].address
        assert any(lo <= at < hi for lo, hi in spans), "a large chunk was copied"
    assert len(list(record_batches(small, target))) == 1


class _CountingClient:
    """The real client, counting the embedded engine's allocator purges."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.purges = 0

    def command(self, cmd: str, *a: Any, **kw: Any) -> Any:
        self.purges += cmd == "SYSTEM JEMALLOC PURGE"
        return self.real.command(cmd, *a, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_a_drain_of_large_pieces_purges_the_allocator_once(store: Store, tmp_path: Path) -> None:
    """The pieces of a large sealed batch are stored one after the other and the engine's
    allocator is purged once, after the last: each purge between them only made the next insert
    fault its memory back in. A drain of small batches purges nothing."""
    counting = _CountingClient(store.client)
    s = Store(store.dsn, database=store.database, client=counting)
    batch = gpu_batch(0, 300_000, now_ms())
    sink = ClickHouseSink(
        s, spool_dir=str(tmp_path / "spool"), batch_rows=300_000,
        spool_file_bytes=batch.table.nbytes // 3 + 1,
    )  # fmt: skip
    sink.export(batch)  # seals: three pieces, each past RELEASE_AFTER_BYTES on disk
    del batch
    assert sink.stats.sent == 300_000 and counting.purges == 1
    sink.export(gpu_batch(300_000, 1_000, now_ms()))
    sink.flush(force=True)
    sink.close()
    assert counting.purges == 1
    assert_exact(store, 301_000)
