"""NodeSource self-reporting: a problem is named in a self-metric and a log line while the rest
of the node keeps reporting."""

from __future__ import annotations

import logging
from pathlib import Path

from exporters.node import nvml
from exporters.node.source import NodeSource


def test_problems_named_in_self_metrics_and_log(node8_copy: Path, caplog) -> None:
    bad = node8_copy / "sys/class/infiniband/mlx5_3/ports/1/counters/symbol_error"
    bad.write_text("twelve\n")
    fake = nvml.FakeNvml.from_dict(
        {
            "gpus": [
                {
                    "uuid": "GPU-a",
                    "pci_bus_id": "0000:18:00.0",
                    "fields": {"power_watts": 1000},
                    "lost_after_reads": 0,
                }
            ]
        }
    )
    src = NodeSource.replay(str(node8_copy), node_name="n", gpu_backend_impl=fake)
    with caplog.at_level(logging.WARNING, logger="exporters.node"):
        batches = {b.kind.name: b.table.to_pylist() for b in src.collect()}
    assert src.stats.errors == {"rdma:malformed_sysfs": 1, "gpu:gpu_lost": 1}
    success = {c: ok for c, (_, ok) in src.stats.collectors.items()}
    assert success == {
        "gpu": False,
        "rdma": False,
        "ethtool": True,
        "podresources": True,
        "pcie": True,
        "processes": True,  # the lost GPU lists nothing and is not reported twice
    }
    assert src.stats.last_success  # the source as a whole still delivered
    assert len(batches["nic_sample"]) == 8
    assert [r["up"] for r in batches["gpu_sample"]] == [0]
    text = caplog.text
    assert "symbol_error: not an integer: 'twelve'" in text and "GPU 0 (GPU-a) is lost" in text
    # Logged once, counted every time.
    caplog.clear()
    src.collect()
    assert src.stats.errors["rdma:malformed_sysfs"] == 2
    assert "symbol_error" not in caplog.text


def test_no_gpu_backend_uses_pci_tree_for_affinity(node8_copy: Path) -> None:
    (node8_copy / "nvml.json").unlink()  # a capture without NVML data
    src = NodeSource.replay(str(node8_copy), node_name="n")
    batches = {b.kind.name: b.table.to_pylist() for b in src.collect()}
    assert "gpu_sample" not in batches
    aff = {r["gpu"]: r for r in batches["gpu_nic_affinity"]}
    assert len(aff) == 8 and aff[3]["nic"] == "mlx5_3" and aff[7]["direct_nic"] == 0
    # unchanged topology: not re-emitted every cycle
    assert "gpu_nic_affinity" not in {b.kind.name for b in src.collect()}


def test_each_nvlink_is_a_row_of_its_own_kind(node8_copy: Path) -> None:
    """The gpu collector's NVLinks leave the node as nvlink_sample rows, counted in its
    received records; a GPU without NVLink adds none and no problem."""
    links = [{"active": k != 2, "replay_errors_total": 5 * k, "crc_data_errors_total": 0,
              "crc_flit_errors_total": 0, "recovery_errors_total": 0} for k in range(18)]  # fmt: skip
    fake = nvml.FakeNvml.from_dict(
        {
            "gpus": [
                {"uuid": "GPU-a", "pci_bus_id": "0000:18:00.0", "fields": {}, "nvlinks": links},
                {"uuid": "GPU-b", "model": "NVIDIA L40S", "pci_bus_id": "0000:2a:00.0",
                 "fields": {}, "nvlinks": links},
            ]
        }
    )  # fmt: skip
    src = NodeSource.replay(str(node8_copy), node_name="n", gpu_backend_impl=fake)
    batches = {b.kind.name: b.table.to_pylist() for b in src.collect()}
    rows = batches["nvlink_sample"]
    assert [(r["gpu"], r["link"], r["up"]) for r in rows][:3] == [(0, 0, 1), (0, 1, 1), (0, 2, 0)]
    assert len(rows) == 18 and rows[17]["replay_errors_total"] == 85 and rows[0]["node"] == "n"
    assert [e for e in src.stats.errors if e.startswith("gpu:")] == []  # (GPU-b: no PCI fixture)


def test_a_collection_is_stamped_by_the_sources_clock(node8_copy: Path) -> None:
    """The source's clock, not the host's, stamps its samples: a test (or a replay) controls it."""
    src = NodeSource.replay(str(node8_copy), node_name="n", clock=lambda: 1_800_000_000.25)
    rows = [r for b in src.collect() if "ts" in b.kind.by_name for r in b.table.to_pylist()]
    assert rows and {r["ts"].timestamp() for r in rows} == {1_800_000_000.25}
