"""Node records round-trip through the embedded ClickHouse store with their values intact."""

from __future__ import annotations

from exporters.node.source import NodeSource
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


def test_gpu_processes_into_store_with_their_pod(store, tmp_path) -> None:
    """A replay bundle whose nvml.json lists GPU processes and whose proc/PID/cgroup names their
    pods (what `--capture` writes): gpu_process rows in the store, NOT_AVAILABLE memory NULL."""
    import json
    import shutil

    d = tmp_path / "node8"
    shutil.copytree(NODE8, d, symlinks=True)
    spec = json.loads((d / "nvml.json").read_text())
    uid = "0b7e4f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b"
    spec["gpus"][0]["processes"] = [
        {"pid": 31337, "type": "compute", "used_memory_bytes": 40 * 2**30},
        {"pid": 31338, "type": "compute", "used_memory_bytes": None},
    ]
    (d / "nvml.json").write_text(json.dumps(spec))
    (d / "proc" / "31337").mkdir(parents=True)
    (d / "proc" / "31337" / "cgroup").write_text(
        f"12:memory:/kubepods/burstable/pod{uid}/{'c' * 64}\n"  # cgroup v1, cgroupfs driver
    )
    src = NodeSource.replay(str(d), node_name="n1")
    for b in src.collect():
        store.insert(b.kind, b.table)
    rows = store.query_rows(
        f"SELECT gpu, uuid, pid, type, pod_uid, container_id, used_memory_bytes "
        f"FROM {store.table('gpu_process')} ORDER BY pid"
    )
    assert rows == [
        (0, spec["gpus"][0]["uuid"], 31337, "compute", uid, "c" * 64, 40 * 2**30),
        (0, spec["gpus"][0]["uuid"], 31338, "compute", "", "", None),
    ]
