"""The insert gateway on the session's embedded engine, with real agents: ClickHouse sinks (their
own spools, dedup tokens) inserting over HTTP through clickhouse-connect, as `railscope node`
does when its store DSN names `railscope ingest`.

What must hold: many agents' batches become few parts; every answered batch is stored once,
across retries whose answer was lost, a restart of the gateway, a merged insert whose answer was
lost, and a store that is away (the gateway refuses past its limit instead of dropping)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from bench.ingest import gpu_table
from telemetry.contracts import Batch
from telemetry.ingest.config import IngestConfig
from telemetry.ingest.gateway import IngestService
from telemetry.records import GPU_SAMPLE
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from tests.conftest import now_ms


def active_parts(store: Store, table: str) -> int:
    return int(
        store.query_rows(
            "SELECT count() FROM system.parts WHERE database = {d:String} AND table = {t:String} "
            "AND active",
            {"d": store.database, "t": table},
        )[0][0]
    )


def gpu_keys(store: Store) -> tuple[int, int]:
    """(rows, distinct (node, gpu, ts)) of the GPU samples stored."""
    n, distinct = store.query_rows(
        f"SELECT count(), uniqExact(node, gpu, ts) FROM {store.table(GPU_SAMPLE)}"
    )[0]
    return int(n), int(distinct)


class Gw:
    """A gateway on `store`'s database, and agents pointed at it."""

    def __init__(self, store: Store, tmp: Path, **cfg: Any) -> None:
        self.store, self.tmp = store, tmp
        opts = {"listen": "127.0.0.1:0", "spool_dir": str(tmp / "log"), "flush_seconds": 60.0}
        self.cfg = IngestConfig(**{**opts, **cfg})
        self.svc = IngestService(store, self.cfg)
        self.host, self.port = self.svc.start()
        # the tests run the merges themselves (flush()), never racing the merge thread
        self.svc._stop.set()
        self.svc._thread.join()

    def agent(self, name: str, **kw: Any) -> ClickHouseSink:
        remote = Store(f"http://{self.host}:{self.port}/{self.store.database}")
        return ClickHouseSink(
            remote, spool_dir=str(self.tmp / "agents" / name), batch_seconds=0, **kw
        )

    def flush(self) -> int:
        assert self.svc.merger is not None
        return self.svc.merger.flush(force=True)


@pytest.fixture
def gw(store: Store, tmp_path: Path) -> Iterator[Gw]:
    g = Gw(store, tmp_path)
    yield g
    g.svc.stop()


def test_many_agents_become_few_parts(gw: Gw) -> None:
    ts0 = now_ms() - 60_000
    agents = [gw.agent(f"a{i}") for i in range(40)]
    for cycle in range(3):
        for i, sink in enumerate(agents):
            offset = (cycle * 40 + i) * 8
            sink.export(Batch(GPU_SAMPLE, gpu_table(8, ts0 + cycle * 10_000, offset=offset)))
            sink.flush()  # one insert per agent per cycle: 120 inserts
    assert all(s.stats.sent == 24 for s in agents)
    assert gpu_keys(gw.store) == (0, 0)  # answered from the log, not stored yet
    assert gw.flush() == 960
    assert gpu_keys(gw.store) == (960, 960)
    # one merged insert: one part, where the agents inserting directly would have made 120
    assert active_parts(gw.store, GPU_SAMPLE.table) == 1
    assert gw.svc.merger is not None and gw.svc.merger.inserts == 1
    assert not list((Path(gw.cfg.spool_dir)).glob("*.arrow"))  # the log is empty again


def test_a_retry_whose_answer_was_lost_is_stored_once(gw: Gw) -> None:
    sink = gw.agent("a")
    sink.export(Batch(GPU_SAMPLE, gpu_table(16, now_ms() - 60_000)))
    sink._seal(GPU_SAMPLE.name)
    (entry,) = sink.spool.entries()
    for _ in range(2):  # the agent sends, the answer is lost, it sends again (same token)
        with open(entry.path, "rb") as f:
            sink.store.insert_arrow_stream(GPU_SAMPLE, f, token=entry.token)
    gw.flush()
    with open(entry.path, "rb") as f:  # and once more after the merged insert
        sink.store.insert_arrow_stream(GPU_SAMPLE, f, token=entry.token)
    gw.flush()
    assert gpu_keys(gw.store) == (16, 16)
    # the same rows under a new token are a new batch: dedup is by the agent's token
    with open(entry.path, "rb") as f:
        sink.store.insert_arrow_stream(GPU_SAMPLE, f, token="f" * 32)
    gw.flush()
    assert gpu_keys(gw.store) == (32, 16)
    assert gw.svc.inbox.duplicates == 2


def test_a_restarted_gateway_stores_what_it_answered_once(store: Store, tmp_path: Path) -> None:
    g = Gw(store, tmp_path)
    sink = g.agent("a")
    sink.export(Batch(GPU_SAMPLE, gpu_table(24, now_ms() - 60_000)))
    sink._seal(GPU_SAMPLE.name)
    (entry,) = sink.spool.entries()
    sink.drain()
    assert sink.spool.entries() == []  # answered: the agent let go of it
    # the gateway dies before its merged insert: no final flush, the log keeps the batch
    g.svc.server.stop()
    g.svc.inbox.close()
    g.svc._stop.set()
    g2 = Gw(store, tmp_path)
    try:
        # the agent retries the batch (it lost the answer): the new process knows its token
        with (
            pa.OSFile(str(tmp_path / "copy.arrow"), "wb") as f,
            pa.ipc.new_stream(f, GPU_SAMPLE.arrow_schema) as w,
        ):
            w.write_table(GPU_SAMPLE.conform(gpu_table(24, now_ms() - 60_000)))
        with open(tmp_path / "copy.arrow", "rb") as f:
            Store(f"http://{g2.host}:{g2.port}/{store.database}").insert_arrow_stream(
                GPU_SAMPLE, f, token=entry.token
            )
        g2.flush()  # (due at once after a restart: the merge thread may have taken it first)
        assert gpu_keys(store) == (24, 24)  # the batch answered before the restart, once
        assert g2.svc.inbox.duplicates == 1
    finally:
        g2.svc.stop()


class AnswerLost(Store):
    """The store writes the merged insert, then the connection breaks before its answer."""

    cut = 1

    def insert(self, kind: Any, table: pa.Table, *, token: str | None = None) -> int:
        n = super().insert(kind, table, token=token)
        if self.cut:
            self.cut -= 1
            raise ConnectionResetError("connection reset by peer")
        return n


def test_a_merged_insert_retried_after_a_lost_answer_is_stored_once(
    store: Store, tmp_path: Path
) -> None:
    g = Gw(store, tmp_path, retry_initial_seconds=0.01)
    assert g.svc.merger is not None
    g.svc.merger.store = AnswerLost(store.dsn, database=store.database, client=store.client)
    try:
        agents = [g.agent(f"a{i}") for i in range(3)]
        for i, sink in enumerate(agents):
            sink.export(Batch(GPU_SAMPLE, gpu_table(8, now_ms() - 60_000, offset=i * 8)))
            sink.flush()
        assert g.svc.merger.flush(force=True) == 0  # landed, but the gateway does not know
        assert len(list(g.svc.merger.groups.glob("*.json"))) == 1  # the group is kept, declared
        assert gpu_keys(store) == (24, 24)
        time.sleep(0.05)
        assert g.svc.merger.flush(force=True) == 24  # the same group, the same token
        assert gpu_keys(store) == (24, 24)  # the store dropped the copy
        assert not list(g.svc.merger.groups.glob("*.json"))
    finally:
        g.svc.stop()


def test_a_store_away_fills_the_log_then_agents_keep_their_batches(
    store: Store, tmp_path: Path, free_port: int
) -> None:
    g = Gw(store, tmp_path, max_bytes="1MiB", retry_initial_seconds=0.01)
    assert g.svc.merger is not None
    g.svc.merger.store = Store(f"http://127.0.0.1:{free_port}/{store.database}")  # nobody there
    try:
        sink = g.agent("a")
        sent = 0
        for i in range(12):  # about 200 kB each: past the log's 1 MiB
            sink.export(Batch(GPU_SAMPLE, gpu_table(1000, now_ms() - 60_000, offset=i * 1000)))
            sink.flush()
            g.svc.merger.flush(force=True)  # the store is away: nothing leaves the log
        sent = sink.stats.sent
        assert 0 < sent < 12_000 and sink.down  # the gateway refused the rest: retryable
        assert sink.stats.errors.get("too_many_parts")
        assert sink.stats.dropped == 0 and sink.spool.rejected_entries() == []
        g.svc.merger.store = store  # the store is back
        g.svc.merger.backoff = 0.01
        time.sleep(0.05)
        assert g.svc.merger.flush(force=True) == sent
        for _ in range(10):  # the agent replays what it kept, as the log makes room
            sink.drain(force=True)
            g.svc.merger.flush(force=True)
            if not sink.spool.entries():
                break
        assert sink.spool.entries() == []
        assert gpu_keys(store) == (12_000, 12_000)
    finally:
        g.svc.stop()


def test_what_is_not_a_record_kind_insert_is_refused_for_good(gw: Gw) -> None:
    from clickhouse_connect.driver.exceptions import DatabaseError

    remote = Store(f"http://{gw.host}:{gw.port}/{gw.store.database}")
    with pytest.raises(DatabaseError, match="UNKNOWN_TABLE"):
        remote.client.command(f"INSERT INTO `{gw.store.database}`.`nope` FORMAT ArrowStream")
    with pytest.raises(DatabaseError, match="UNKNOWN_FORMAT"):
        remote.client.raw_insert(
            f"`{gw.store.database}`.`gpu_samples`", ["node"], b'{"node":"x"}\n', fmt="JSONEachRow"
        )
    with pytest.raises(DatabaseError, match="NOT_IMPLEMENTED"):
        remote.client.command(f"DROP DATABASE `{gw.store.database}`")
    # reads pass through: an agent's start-up checks see the store's schema
    assert remote.pending() == [] and remote.applied_versions()
    # an agent's batch the gateway cannot take goes aside on the agent, as ClickHouse's would
    sink = gw.agent("bad")
    broken = gpu_table(4, now_ms()).append_column("bogus", pa.array([1, 2, 3, 4]))
    sink._held.append((GPU_SAMPLE.name, broken))
    sink._write_held()
    sink.drain()
    assert len(sink.spool.rejected_entries()) == 1


def test_agents_insert_over_https_as_a_user(store: Store, tmp_path: Path) -> None:
    from telemetry.errors import StoreUnavailable
    from tests.tls import self_signed

    cert, key = self_signed(tmp_path)
    users = [{"name": "writer", "password": "w-pw"}]
    g = Gw(store, tmp_path, tls_cert_file=str(cert), tls_key_file=str(key), users=users)
    try:
        base = f"https://writer:{{}}@127.0.0.1:{g.port}/{store.database}?ca_cert={cert}"
        agent = ClickHouseSink(
            Store(base.format("w-pw")), spool_dir=str(tmp_path / "a"), batch_seconds=0
        )
        agent.export(Batch(GPU_SAMPLE, gpu_table(8, now_ms() - 60_000)))
        agent.flush()
        assert agent.stats.sent == 8 and not agent.down
        g.flush()
        assert gpu_keys(store) == (8, 8)
        with pytest.raises(StoreUnavailable, match="authentication failed"):
            Store(base.format("wrong")).ping()
    finally:
        g.svc.stop()


def test_agents_of_one_subnet_are_not_capped_like_one_address(gw: Gw) -> None:
    """The agents share their nodes' subnet: 300 kept-alive connections from one network (serve's
    own per-network cap is 256) all stay open, and an agent still inserts."""
    import socket

    conns = []
    try:
        for i in range(300):
            s = socket.create_connection(
                (gw.host, gw.port), source_address=(f"127.0.0.{1 + i % 250}", 0)
            )
            s.sendall(f"GET /ping HTTP/1.1\r\nHost: {gw.host}\r\n\r\n".encode())
            conns.append(s)
        for s in conns:
            s.settimeout(5)
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
        time.sleep(0.5)
        assert gw.svc.server.conns.count >= 300 and gw.svc.server.conns.evicted == 0
        sink = gw.agent("after")
        sink.export(Batch(GPU_SAMPLE, gpu_table(4, now_ms() - 60_000)))
        sink.flush()
        gw.flush()
        assert gpu_keys(gw.store) == (4, 4)
    finally:
        for s in conns:
            s.close()
