"""GPU<->NIC affinity from the PCIe tree of the 8-GPU fixture node."""

from __future__ import annotations

from pathlib import Path

from exporters.node import pcie

from .conftest import NODE8

ROOT = NODE8 / "sys"


def nics() -> list[pcie.Nic]:
    out = []
    for d in sorted((ROOT / "class" / "infiniband").iterdir()):
        import os

        out.append(pcie.Nic(d.name, "", os.path.basename(os.path.realpath(d / "device"))))
    return out


def test_gpus_found_in_bus_order() -> None:
    gpus = pcie.sysfs_gpus(ROOT)
    assert len(gpus) == 8
    assert gpus[0] == "0000:18:00.0" and gpus == sorted(gpus)


def test_affinity_pairs_gpu_with_nic_under_same_switch() -> None:
    gpus = list(enumerate(pcie.sysfs_gpus(ROOT)))
    rows = {r["gpu"]: r for r in pcie.affinity(ROOT, "n", 1, gpus, nics())}
    assert rows[0]["nic"] == "mlx5_0" and rows[0]["rail"] == 0 and rows[0]["direct_nic"] == 1
    assert rows[0]["pcie_switch"] == "0000:16:00.0"  # the switch's upstream port
    assert rows[5]["nic"] == "mlx5_5" and rows[5]["numa_node"] == 1
    # GPU 7's NIC sits under another host bridge: flagged, no rail.
    assert rows[7]["direct_nic"] == 0 and rows[7]["nic"] == "" and rows[7]["rail"] is None
    assert rows[7]["numa_node"] == 1


def test_unknown_gpu_and_numa_minus_one(tmp_path: Path) -> None:
    assert pcie.pci_chain(ROOT, "0000:ff:00.0") == []
    d = tmp_path / "bus" / "pci" / "devices" / "0000:01:00.0"
    d.mkdir(parents=True)
    (d / "numa_node").write_text("-1\n")
    assert pcie.numa_node(tmp_path, "0000:01:00.0") is None
