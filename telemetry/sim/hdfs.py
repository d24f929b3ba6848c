"""Simulated HDFS across IDCs: block reads (normally served in the client's IDC) and checkpoint
writes whose pipeline places replicas evenly over the IDCs (2+2 for 4 replicas over two IDCs).

Produces hdfs_transfer rows (as DataNode clienttrace lines would give them), hdfs_block_placement
rows (as fsck would) and the bytes each step puts on the DCI. It reads no real cluster.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from telemetry.sim.fabric import Fabric, datanode_ip, datanode_name, node_ip
from telemetry.sim.model import Fault

DN_PORT = 9866  # dfs.datanode.address
DISK_BPS = 1.2e9  # one block stream, bytes/s
BLOCK_POOL = "BP-1473-10.251.0.1-1700000000000"


@dataclass
class HdfsModel:
    transfers: list[dict[str, Any]] = field(default_factory=list)
    placements: list[dict[str, Any]] = field(default_factory=list)
    dci_bytes: dict[tuple[int, int], np.ndarray] = field(
        default_factory=dict
    )  # (a<b) -> bytes per step


def build_hdfs(
    fab: Fabric, faults: list[Fault], start_ms: int, rng: np.random.Generator
) -> HdfsModel:
    sc = fab.scenario
    spec = sc.hdfs
    idcs = sc.fabric.idcs
    res = sc.resolution_seconds
    steps = sc.steps
    out = HdfsModel()
    for a in range(len(idcs)):
        for b in range(a + 1, len(idcs)):
            out.dci_bytes[(a, b)] = np.zeros(steps)
    dn_idcs = [i for i, d in enumerate(idcs) if d.datanodes]
    if not dn_idcs:
        return out
    block = spec.block_mb * (1 << 20)
    by_idc_nodes: dict[int, list[int]] = {}
    for n in fab.nodes:
        by_idc_nodes.setdefault(n.idc_idx, []).append(n.idx)
    cross = [f for f in faults if f.kind == "hdfs_cross_idc_read"]
    misplaced = [f for f in faults if f.kind == "hdfs_replica_misplaced"]
    block_seq = 1073741825

    def healthy(local: int) -> list[int]:
        """Replicas spread evenly over the IDCs with DataNodes, the remainder in the writer's IDC
        (2+2 for 4 replicas over two IDCs): the placement policy."""
        order = [local] + [i for i in dn_idcs if i != local]
        return [order[k % len(order)] for k in range(spec.replicas)]

    def dn(idc: int) -> tuple[str, str, str]:
        i = int(rng.integers(idcs[idc].datanodes))
        return (
            datanode_name(idcs[idc].name, i),
            f"{datanode_ip(idc, i)}:{DN_PORT}",
            f"/{idcs[idc].name}/rack{i % 4}",
        )

    def add_dci(a: int, b: int, t: int, nbytes: float) -> None:
        if a != b:
            out.dci_bytes[(min(a, b), max(a, b))][t] += nbytes

    for t in range(steps):
        ts0 = start_ms + t * res * 1000
        for ci, nodes in sorted(by_idc_nodes.items()):
            # reads: training data, served from the client's IDC unless a fault says otherwise
            for _ in range(int(rng.poisson(spec.reads_per_minute * res / 60))):
                client = nodes[int(rng.integers(len(nodes)))]
                src_idc = ci if ci in dn_idcs else dn_idcs[0]
                for f in cross:
                    if (
                        f.start_step <= t < f.end_step
                        and f.target["client_idc"] == ci
                        and rng.random() < min(1.0, 0.6 * f.target["severity"])
                    ):
                        src_idc = f.target["dn_idc"]
                        who = [node_ip(client), fab.nodes[client].name]
                        f.subjects += [w for w in who if w not in f.subjects]
                name, addr, rack = dn(src_idc)
                ts = ts0 + int(rng.integers(res * 1000))
                out.transfers.append(
                    _row(
                        ts,
                        name,
                        "HDFS_READ",
                        addr,
                        f"{node_ip(client)}:{40000 + int(rng.integers(20000))}",
                        idcs[src_idc].name,
                        idcs[ci].name,
                        rack,
                        f"/{idcs[ci].name}/{fab.nodes[client].su_name}",
                        block,
                        f"DFSClient_NONMAPREDUCE_{client}_1",
                        f"blk_{block_seq}",
                        "",
                    )
                )
                block_seq += 1
                add_dci(src_idc, ci, t, block)
            # writes: checkpoint blocks, pipeline client -> local DNs -> remote DNs
            for _ in range(int(rng.poisson(spec.writes_per_minute * res / 60))):
                client = nodes[int(rng.integers(len(nodes)))]
                local = ci if ci in dn_idcs else dn_idcs[0]
                others = [i for i in dn_idcs if i != local]
                plan = sorted(healthy(local), key=lambda i: i != local)
                want = _counts(plan, idcs)
                bad = next((f for f in misplaced if f.start_step <= t < f.end_step), None)
                # severity: the share of the writes placed against the policy (all at 1), by the
                # block's own hash (no draw: the rest of the run is the same at any severity)
                if bad is not None and _share(block_seq) >= bad.target["severity"]:
                    bad = None
                if bad is not None and others:
                    plan = _misplaced(local, others[0], spec.replicas, want, idcs)
                blk = f"blk_{block_seq}"
                block_seq += 1
                path = f"/checkpoints/{fab.nodes[client].su_name}/step-{t:05d}/shard-{client}.pt"
                ts = ts0 + int(rng.integers(res * 1000))
                prev_addr, prev_idc, prev_rack = (
                    f"{node_ip(client)}:{40000 + int(rng.integers(20000))}",
                    ci,
                    f"/{idcs[ci].name}/{fab.nodes[client].su_name}",
                )
                locs = []
                for k, idc in enumerate(plan):
                    name, addr, rack = dn(idc)
                    mode = spec.write_mode if idc != local else "sync"
                    out.transfers.append(
                        _row(
                            ts + k * 50,
                            name,
                            "HDFS_WRITE",
                            prev_addr,
                            addr,
                            idcs[prev_idc].name,
                            idcs[idc].name,
                            prev_rack,
                            rack,
                            block,
                            f"DFSClient_NONMAPREDUCE_{client}_1",
                            blk,
                            mode,
                        )
                    )
                    add_dci(prev_idc, idc, t, block)
                    prev_addr, prev_idc, prev_rack = addr, idc, rack
                    locs.append(f"{rack}/{name}")
                counts = _counts(plan, idcs)
                violation = counts != want
                reason = ""
                if violation:
                    reason = f"replicas per IDC {json.dumps(counts, sort_keys=True)}, policy {json.dumps(want, sort_keys=True)}"
                    if bad is not None:
                        bad.subjects += [f"{BLOCK_POOL}:{blk}_1001", blk, path]
                out.placements.append(
                    {
                        "ts": ts,
                        "path": path,
                        "block_id": f"{BLOCK_POOL}:{blk}_1001",
                        "replicas": len(plan),
                        "expected_replicas": spec.replicas,
                        "replicas_by_idc": json.dumps(counts, sort_keys=True),
                        "locations": json.dumps(locs),
                        "violation": violation,
                        "reason": reason,
                    }
                )
    for f in misplaced:
        blocks = [s for s in f.subjects if s.startswith(BLOCK_POOL)]
        f.subject = blocks[0] if blocks else "(no block written in the window)"
        f.detail["blocks"] = len(blocks)
        f.scored = bool(blocks)  # no block written while it held: nothing could show it
    return out


def _share(n: int) -> float:
    """A fixed number in [0, 1) for block `n`."""
    import zlib

    return (zlib.crc32(f"block|{n}".encode()) % 10_000) / 10_000


def _misplaced(local: int, other: int, replicas: int, want: dict[str, int], idcs: Any) -> list[int]:
    """A writer's pipeline that breaks the placement policy: one replica remote and the rest
    local, or (where that is the policy: 3 replicas over two IDCs is 2 + 1) all of them local,
    or all remote."""
    for plan in ([local] * (replicas - 1) + [other], [local] * replicas, [other] * replicas):
        if _counts(plan, idcs) != want:
            return plan
    return [local] * replicas


def _counts(plan: list[int], idcs: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in plan:
        out[idcs[i].name] = out.get(idcs[i].name, 0) + 1
    return out


def _row(
    ts: int,
    datanode: str,
    op: str,
    src: str,
    dest: str,
    src_idc: str,
    dest_idc: str,
    src_rack: str,
    dest_rack: str,
    nbytes: int,
    client: str,
    blk: str,
    mode: str,
) -> dict[str, Any]:
    return {
        "ts": ts,
        "datanode": datanode,
        "op": op,
        "src": src,
        "dest": dest,
        "src_idc": src_idc,
        "dest_idc": dest_idc,
        "src_rack": src_rack,
        "dest_rack": dest_rack,
        "bytes": nbytes,
        "client_id": client,
        "block_id": f"{BLOCK_POOL}:{blk}_1001",
        "duration_seconds": nbytes / DISK_BPS,
        "cross_idc": src_idc != dest_idc,
        "write_mode": mode,
    }


__all__ = ["HdfsModel", "build_hdfs"]
