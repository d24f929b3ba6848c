"""Node records round-trip through the embedded ClickHouse store with their values intact."""

from __future__ import annotations

from exporters.node import NodeSource
from tests.sysfs_fixture import node8

NODE8 = node8()


def test_node8_into_store(store) -> None:
    src = NodeSource.replay(str(NODE8), node_name="n1")
    for b in src.collect():  # timestamps are "now", so the 30-day TTL keeps them
        store.insert(b.kind, b.table)
    rows = store.query_rows(
        f"SELECT gpu, power_watts, power_violation_seconds_total, memory_temperature_celsius, pod "
        f"FROM {store.table('gpu_sample')} ORDER BY gpu"
    )
    assert len(rows) == 8
    assert rows[5][1:3] == (655.0, 2.5)
    assert rows[7][3] is None  # unsupported stays NULL in the store
    assert rows[0][4] == "llama-train-worker-0"
    prio = store.query_rows(
        f"SELECT sum(rx_pause_total), sum(rx_pause_duration_seconds_total) FROM {store.table('nic_priority_sample')} "
        "WHERE priority = 3"
    )
    assert prio[0][0] == sum(1500 * (i + 1) for i in range(8))
    assert abs(prio[0][1] - sum(0.25 * (i + 1) for i in range(8))) < 1e-9
    aff = store.query_rows(
        f"SELECT gpu, nic, direct_nic, rail FROM {store.table('gpu_nic_affinity')} ORDER BY gpu"
    )
    assert aff[0] == (0, "mlx5_0", 1, 0) and aff[7] == (7, "", 0, None)
    ev = store.query_rows(f"SELECT gpu, event, xid FROM {store.table('gpu_event')}")
    assert ev == [(2, "xid", 94)]
