"""The `sources.node` config section: where the node exporter reads from and which of its
collectors run. Imports pydantic only (config validation must not load the collectors)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from telemetry.config import SourceConfig

GpuBackendName = Literal["auto", "nvml", "fake", "none"]

# The node exporter's parts, each switched on/off by `collectors.<name>` and
# `--collector.<name>` / `--no-collector.<name>` (node_exporter's convention).
COLLECTORS: dict[str, str] = {
    "gpu": "GPUs through NVML: utilisation, memory, clocks, power, ECC, NVLink, XID events",
    "rdma": "RDMA ports from sysfs: port counters, hw_counters, netdev statistics",
    "ethtool": "ethtool statistics of each RDMA port's netdev: per-priority PFC, NIC health",
    "pcie": "GPU<->NIC PCIe affinity from the PCI tree",
    "podresources": "the pod holding each GPU / VF, from the kubelet pod-resources socket",
    "processes": "GPU memory per process (NVML) and each process's pod, from /proc/PID/cgroup",
}


class NodeCollectors(BaseModel):
    model_config = ConfigDict(extra="forbid")
    gpu: bool = Field(default=True, description=COLLECTORS["gpu"])
    rdma: bool = Field(default=True, description=COLLECTORS["rdma"])
    ethtool: bool = Field(default=True, description=COLLECTORS["ethtool"])
    pcie: bool = Field(default=True, description=COLLECTORS["pcie"])
    podresources: bool = Field(default=True, description=COLLECTORS["podresources"])
    processes: bool = Field(default=True, description=COLLECTORS["processes"])

    def enabled(self) -> frozenset[str]:
        return frozenset(n for n in COLLECTORS if getattr(self, n))


class NodeConfig(SourceConfig):
    node_name: str | None = Field(
        default=None, description="Node name on every record (default $NODE_NAME, else hostname)."
    )
    sysfs_root: str = Field(
        default="/sys", description="sysfs mount (the DaemonSet mounts the host's /sys here)."
    )
    gpu_backend: GpuBackendName = Field(
        default="auto", description="GPU backend; auto picks one by what is available."
    )
    gpu_fake: str | None = Field(
        default=None, description="JSON spec of the fake GPUs (gpu_backend: fake)."
    )
    proc_root: str = Field(
        default="/proc",
        description="The host's /proc (/host/proc in the DaemonSet): /proc/PID/cgroup gives the "
        "pod of each process NVML lists on a GPU (NVML's pids are the host's).",
    )
    collectors: NodeCollectors = Field(
        default_factory=NodeCollectors, description="Collectors to run (all by default)."
    )
    podresources_socket: str = Field(
        default="/var/lib/kubelet/pod-resources/kubelet.sock",
        description="kubelet pod-resources socket.",
    )
    gpu_resources: list[str] = Field(
        default=["nvidia.com/gpu", "nvidia.com/mig-"],
        description="Resource names (or prefixes ending in - or /) that are GPUs.",
    )
    nic_resources: list[str] = Field(
        default=["nvidia.com/rdma_", "openshift.io/", "intel.com/"],
        description="Resource names/prefixes (ending in -, _ or /) of SR-IOV VFs / RDMA devices.",
    )

    @model_validator(mode="before")
    @classmethod
    def _ethtool_key(cls, data: Any) -> Any:
        # `ethtool: false` predates `collectors:`; it still switches the ethtool collector off.
        if isinstance(data, dict) and "ethtool" in data:
            data = dict(data)
            on = data.pop("ethtool")
            if not isinstance(on, bool):
                raise ValueError(f"ethtool: expected true or false, got {on!r}")
            data["collectors"] = {**(data.get("collectors") or {}), "ethtool": on}
        return data


__all__ = ["COLLECTORS", "GpuBackendName", "NodeCollectors", "NodeConfig"]
