"""Every source railscope knows, as data: name -> "module:Class" strings, help and record kinds,
imported only when needed (an entry-point table, like setuptools' `entry_points`). Config
validation (telemetry/config.py), the CLI and `railscope serve` read this table, so nothing
depends on which exporter module happened to be imported first. It imports nothing of railscope
but its errors: building a source from a config is telemetry/registry.py's.

Adding a source = one entry here + `exporters/<name>/source.py` (see CONTRIBUTING.md).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from telemetry.errors import UserError

if TYPE_CHECKING:
    from pydantic import BaseModel


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class SourceEntry:
    """One source: where its class and config model live, its help and record kinds."""

    name: str
    source: str  # "module:Class" of the source
    config: str  # "module:Model" of its `sources.<name>` section (imports pydantic only)
    help: str
    kinds: tuple[str, ...]

    def load(self) -> Any:
        """The source class (imports its module)."""
        return _load(self.source)

    def config_model(self) -> type[BaseModel]:
        """The model of its `sources.<name>` section (a telemetry.config.SourceConfig)."""
        model: type[BaseModel] = _load(self.config)
        return model


SOURCES: dict[str, SourceEntry] = {
    e.name: e
    for e in (
        SourceEntry(
            "node",
            "exporters.node.source:NodeSource",
            "exporters.node.config:NodeConfig",
            "GPU (NVML), RDMA NIC, per-priority PFC, GPU<->NIC affinity and GPU/VF->pod on this node",
            (
                "gpu_sample",
                "gpu_event",
                "gpu_nic_affinity",
                "nic_sample",
                "nic_priority_sample",
                "gpu_process",
                "nvlink_sample",
            ),
        ),
        SourceEntry(
            "switch",
            "exporters.switch.source:SwitchSource",
            "exporters.switch.config:SwitchSourceConfig",
            "switches over SONiC Redis, gNMI or SNMP: port/queue counters, PFC per priority, ECN, watermarks, ECMP, LLDP",
            (
                "switch_port_sample",
                "switch_priority_sample",
                "switch_queue_sample",
                "switch_status",
                "ecmp_group_sample",
                "lldp_link",
            ),
        ),
        SourceEntry(
            "sflow",
            "exporters.sflow.source:SflowSource",
            "exporters.sflow.config:SflowConfig",
            "sFlow v5 collector (UDP or pcap): flows with RoCEv2 QPs, port counters",
            ("flow_sample", "switch_port_sample"),
        ),
        SourceEntry(
            "hdfs",
            "exporters.hdfs.source:HdfsSource",
            "exporters.hdfs.config:HdfsConfig",
            "HDFS across IDCs: /jmx, clienttrace transfers by IDC pair, replica placement audit, "
            "DCI budget",
            (
                "hdfs_transfer",
                "hdfs_block_placement",
                "hdfs_placement_total",
                "hdfs_namenode_sample",
                "hdfs_datanode_sample",
                "dci_usage",
            ),
        ),
        SourceEntry(
            "nccl",
            "exporters.nccl.source:NcclSource",
            "exporters.nccl.config:NcclConfig",
            "NCCL Inspector per-collective bandwidth (JSON lines or Prom textfiles), attributed to "
            "pod, job and GPU",
            ("collective_sample",),
        ),
        SourceEntry(
            "logs",
            "exporters.logs.source:LogsSource",
            "exporters.logs.config:LogsConfig",
            "pods' CRI logs and the kernel log: NCCL, PyTorch, NVIDIA driver, NIC and PCIe AER lines "
            "as typed events",
            ("log_event",),
        ),
        SourceEntry(
            "inventory",
            "exporters.inventory.source:InventorySource",
            "exporters.inventory.config:InventoryConfig",
            "Kubernetes/Volcano inventory (namespaces, pods, IPs, nodes, HyperNodes, jobs)",
            ("namespace", "pod", "pod_ip_lease", "node", "hypernode", "job"),
        ),
    )
}


def entry(name: str) -> SourceEntry:
    try:
        return SOURCES[name]
    except KeyError:
        raise UserError(f"unknown source {name!r} (known: {', '.join(sorted(SOURCES))})") from None


__all__ = ["SOURCES", "SourceEntry", "entry"]
