"""GPU <-> NIC affinity from the PCIe tree in sysfs (`bus/pci/devices/*` links into `devices/`):
for each GPU the RDMA NIC behind the same PCIe switch, the GPU's NUMA node and so its rail.

Read-only. A GPU whose nearest NIC is only reachable through the host bridge / CPU is flagged
(direct_nic=0): its GPUDirect RDMA traffic crosses host memory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PCI = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
NVIDIA = "0x10de"
GPU_CLASSES = ("0x030200", "0x030000")  # 3D controller, VGA controller


@dataclass(frozen=True)
class Nic:
    device: str
    netdev: str
    pci: str


def pci_chain(root: Path, pci: str) -> list[str]:
    """PCI addresses from the root port down to `pci` (inclusive), from the resolved sysfs path
    devices/pci0000:16/0000:16:02.0/0000:17:00.0/.../<pci>. Empty when the device is unknown."""
    link = root / "bus" / "pci" / "devices" / pci
    if not os.path.lexists(link):
        return []
    return [part for part in Path(os.path.realpath(link)).parts if _PCI.match(part)]


def numa_node(root: Path, pci: str) -> int | None:
    try:
        v = int((root / "bus" / "pci" / "devices" / pci / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return None if v < 0 else v  # -1: the platform does not report NUMA locality


def sysfs_gpus(root: Path) -> list[str]:
    """NVIDIA GPUs' PCI addresses in bus order (the order NVML/CUDA_DEVICE_ORDER=PCI_BUS_ID use),
    for affinity when NVML is not available (replay of a captured node)."""
    base = root / "bus" / "pci" / "devices"
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    out = []
    for n in names:
        try:
            vendor = (base / n / "vendor").read_text().strip()
            cls = (base / n / "class").read_text().strip()
        except OSError:
            continue
        if vendor == NVIDIA and cls in GPU_CLASSES:
            out.append(n)
    return out


def is_vf(root: Path, pci: str) -> bool:
    return os.path.lexists(root / "bus" / "pci" / "devices" / pci / "physfn")


def affinity(
    root: Path, node: str, ts: int, gpus: list[tuple[int, str]], nics: list[Nic]
) -> list[dict[str, Any]]:
    """One gpu_nic_affinity row per GPU. gpus: (index, pci). The rail of a NIC is its position among
    the node's RDMA physical functions ordered by device name (mlx5_0 = rail 0)."""
    pfs = sorted(
        {n.device: n for n in nics if n.pci and not is_vf(root, n.pci)}.values(),
        key=lambda n: _natural(n.device),
    )
    rail_of = {n.device: i for i, n in enumerate(pfs)}
    chains = {n.device: pci_chain(root, n.pci) for n in pfs}
    rows = []
    for index, gpu_pci in gpus:
        chain = pci_chain(root, gpu_pci)
        best: tuple[int, Nic, str] | None = None
        for n in pfs:
            common = _common(chain[:-1], chains[n.device][:-1])
            # Sharing at least one PCI bridge below the host bridge = same PCIe switch / root port
            # (nvidia-smi topo: PIX/PXB); sharing nothing = through the CPU (PHB/NODE/SYS).
            if common and (best is None or len(common) > best[0]):
                best = (len(common), n, common[-1])
        row: dict[str, Any] = {
            "ts": ts,
            "node": node,
            "gpu": index,
            "gpu_pci": gpu_pci,
            "numa_node": numa_node(root, gpu_pci),
            "direct_nic": 0,
            "nic": "",
            "netdev": "",
            "pcie_switch": "",
            "rail": None,
        }
        if best is not None:
            _, n, switch = best
            row.update(
                nic=n.device,
                netdev=n.netdev,
                pcie_switch=switch,
                rail=rail_of[n.device],
                direct_nic=1,
            )
        rows.append(row)
    return rows


def _common(a: list[str], b: list[str]) -> list[str]:
    out = []
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        out.append(x)
    return out


def _natural(s: str) -> tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s))
