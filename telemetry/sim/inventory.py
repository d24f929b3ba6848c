"""Inventory and static facts of a simulated run, the first batches it emits: nodes, HyperNodes,
jobs, pods and their IP leases and NCCL settings, GPU-NIC affinity, LLDP links, HDFS transfers and
block placements, GPU events and the pool's objects (pool.py).

Builds record batches from the built simulation only: it runs no physics and writes nowhere.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from telemetry.contracts import Batch
from telemetry.records import (
    GPU_EVENT,
    GPU_NIC_AFFINITY,
    HDFS_BLOCK_PLACEMENT,
    HDFS_TRANSFER,
    HYPERNODE,
    JOB,
    LLDP_LINK,
    NCCL_SETTING,
    NODE,
    POD,
    POD_IP_LEASE,
)
from telemetry.sim.fabric import GPU_BUS, Fabric, netdev, rdma_device, su_name
from telemetry.sim.faults import gpu_uuid
from telemetry.sim.hdfs import HdfsModel
from telemetry.sim.model import SimView
from telemetry.sim.nccl import env as nccl_env
from telemetry.sim.pool import pool_rows
from telemetry.sim.seeding import stable_hash
from telemetry.sim.tables import record_table, ts_column
from telemetry.sim.workload import TIER_NAMES, Job


class InventorySim(SimView, Protocol):
    """What the inventory reads of a simulation besides the SimView: its HDFS events."""

    @property
    def hdfs(self) -> HdfsModel: ...


def inventory_batches(sim: InventorySim) -> list[Batch]:
    """The run's inventory and static facts, one batch per kind (pool kinds when it has a pool)."""
    fab, sc, wl = sim.fabric, sim.scenario, sim.workload
    t0 = sim.start_ms
    idcs = sc.fabric.idcs
    rows_node = []
    for n in fab.nodes:
        labels = {
            "kubernetes.io/hostname": n.name,
            "topology.kubernetes.io/zone": n.idc,
            "railscope.io/su": n.su_name,
            "nvidia.com/gpu.product": str(fab.model["gpu_model"]).replace(" ", "-"),
            "nvidia.com/gpu.count": str(fab.gpus_per_node),
        }
        rows_node.append(
            {
                "node": n.name,
                "labels": json.dumps(labels, sort_keys=True),
                "idc": n.idc,
                "su": n.su_name,
                "gpus": fab.gpus_per_node,
                "valid_from": t0,
                "valid_to": None,
                "updated_at": t0,
            }
        )
    rows_hn = []
    gpu_idcs = sorted({n.idc_idx for n in fab.nodes})
    for ii in gpu_idcs:
        idc = idcs[ii].name
        for s in range(idcs[ii].sus):
            rows_hn.append(
                _hn(
                    f"hn-{su_name(idc, s)}",
                    1,
                    f"^gpu-{idc}-s{s:03d}-.*$",
                    "Node",
                    "regexMatch",
                    t0,
                    None,
                )
            )
            rows_hn.append(
                _hn(f"hn-{idc}", 2, f"hn-{su_name(idc, s)}", "HyperNode", "exactMatch", t0, None)
            )
        rows_hn.append(_hn("hn-root", 3, f"hn-{idc}", "HyperNode", "exactMatch", t0, None))
    for f in sim.faults:
        if f.kind == "hypernode_drift":
            end = None if f.end_step >= sim.steps else f.end_ms
            rows_hn.append(
                _hn(
                    f.subject,
                    1,
                    fab.nodes[f.target["node"]].name,
                    "Node",
                    "exactMatch",
                    f.start_ms,
                    end,
                )
            )
    rows_job, rows_pod, rows_ip = [], [], []
    rows_nccl: list[dict[str, Any]] = []
    for j in wl.jobs:
        vf = sim.ts(j.start_step)
        vt = None if j.end_step >= sim.steps else sim.ts(j.end_step)
        rows_job.append(
            {
                "namespace": j.namespace,
                "job": j.name,
                "queue": "default",
                "replicas": j.spec.nodes,
                "topology_mode": j.spec.mode,
                "highest_tier_allowed": j.spec.highest_tier if j.spec.mode else None,
                "highest_tier_name": TIER_NAMES.get(j.spec.highest_tier or 0)
                if j.spec.mode
                else None,
                "allocated_hypernode": "" if j.pending else _allocated(fab, j),
                "valid_from": vf,
                "valid_to": vt,
                "updated_at": vt or vf,
            }
        )
        for p in j.pods:
            node = fab.nodes[p.node]
            pvt = None if p.end_step >= sim.steps else sim.ts(p.end_step)
            rows_pod.append(
                {
                    "namespace": p.namespace,
                    "pod": p.name,
                    "uid": p.uid,
                    "node": node.name,
                    "job": j.name,
                    "phase": "Running" if pvt is None else "Succeeded",
                    "gpus": json.dumps([gpu_uuid(p.node, g) for g in range(fab.gpus_per_node)]),
                    "valid_from": vf,
                    "valid_to": pvt,
                    "updated_at": pvt or vf,
                }
            )
            rows_nccl += [
                {
                    "namespace": p.namespace,
                    "pod": p.name,
                    "container": "worker",
                    "name": k,
                    "value": v,
                    "source": "value",
                    "ref": "",
                    "job": j.name,
                    "valid_from": vf,
                    "valid_to": pvt,
                    "updated_at": pvt or vf,
                }
                for k, v in sorted(nccl_env(j.spec).items())
            ]
            base = {
                "namespace": p.namespace,
                "pod": p.name,
                "node": node.name,
                "valid_from": vf,
                "valid_to": pvt,
                "updated_at": pvt or vf,
            }
            rows_ip.append(
                {
                    **base,
                    "ip": p.ip,
                    "interface": "eth0",
                    "network": "",
                    "primary": True,
                    "mac": _mac(0, p.node, p.slot),
                    "pci_address": "",
                }
            )
            for r, ip in enumerate(p.rdma_ips):
                rows_ip.append(
                    {
                        **base,
                        "ip": ip,
                        "interface": f"net{r + 1}",
                        "network": f"rdma-rail{r}",
                        "primary": False,
                        "mac": _mac(r + 1, p.node, p.slot),
                        "pci_address": f"0000:{GPU_BUS[r % 8] + 1:02x}:00.{1 + p.slot % 7}",
                    }
                )
    rows_aff = []
    rails, direct = fab.gpu_rail(), fab.gpu_direct()
    numa = list(fab.model["numa"])  # type: ignore[call-overload]
    gsw = list(fab.model["gpu_switch"])  # type: ignore[call-overload]
    for n in fab.nodes:
        for g in range(fab.gpus_per_node):
            r = rails[g]
            rows_aff.append(
                {
                    "ts": t0,
                    "node": n.name,
                    "gpu": g,
                    "gpu_pci": f"00000000:{GPU_BUS[g]:02X}:00.0",
                    "nic": rdma_device(r) if direct[g] else "",
                    "netdev": netdev(r) if direct[g] else "",
                    "pcie_switch": f"0000:{0x10 + 0x10 * gsw[g]:02x}:00.0",
                    "numa_node": numa[g],
                    "rail": r,
                    "direct_nic": int(direct[g]),
                }
            )
    pool_batches = pool_rows(sim, rows_node, rows_job, rows_pod)
    batches = [
        Batch.from_rows(NODE, rows_node),
        Batch.from_rows(HYPERNODE, rows_hn),
        Batch.from_rows(JOB, rows_job),
        Batch.from_rows(POD, rows_pod),
        Batch.from_rows(POD_IP_LEASE, rows_ip),
        Batch.from_rows(NCCL_SETTING, rows_nccl),
        Batch.from_rows(GPU_NIC_AFFINITY, rows_aff),
        _lldp(sim),
        Batch.from_rows(HDFS_TRANSFER, sim.hdfs.transfers),
        Batch.from_rows(HDFS_BLOCK_PLACEMENT, sim.hdfs.placements),
        Batch.from_rows(GPU_EVENT, _gpu_events(sim)),
        *pool_batches,
    ]
    return batches


def _lldp(sim: InventorySim) -> Batch:
    fab = sim.fabric
    a = np.array([e for e in range(fab.n_eps) if fab.ep_peer[e] >= 0])
    b = np.array([fab.ep_peer[e] for e in a])
    dev = pa.array(fab.ep_device)
    port = pa.array(fab.ep_port)
    chassis = pa.array([_mac(9, stable_hash(d) & 0xFFFFFF, 0) for d in fab.ep_device])
    n = len(a)
    return Batch.of(
        LLDP_LINK,
        record_table(
            LLDP_LINK,
            n,
            {
                "ts": ts_column(np.full(n, sim.start_ms)),
                "local_device": dev.take(a),
                "local_port": port.take(a),
                "remote_device": dev.take(b),
                "remote_port": port.take(b),
                "remote_chassis_id": chassis.take(b),
                "source": pa.array(["sim"] * n),
            },
        ),
    )


def _gpu_events(sim: InventorySim) -> list[dict[str, Any]]:
    rows = []
    for f in sim.faults:
        if f.kind not in ("gpu_xid", "gpu_lost", "gpu_throttle"):
            continue
        node, g = f.target["node"], f.target["gpu"]
        base = {"node": sim.fabric.nodes[node].name, "gpu": g, "uuid": gpu_uuid(node, g)}
        if f.kind == "gpu_throttle":
            rows.append(
                {
                    **base,
                    "ts": f.start_ms,
                    "event": "throttle_start",
                    "xid": 0,
                    "detail": "HW thermal slowdown",
                }
            )
            if f.end_step < sim.steps:
                rows.append(
                    {**base, "ts": f.end_ms, "event": "throttle_end", "xid": 0, "detail": ""}
                )
        else:
            xid = int(f.detail["xid"])
            text = {79: "GPU has fallen off the bus", 48: "Double Bit ECC Error"}.get(
                xid, "Xid error"
            )
            rows.append(
                {
                    **base,
                    "ts": f.start_ms,
                    "event": "xid",
                    "xid": xid,
                    "detail": f"NVRM: Xid (PCI:0000:{GPU_BUS[g]:02x}:00): {xid}, {text}",
                }
            )
            if f.kind == "gpu_lost":
                rows.append(
                    {
                        **base,
                        "ts": f.start_ms + 1,
                        "event": "gpu_lost",
                        "xid": 79,
                        "detail": "NVML_ERROR_GPU_IS_LOST",
                    }
                )
    return rows


def _hn(
    name: str, tier: int, member: str, mtype: str, sel: str, vf: int, vt: int | None
) -> dict[str, Any]:
    return {
        "hypernode": name,
        "tier": tier,
        "tier_name": TIER_NAMES[tier],
        "member": member,
        "member_type": mtype,
        "selector": sel,
        "valid_from": vf,
        "valid_to": vt,
        "updated_at": vt or vf,
    }


def _allocated(fab: Fabric, j: Job) -> str:
    t = j.tier(fab)
    n = fab.nodes[j.nodes[0]]
    return f"hn-{n.su_name}" if t == 1 else f"hn-{n.idc}" if t == 2 else "hn-root"


def _mac(kind: int, a: int, b: int) -> str:
    v = [0x02, kind & 0xFF, (a >> 16) & 0xFF, (a >> 8) & 0xFF, a & 0xFF, b & 0xFF]
    return ":".join(f"{x:02x}" for x in v)


__all__ = ["InventorySim", "inventory_batches"]
