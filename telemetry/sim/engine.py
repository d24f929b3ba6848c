"""The simulation engine (fast path): turns a scenario into record batches of the real kinds
(telemetry/records.py) — GPU, NIC, switch port/queue, sFlow, LLDP, HDFS, inventory — with the
physics of a RoCE fabric, and the ground truth of what it injected.

Time is cut into epochs in which the topology state is constant (jobs, faults, link states); each
epoch is routed and solved once with numpy, then every step adds noise and accumulates counters
(real cumulative counters: downstream rate logic works). It writes nothing itself: callers send the
batches through the pipeline. Same seed and start -> identical records.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from telemetry.pipeline import Batch
from telemetry.records import (
    COLLECTIVE_SAMPLE,
    FLOW_SAMPLE,
    GPU_EVENT,
    GPU_NIC_AFFINITY,
    GPU_SAMPLE,
    HDFS_BLOCK_PLACEMENT,
    HDFS_TRANSFER,
    HYPERNODE,
    JOB,
    KINDS,
    LLDP_LINK,
    NCCL_SETTING,
    NIC_SAMPLE,
    NODE,
    POD,
    POD_IP_LEASE,
    SWITCH_PORT_SAMPLE,
    SWITCH_QUEUE_SAMPLE,
    RecordKind,
)
from telemetry.sim.collectives import CollectiveColumns, PaceLog
from telemetry.sim.collectives import truth as collective_truth
from telemetry.sim.fabric import Fabric, build_fabric, netdev, rdma_device, su_name
from telemetry.sim.faults import Fault, GroundTruth, gpu_uuid, placement_targets, resolve_faults
from telemetry.sim.hdfs import HdfsModel, build_hdfs
from telemetry.sim.nccl import connections as nccl_connections
from telemetry.sim.nccl import env as nccl_env
from telemetry.sim.nccl import truth as nccl_truth
from telemetry.sim.pool import pool_gpus, pool_rows
from telemetry.sim.scenario import Scenario, SpecField
from telemetry.sim.timing import Disturber, device_lists
from telemetry.sim.visibility import apply_floors, dci_utilization, longest_clear, throttle_clock
from telemetry.sim.workload import TIER_NAMES, Job, Workload, expand_jobs, schedule

FRAME = 4154  # RoCEv2 frame with a 4096-byte payload
ROCE_PORT = 4791
PRIO = 3  # lossless RoCE priority / queue
PAUSE_US = 84  # one 400G pause quantum (65535 x 512 bit times) in microseconds
BUFFER_BYTES = 64 << 20  # shared buffer a queue may use
SM_CLOCK_HZ = 1.98e9
MEM_CLOCK_HZ = 2.619e9
GPU_BUS = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB]
# NVML clock-event reason bits
CE_IDLE, CE_SW_POWER, CE_HW_SLOWDOWN, CE_SW_THERMAL, CE_HW_THERMAL = 0x1, 0x4, 0x8, 0x20, 0x40
# one independent random stream per purpose: changing HDFS load never moves a fault's target
_RNG_STREAMS = {"jobs": 1, "faults": 2, "hdfs": 3, "static": 4, "steps": 5, "collectives": 6}


# What counts as an ECMP collision the workload made by itself (see _note_imbalance): the
# ecmp detector's defaults (thresholds.yaml ecmp). An uplink within NATURAL_ECMP_MARGIN of them
# is noted too, but a collision is scored only where it ran clear of them (>= (1 + margin) x
# both) for NATURAL_ECMP_SECONDS; one that ran about at them is not scored either way
# (`Fault.scored`): switch counters carry a few per cent of noise, and a member at 1.62x its
# group's mean is hot in one sample and not in the next.
NATURAL_ECMP_RATIO = 1.6
NATURAL_ECMP_UTIL = 0.5
NATURAL_ECMP_SECONDS = 60
NATURAL_ECMP_MARGIN = 0.1


def _rng(seed: int, stream: str, *extra: int) -> np.random.Generator:
    return np.random.default_rng([seed, _RNG_STREAMS[stream], *extra])


def _h(*parts: object) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


def _pin(pinned: dict[str, tuple[int, float]], leaf: str, h: int, cand: list[int]) -> int:
    """The uplink a flow of `leaf` takes: its hash's pick among `cand`, unless the leaf is pinned
    (an ECMP collision) and the flow is among the pinned share (by its own hash)."""
    pin = pinned.get(leaf)
    if pin is not None and pin[0] in cand and ((h >> 13) % 1000) < pin[1] * 1000:
        return pin[0]
    return cand[h % len(cand)]


def default_start_ms(sc: Scenario, now_s: float | None = None) -> int:
    """The pinned start, or a start such that the run ends at the current minute (store TTLs
    drop old rows on insert, so data must be recent)."""
    if sc.start:
        from datetime import datetime

        return int(datetime.fromisoformat(sc.start.replace("Z", "+00:00")).timestamp() * 1000)
    now = int(now_s if now_s is not None else time.time())
    return (now // 60) * 60_000 - sc.steps * sc.resolution_seconds * 1000


@dataclass
class Flows:
    src: np.ndarray  # NIC endpoint
    dst: np.ndarray
    demand: np.ndarray  # bytes/s offered
    job: np.ndarray  # job index, -1 = not a job's collective
    sport: np.ndarray
    qp: np.ndarray
    src_ip: list[str]
    dst_ip: list[str]


@dataclass
class EpochState:
    t0: int
    t1: int
    tx: np.ndarray  # bytes/s sent by every endpoint
    up: np.ndarray  # bool per endpoint
    ecn_q: np.ndarray  # ECN-marked packets/s at each egress queue
    wm: np.ndarray  # queue watermark bytes
    pause_tx: np.ndarray  # PFC frames/s sent
    wd_storm: np.ndarray  # bool per endpoint (PFC watchdog)
    wd_drop: np.ndarray  # packets/s dropped by the watchdog
    nic_ecn: np.ndarray  # per NIC: ECN-CE packets/s received
    nic_cnp_sent: np.ndarray
    nic_cnp_handled: np.ndarray
    nic_stall: np.ndarray  # pci stalls/s
    nic_storm: np.ndarray  # bool: pause storm
    errors: np.ndarray  # rx errors/s per endpoint
    gpu_util: np.ndarray
    gpu_clock: np.ndarray  # clock factor
    gpu_up: np.ndarray
    gpu_reasons: np.ndarray
    gpu_pod: np.ndarray  # index into pod names (0 = none)
    flow_rate: np.ndarray  # achieved bytes/s per flow
    flow_mark: np.ndarray  # CE fraction per flow
    flows: Flows
    flow_agent: np.ndarray  # ingress leaf switch id
    flow_in: np.ndarray  # endpoint ids
    flow_out: np.ndarray
    # per running job: (network pace, hung) for its collectives (telemetry/sim/collectives.py)
    job_pace: dict[int, tuple[float, bool]] = field(default_factory=dict)


@dataclass
class Simulation:
    scenario: Scenario
    start_ms: int
    fabric: Fabric
    workload: Workload
    faults: list[Fault]
    hdfs: HdfsModel
    chunk_steps: int = 30
    stats: dict[str, int] = field(default_factory=dict)
    # ECMP imbalance the hashing produced by itself, noted while epochs are solved:
    # (uplink endpoint, t0, t1, offered/group mean, offered/capacity)
    natural_ecmp: list[tuple[int, int, int, float, float]] = field(default_factory=list)
    # injected collisions, per epoch: (fault id, t0, t1, whether its uplink ran clear of the
    # thresholds) - a weak one may never (visibility.py)
    pinned_ecmp: list[tuple[str, int, int, bool]] = field(default_factory=list)
    # each job's network pace per epoch, noted while epochs are solved (collective ground truth)
    paces: PaceLog = field(default_factory=PaceLog)

    steps = SpecField[int]("scenario.steps")
    dt = SpecField[int]("scenario.resolution_seconds")

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.steps * self.dt * 1000

    def ts(self, step: int) -> int:
        return self.start_ms + step * self.dt * 1000

    def ground_truth(self) -> GroundTruth:
        """What was injected, plus what the workload created by itself. Natural ECMP imbalance is
        only known once the steps have been generated: write the truth after `batches()`."""
        return GroundTruth(
            self.scenario.name,
            self.scenario.seed,
            self.start_ms,
            self.end_ms,
            self.dt,
            self._floored(self._with_collectives([*self.faults, *self._natural_ecmp_faults()])),
        )

    def _floored(self, faults: list[Fault]) -> list[Fault]:
        """The faults with those under their visibility floor marked (visibility.py)."""
        runs: dict[str, list[tuple[int, int, bool]]] = {}
        for fid, t0, t1, clear in self.pinned_ecmp:
            runs.setdefault(fid, []).append((t0, t1, clear))
        apply_floors(
            faults,
            dt_s=self.dt,
            sampling_rate=self.scenario.sflow.sampling_rate,
            pinned_clear_s={k: longest_clear(v, self.dt) for k, v in runs.items()},
            clear_needed_s=NATURAL_ECMP_SECONDS,
        )
        return faults

    def _with_collectives(self, faults: list[Fault]) -> list[Fault]:
        return [*faults, *collective_truth(self, self.paces, faults), *nccl_truth(self)]

    def _natural_ecmp_faults(self) -> list[Fault]:
        """Merge consecutive epochs of one uplink's natural imbalance; keep those lasting at
        least NATURAL_ECMP_SECONDS, scored where NATURAL_ECMP_SECONDS of them in a row ran clear
        of the thresholds (see NATURAL_ECMP_MARGIN)."""
        fab = self.fabric
        out: list[Fault] = []
        # per uplink, runs of consecutive epochs: [t0, t1, max ratio, max util, the longest
        # clear stretch in steps, the clear stretch going on at t1]
        spans: dict[int, list[list[float]]] = {}
        clear_ratio = NATURAL_ECMP_RATIO * (1 + NATURAL_ECMP_MARGIN)
        clear_util = NATURAL_ECMP_UTIL * (1 + NATURAL_ECMP_MARGIN)
        for ep, t0, t1, ratio, util in sorted(self.natural_ecmp, key=lambda x: (x[0], x[1])):
            clear = ratio >= clear_ratio and util >= clear_util
            runs = spans.setdefault(ep, [])
            if not (runs and runs[-1][1] == t0):
                runs.append([float(t0), float(t0), 0.0, 0.0, 0.0, 0.0])
            run = runs[-1]
            run[1] = t1
            run[2], run[3] = max(run[2], ratio), max(run[3], util)
            run[5] = run[5] + (t1 - t0) if clear else 0.0
            run[4] = max(run[4], run[5])
        for ep, runs in sorted(spans.items()):
            for s0, s1, ratio, util, clear_steps, _ in runs:
                t0, t1 = int(s0), int(s1)
                if (t1 - t0) * self.dt < NATURAL_ECMP_SECONDS:
                    continue
                f = Fault(
                    f"ecmp_collision-w{len(out)}",
                    "ecmp_collision",
                    self.ts(int(t0)),
                    self.ts(int(t1)),
                    "port",
                    fab.ep_name(ep),
                    [
                        fab.ep_name(ep),
                        fab.ep_device[ep],
                        fab.link_name(ep),
                        fab.link_name(fab.ep_peer[ep]),
                    ],
                    origin="workload",
                    start_step=int(t0),
                    end_step=int(t1),
                    scored=clear_steps * self.dt >= NATURAL_ECMP_SECONDS,
                )
                f.detail = {
                    "max_over_mean": round(ratio, 3),
                    "utilization": round(util, 3),
                    "clear_seconds": int(clear_steps * self.dt),
                }
                out.append(f)
        return out

    # -- the whole run -----------------------------------------------------------------------
    def batches(self, *, disturbed: bool = True) -> Iterator[list[Batch]]:
        """Inventory and static facts first, then one list of batches per chunk of steps. With
        `disturbed` (the default) the samples carry the scenario's collection timing (timing.py:
        phases, jitter, lost and duplicated polls, restarts); without, every sample sits on the
        step grid (the device path renders those and disturbs what its parsers read)."""
        dist = self.disturber() if disturbed else None
        inv = self.inventory_batches()
        if dist is not None:
            dist.inventory({b.kind.name: b.table for b in inv})
            inv = dist.batches(inv)
        yield inv
        gen = _StepGen(self)
        for c0 in range(0, self.steps, self.chunk_steps):
            c1 = min(self.steps, c0 + self.chunk_steps)
            out = gen.chunk(c0, c1)
            if dist is not None:
                out = dist.batches(out) + [
                    Batch(LLDP_LINK, t) for t in dist.relearned_lldp(*self.sampled(c0, c1))
                ]
            yield out

    def sampled(self, c0: int, c1: int) -> tuple[int, int]:
        """[lo, hi) ms holding the samples of steps c0 .. c1 - 1 as devices take them (each step's
        within the interval before its grid point); the first and last steps hold what lies
        before and after the run."""
        lo = self.ts(c0) - self.dt * 1000 if c0 > 0 else -(2**62)
        hi = self.ts(c1) - self.dt * 1000 if c1 < self.steps else 2**62
        return lo, hi

    def disturber(self) -> Disturber | None:
        """The scenario's collection timing as a fresh Disturber (None: ideal timing)."""
        spec = self.scenario.telemetry
        gaps = [
            (f.target["class"], f.target["device"], f.start_ms, f.end_ms)
            for f in self.faults
            if f.kind == "collection_gap"
        ]
        if spec.ideal and not gaps:
            return None
        return Disturber(
            spec,
            self.scenario.seed,
            self.start_ms,
            self.dt * 1000,
            self.end_ms,
            device_lists(
                (n.name for n in self.fabric.nodes), (s for s, _, _ in self.fabric.switches)
            ),
            gaps,
        )

    @property
    def n_chunks(self) -> int:
        return 1 + (self.steps + self.chunk_steps - 1) // self.chunk_steps

    # -- inventory ---------------------------------------------------------------------------
    def inventory_batches(self) -> list[Batch]:
        fab, sc, wl = self.fabric, self.scenario, self.workload
        t0 = self.start_ms
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
                    _hn(
                        f"hn-{idc}", 2, f"hn-{su_name(idc, s)}", "HyperNode", "exactMatch", t0, None
                    )
                )
            rows_hn.append(_hn("hn-root", 3, f"hn-{idc}", "HyperNode", "exactMatch", t0, None))
        for f in self.faults:
            if f.kind == "hypernode_drift":
                end = None if f.end_step >= self.steps else f.end_ms
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
            vf = self.ts(j.start_step)
            vt = None if j.end_step >= self.steps else self.ts(j.end_step)
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
                pvt = None if p.end_step >= self.steps else self.ts(p.end_step)
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
        pool_batches = pool_rows(self, rows_node, rows_job, rows_pod)
        batches = [
            Batch.from_rows(NODE, rows_node),
            Batch.from_rows(HYPERNODE, rows_hn),
            Batch.from_rows(JOB, rows_job),
            Batch.from_rows(POD, rows_pod),
            Batch.from_rows(POD_IP_LEASE, rows_ip),
            Batch.from_rows(NCCL_SETTING, rows_nccl),
            Batch.from_rows(GPU_NIC_AFFINITY, rows_aff),
            self._lldp(),
            Batch.from_rows(HDFS_TRANSFER, self.hdfs.transfers),
            Batch.from_rows(HDFS_BLOCK_PLACEMENT, self.hdfs.placements),
            Batch.from_rows(GPU_EVENT, self._gpu_events()),
            *pool_batches,
        ]
        return batches

    def _lldp(self) -> Batch:
        fab = self.fabric
        a = np.array([e for e in range(fab.n_eps) if fab.ep_peer[e] >= 0])
        b = np.array([fab.ep_peer[e] for e in a])
        dev = pa.array(fab.ep_device)
        port = pa.array(fab.ep_port)
        chassis = pa.array([_mac(9, _h(d) & 0xFFFFFF, 0) for d in fab.ep_device])
        n = len(a)
        return Batch.of(
            LLDP_LINK,
            _table(
                LLDP_LINK,
                n,
                {
                    "ts": _ts(np.full(n, self.start_ms)),
                    "local_device": dev.take(a),
                    "local_port": port.take(a),
                    "remote_device": dev.take(b),
                    "remote_port": port.take(b),
                    "remote_chassis_id": chassis.take(b),
                    "source": pa.array(["sim"] * n),
                },
            ),
        )

    def _gpu_events(self) -> list[dict[str, Any]]:
        rows = []
        for f in self.faults:
            if f.kind not in ("gpu_xid", "gpu_lost", "gpu_throttle"):
                continue
            node, g = f.target["node"], f.target["gpu"]
            base = {"node": self.fabric.nodes[node].name, "gpu": g, "uuid": gpu_uuid(node, g)}
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
                if f.end_step < self.steps:
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


def _ts(ms: np.ndarray) -> pa.Array:
    return pa.array(ms.astype(np.int64), type=pa.timestamp("ms", tz="UTC"))


def _table(kind: RecordKind, n: int, cols: dict[str, Any]) -> pa.Table:
    """A table of `kind` from column arrays; absent nullable fields are null, absent strings ''."""
    arrays = []
    for f in kind.fields:
        c = cols.get(f.name)
        if c is None:
            if f.nullable:
                arrays.append(pa.nulls(n, f.arrow_type))
            elif f.arrow_type == pa.string():
                arrays.append(_const("", n))
            else:
                raise ValueError(f"{kind.name}.{f.name}: no values")
            continue
        if not isinstance(c, pa.Array | pa.ChunkedArray):
            c = pa.array(c, type=f.arrow_type, from_pandas=True)
        elif c.type != f.arrow_type:
            c = c.cast(f.arrow_type)
        arrays.append(c)
    return pa.Table.from_arrays(arrays, schema=kind.arrow_schema)


def _const(value: str, n: int) -> pa.Array:
    return pa.array([value], pa.string()).take(np.zeros(n, dtype=np.int32))


def _masked(values: np.ndarray, valid: np.ndarray | None, type_: pa.DataType) -> pa.Array:
    if valid is None or valid.all():
        return pa.array(values, type=type_)
    return pa.array(values, type=type_, mask=~valid)


def build(
    sc: Scenario, *, now_s: float | None = None, chunk_steps: int | None = None
) -> Simulation:
    """Build fabric, workload, faults and HDFS events for a scenario (no records yet)."""
    fab = build_fabric(sc)
    specs = expand_jobs(fab, _rng(sc.seed, "jobs"))
    placement = placement_targets(sc, specs)
    wl = schedule(fab, specs, set(placement.values()), sc.seed)
    start = default_start_ms(sc, now_s)
    faults = resolve_faults(sc, fab, wl, placement, start, _rng(sc.seed, "faults"))
    hdfs = build_hdfs(fab, faults, start, _rng(sc.seed, "hdfs"))
    if chunk_steps is None:  # about a million rows per chunk bounds memory at any size
        per_step = len(fab.nodes) * fab.gpus_per_node + fab.n_nics + 2 * (fab.n_eps - fab.n_nics)
        chunk_steps = max(1, min(30, 1_000_000 // max(per_step, 1)))
    return Simulation(sc, start, fab, wl, faults, hdfs, chunk_steps)


# --- physics --------------------------------------------------------------------------------
class _StepGen:
    """Solves epochs and emits per-step records, carrying counters across chunks."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        fab = self.fab = sim.fabric
        sc = sim.scenario
        n_eps, n_nics = fab.n_eps, fab.n_nics
        self.n_gpus = len(fab.nodes) * fab.gpus_per_node
        self.peer = np.array(fab.ep_peer, dtype=np.int64)
        self.cap = np.array(fab.ep_cap_bps) / 8.0  # bytes/s
        st = _rng(sc.seed, "static")
        self.bg = self.cap * st.uniform(0.01, 0.04, n_eps)
        for pairs in fab.dci.values():
            for ea, eb in pairs:
                self.bg[ea] = self.bg[eb] = self.cap[ea] * sc.fabric.dci.background_ratio
        self.sw = np.arange(n_nics, n_eps)
        # counters start where a long-running device would be
        self.c_ep = {k: st.uniform(1e11, 1e13, n_eps) for k in ("txb", "rxb")}
        self.c_ep.update(
            {
                k: np.zeros(n_eps)
                for k in ("ecn", "ptx", "prx", "pdur", "err", "down", "wdst", "wdd", "qtx")
            }
        )
        self.c_nic = {k: np.zeros(n_nics) for k in ("ecn", "cnps", "cnph", "stall", "storm")}
        self.c_gpu = {
            "energy": st.uniform(1e8, 1e9, self.n_gpus),
            "pviol": np.zeros(self.n_gpus),
            "tviol": np.zeros(self.n_gpus),
            "xid": np.zeros(self.n_gpus),
            "ecc_c": np.zeros(self.n_gpus),
            "ecc_u": np.zeros(self.n_gpus),
        }
        self.prev_down = np.zeros(n_eps, dtype=bool)
        self.switch_ids = {name: i for i, (name, _, _) in enumerate(fab.switches)}
        self.ep_switch = np.array([self.switch_ids.get(d, -1) for d in fab.ep_device])
        self.pod_names = [("", "")] + [
            (p.name, p.namespace) for j in sim.workload.jobs for p in j.pods
        ]
        self.pod_index = {
            (j.idx, p.node): 1 + k
            for k, (j, p) in enumerate((j, p) for j in sim.workload.jobs for p in j.pods)
        }
        self.boundaries = self._boundaries()
        self._pinned_by: dict[str, str] = {}  # pinned leaf -> the ecmp_collision fault
        self._epoch: EpochState | None = None
        self.rails = np.array(fab.gpu_rail())
        self.gpu_node = np.repeat(np.arange(len(fab.nodes)), fab.gpus_per_node)
        self.power_limit = float(fab.model["power_limit_watts"])  # type: ignore[arg-type]
        self.mem_total = float(fab.model["memory_bytes"])  # type: ignore[arg-type]
        self.cols = self._static_columns()
        self.collectives = CollectiveColumns(sim)

    def _static_columns(self) -> dict[str, Any]:
        """Label columns that are the same every step, built once."""
        fab = self.fab
        nn, sw = fab.n_nics, self.sw
        nics = np.arange(nn)
        names = pa.array([n.name for n in fab.nodes])
        gidx = np.tile(np.arange(fab.gpus_per_node), len(fab.nodes))
        return {
            "nic_node": names.take(nics // fab.nics_per_node),
            "nic_dev": pa.array([rdma_device(r) for r in range(fab.nics_per_node)]).take(
                nics % fab.nics_per_node
            ),
            "nic_netdev": pa.array([netdev(r) for r in range(fab.nics_per_node)]).take(
                nics % fab.nics_per_node
            ),
            "nic_ll": _const("Ethernet", nn),
            "sw_dev": pa.array(fab.ep_device).take(sw),
            "sw_port": pa.array(fab.ep_port).take(sw),
            "sw_role": pa.array(fab.ep_role).take(sw),
            "sw_qtype": _const("unicast", len(sw)),
            "gpu_node": names.take(self.gpu_node),
            "gpu_idx": gidx.astype(np.uint16),
            "gpu_uuid": pa.array(
                [gpu_uuid(int(a), int(b)) for a, b in zip(self.gpu_node, gidx, strict=True)]
            ),
            "gpu_mig": _const("", self.n_gpus),
            "gpu_model": _const(str(fab.model["gpu_model"]), self.n_gpus),
            "gpu_bus": pa.array(
                [f"00000000:{GPU_BUS[k % 8]:02X}:00.0" for k in range(fab.gpus_per_node)]
            ).take(gidx),
            "pods": pa.array([p for p, _ in self.pod_names]),
            "pod_ns": pa.array([s for _, s in self.pod_names]),
            "sw_names": pa.array([s for s, _, _ in fab.switches]),
            "agents": pa.array([f"10.254.{i // 256}.{i % 256}" for i in range(len(fab.switches))]),
            "ports": pa.array(fab.ep_port),
        }

    # epochs ------------------------------------------------------------------------------------
    def _boundaries(self) -> list[int]:
        b = {0, self.sim.steps}
        for j in self.sim.workload.jobs:
            b |= {j.start_step, j.end_step}
        for f in self.sim.faults:
            b |= {f.start_step, f.end_step}
            if f.kind == "link_flap":
                b |= set(range(f.start_step, f.end_step))
        return sorted(x for x in b if 0 <= x <= self.sim.steps)

    def epoch(self, t: int) -> EpochState:
        if self._epoch is not None and self._epoch.t0 <= t < self._epoch.t1:
            return self._epoch
        i = max(k for k, v in enumerate(self.boundaries) if v <= t)
        t0, t1 = self.boundaries[i], self.boundaries[i + 1]
        self._epoch = self._solve(t0, t1)
        return self._epoch

    def _active(self, t: int) -> list[Fault]:
        return [
            f for f in self.sim.faults if f.start_step <= t < f.end_step and f.origin == "injected"
        ]

    def _flows(self, t: int, faults: list[Fault]) -> Flows:
        fab = self.fab
        src, dst, dem, job, sport, qp, sip, dip = [], [], [], [], [], [], [], []
        for j in self.sim.workload.running(t):
            pods = j.pods
            per = j.spec.gbps_per_nic * 1e9 / 8 / j.spec.qps
            for a, b, r, rb, w in nccl_connections(j, fab.nics_per_node):
                pa_, pb = pods[a], pods[b]
                for q in range(j.spec.qps):
                    h = _h(j.name, pa_.name, pb.name, r, q)
                    src.append(fab.nic_ep(pa_.node, r))
                    dst.append(fab.nic_ep(pb.node, rb))
                    dem.append(per * w)
                    job.append(j.idx)
                    sport.append(49152 + h % 16384)
                    qp.append(0x100 + (h >> 8) % 0xFFFF00)
                    sip.append(pa_.rdma_ips[r])
                    dip.append(pb.rdma_ips[rb])
        for f in faults:
            if f.kind == "cross_tenant_flow":
                tg = f.target
                for q in range(2):
                    h = _h(f.id, q)
                    src.append(fab.nic_ep(tg["src_node"], 0))
                    dst.append(fab.nic_ep(tg["dst_node"], 0))
                    dem.append(10e9 / 8 * tg["severity"])
                    job.append(-1)
                    sport.append(49152 + h % 16384)
                    qp.append(0x100 + (h >> 8) % 0xFFFF00)
                    sip.append(tg["src_ip"])
                    dip.append(tg["dst_ip"])
        return Flows(
            np.array(src, dtype=np.int64),
            np.array(dst, dtype=np.int64),
            np.array(dem, dtype=float),
            np.array(job, dtype=np.int64),
            np.array(sport, dtype=np.int64),
            np.array(qp, dtype=np.int64),
            sip,
            dip,
        )

    def _route(
        self, fl: Flows, down: np.ndarray, pinned: dict[str, tuple[int, float]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per (flow, hop): tx endpoint and rx endpoint. ECMP picks among live uplinks by a hash of
        the 5-tuple (source port = entropy); a pinned leaf (hash collision) sends a share of its
        flows (the fault's severity; all at 1) to one uplink, chosen by the flows' own hash."""
        fab = self.fab
        f_idx: list[int] = []
        hop_idx: list[int] = []
        tx: list[int] = []
        rx: list[int] = []
        nics = fab.nics_per_node
        X = fab.scenario.fabric.superspines_per_idc

        def live(a: int) -> bool:
            return not down[a]

        for i in range(len(fl.src)):
            s, d = int(fl.src[i]), int(fl.dst[i])
            h = _h(fl.src_ip[i], fl.dst_ip[i], int(fl.sport[i]), ROCE_PORT)
            ns, nd = fab.nodes[s // nics], fab.nodes[d // nics]
            ls = fab.leaf_of[(ns.idc_idx, ns.su, s % nics)]
            ld = fab.leaf_of[(nd.idc_idx, nd.su, d % nics)]
            hops = [(s, fab.nic_leaf_port[s])]
            if ls != ld:
                ups_s, ups_d = fab.leaf_up[ls], fab.leaf_up[ld]
                if ns.idc_idx == nd.idc_idx:
                    cand = [u for u in range(len(ups_s)) if live(ups_s[u]) and live(ups_d[u])]
                    if not cand:
                        cand = list(range(len(ups_s)))
                    u = _pin(pinned, ls, h, cand)
                    hops += [
                        (ups_s[u], fab.spine_down[(ls, u)]),
                        (fab.spine_down[(ld, u)], ups_d[u]),
                    ]
                else:
                    cand = [u for u in range(len(ups_s)) if live(ups_s[u])] or list(
                        range(len(ups_s))
                    )
                    u1 = _pin(pinned, ls, h, cand)
                    a, b = ns.idc_idx, nd.idc_idx
                    links = fab.dci[(min(a, b), max(a, b))]
                    lk = (h >> 4) % len(links)
                    ea, eb = links[lk] if a < b else links[lk][::-1]
                    x = lk % X
                    cand2 = [u for u in range(len(ups_d)) if live(ups_d[u])] or list(
                        range(len(ups_d))
                    )
                    u2 = cand2[(h >> 9) % len(cand2)]
                    hops += [
                        (ups_s[u1], fab.spine_down[(ls, u1)]),
                        (fab.spine_up[(a, u1)][x], fab.sspine_down[(a, u1, x)]),
                        fab.dci_router[(a, x)],
                        (ea, eb),
                        fab.dci_router[(b, x)][::-1],
                        (fab.sspine_down[(b, u2, x)], fab.spine_up[(b, u2)][x]),
                        (fab.spine_down[(ld, u2)], ups_d[u2]),
                    ]
            hops.append((fab.nic_leaf_port[d], d))
            for k, (a_, b_) in enumerate(hops):
                f_idx.append(i)
                hop_idx.append(k)
                tx.append(a_)
                rx.append(b_)
        return (
            np.array(f_idx, dtype=np.int64),
            np.array(hop_idx, dtype=np.int64),
            np.array(tx, dtype=np.int64),
            np.array(rx, dtype=np.int64),
        )

    def _note_imbalance(
        self,
        t0: int,
        t1: int,
        carried: np.ndarray,
        down: np.ndarray,
        pinned: dict[str, tuple[int, float]],
    ) -> None:
        """Hashing alone can put far more traffic on one uplink of a group than on its siblings
        (a few elephant flows over a few links). That is a real collision, so it is ground
        truth too (origin=workload): the load the uplinks carry (`carried`: after every job's
        pace, what their counters show) >= NATURAL_ECMP_RATIO x the group's mean and
        >= NATURAL_ECMP_UTIL of the link (noted from NATURAL_ECMP_MARGIN below them: see
        _natural_ecmp_faults). Carried, not offered: a job that another fault stalls
        (a lost GPU hangs its collectives, a PFC storm paces it) sends little whatever its
        hashing, and its uplinks are then not hot. Injected collisions (pinned leaves) are noted
        apart: whether their uplink ran clear of the thresholds (a weak one may not)."""
        fab = self.fab
        clear_ratio = NATURAL_ECMP_RATIO * (1 + NATURAL_ECMP_MARGIN)
        clear_util = NATURAL_ECMP_UTIL * (1 + NATURAL_ECMP_MARGIN)
        for leaf, (u, _) in pinned.items():
            live = [e for e in fab.leaf_up[leaf] if not down[e]]
            hot = fab.leaf_up[leaf][u]
            if hot not in live or len(live) < 2:
                continue
            load = carried[live] / self.cap[live]
            mean = float(load.mean())
            util = float(carried[hot] / self.cap[hot])
            clear = mean > 0 and util >= clear_ratio * mean and util >= clear_util
            self.sim.pinned_ecmp.append((self._pinned_by[leaf], t0, t1, clear))
        groups = [ups for leaf, ups in fab.leaf_up.items() if leaf not in pinned] + list(
            fab.spine_up.values()
        )
        for ups in groups:
            live = [e for e in ups if not down[e]]
            if len(live) < 2:
                continue
            load = carried[live] / self.cap[live]
            mean = float(load.mean())
            i = int(load.argmax())
            low = 1 - NATURAL_ECMP_MARGIN
            if (
                mean > 0
                and load[i] >= NATURAL_ECMP_RATIO * low * mean
                and load[i] >= NATURAL_ECMP_UTIL * low
            ):
                self.sim.natural_ecmp.append(
                    (live[i], t0, t1, float(load[i]) / mean, float(load[i]))
                )

    def _solve(self, t0: int, t1: int) -> EpochState:
        fab, sim = self.fab, self.sim
        n_eps, n_nics = fab.n_eps, fab.n_nics
        faults = self._active(t0)
        down = np.zeros(n_eps, dtype=bool)
        cap = self.cap.copy()
        pause_tx = np.zeros(n_eps)
        wd = np.zeros(n_eps, dtype=bool)
        errors = np.zeros(n_eps)
        nic_stall = np.zeros(n_nics)
        nic_storm = np.zeros(n_nics, dtype=bool)
        pinned: dict[str, tuple[int, float]] = {}
        extra_tx = np.zeros(n_eps)
        for f in faults:
            tg, sev = f.target, f.target.get("severity", 1.0)
            if f.kind == "link_flap":
                for e in tg["eps"]:
                    errors[e] += 2000 * sev
                if (t0 - f.start_step) % 3 == 0:
                    down[tg["eps"]] = True
            elif f.kind == "ecmp_collision":
                pinned[tg["leaf"]] = (tg["uplink"], min(1.0, sev))
                self._pinned_by[tg["leaf"]] = f.id
            elif f.kind == "pfc_storm":
                pause_tx[tg["nic_ep"]] += 60000 * sev
                nic_storm[tg["nic_ep"]] = True
                cap[tg["leaf_port"]] *= 0.01  # the leaf may not send to a NIC that keeps pausing it
                wd[tg["leaf_port"]] = True
            elif f.kind == "nic_pcie_stall":
                nic_stall[tg["nic_ep"]] += 20000 * sev
                # severity 1: throughput down to 25 %; the loss scales with severity
                cap[tg["nic_ep"]] *= max(0.05, 1.0 - 0.75 * sev)
                cap[tg["leaf_port"]] *= max(0.05, 1.0 - 0.75 * sev)
                pause_tx[tg["nic_ep"]] += 3000 * sev  # its receive buffer fills: it pauses the leaf
            elif f.kind == "dci_saturation":
                a, b = tg["pair"]
                load = dci_utilization(sev) - sim.scenario.fabric.dci.background_ratio
                for ea, eb in fab.dci[(a, b)]:
                    extra_tx[ea] += self.cap[ea] * max(0.0, load)
                    extra_tx[eb] += self.cap[eb] * max(0.0, load)
        cap[down] = 0.0
        fl = self._flows(t0, faults)
        fi, hop, etx, erx = self._route(fl, down, pinned)
        nflows = len(fl.src)
        offered = np.bincount(etx, weights=fl.demand[fi], minlength=n_eps) + self.bg + extra_tx
        ratio = np.where(offered > 0, np.minimum(1.0, cap / np.maximum(offered, 1e-9)), 1.0)
        s_flow = np.ones(nflows)
        np.minimum.at(s_flow, fi, ratio[etx])
        # jobs: slowest link and slowest GPU set the pace (one iteration waits for all ranks)
        jobs = sim.workload.jobs
        s_job = np.ones(len(jobs))
        jm = fl.job >= 0
        np.minimum.at(s_job, fl.job[jm], s_flow[jm])
        k_job = np.ones(len(jobs))
        gpu_clock = np.ones(self.n_gpus)
        gpu_up = np.ones(self.n_gpus, dtype=bool)
        gpu_reasons = np.zeros(self.n_gpus, dtype=np.uint64)
        hung = np.zeros(len(jobs), dtype=bool)
        node_job = np.full(len(fab.nodes), -1)
        for j in sim.workload.running(t0):
            node_job[j.nodes] = j.idx
        for f in faults:
            if f.kind in ("gpu_throttle", "gpu_lost"):
                g = f.target["node"] * fab.gpus_per_node + f.target["gpu"]
                jn = node_job[f.target["node"]]
                if f.kind == "gpu_throttle":
                    gpu_clock[g] = throttle_clock(f.target["severity"])  # visibility.py
                    gpu_reasons[g] |= CE_HW_SLOWDOWN | CE_SW_THERMAL | CE_HW_THERMAL
                    if jn >= 0:
                        k_job[jn] = min(k_job[jn], gpu_clock[g])
                else:
                    gpu_up[g] = False
                    if jn >= 0:
                        hung[jn] = True  # collectives wait forever for the lost rank
        c = np.array([j.spec.comm_fraction for j in jobs]) if jobs else np.zeros(0)
        g_job = 1.0 / ((1 - c) / k_job + c / np.maximum(s_job, 1e-6)) if jobs else np.zeros(0)
        g_job[hung] = 0.0
        job_pace = self._note_paces(t0, t1, s_job, hung, fl, fi, etx, ratio)
        rate = np.where(jm, fl.demand * (g_job[fl.job] if len(jobs) else 1.0), fl.demand * s_flow)
        if nflows:
            rate = np.minimum(rate, fl.demand * np.maximum(s_flow, 0))
        tx = np.bincount(etx, weights=rate[fi], minlength=n_eps) + np.minimum(
            self.bg + extra_tx, cap
        )
        tx = np.minimum(tx, np.maximum(cap, 0))
        tx[down] = 0.0
        self._note_imbalance(t0, t1, tx, down, pinned)
        # congestion: ECN marking grows with offered load; an overloaded lossless queue pauses
        # the ports its traffic came in on, and that pressure fades hop by hop upstream
        o = np.where(cap > 0, offered / np.maximum(cap, 1e-9), 0.0)
        o[:n_nics] = 0.0  # NIC transmit side is paced by DCQCN, no queue of ours
        mark = np.clip((o - 0.8) / 0.6, 0, 1) * 0.3
        mark[down] = 0.0
        f_mark = np.zeros(nflows)
        np.maximum.at(f_mark, fi, mark[etx])
        flow_bytes_at = np.bincount(etx, weights=rate[fi], minlength=n_eps)
        ecn_q = flow_bytes_at * mark / FRAME
        wm = BUFFER_BYTES * np.clip((o - 0.6) / 0.6, 0, 1)
        intensity = np.clip(o - 1.0, 0, 1) * 20000.0
        intensity[wd] = 50000.0
        if len(fi):
            share = fl.demand[fi] / np.maximum(offered[etx], 1e-9)
            for d in range(1, int(hop.max()) + 1):
                idx = np.nonzero(hop >= d)[0]
                up_i = idx - d  # the same flow's hop d earlier (rows are in flow, hop order)
                contrib = intensity[etx[idx]] * share[idx] * 0.5 ** (d - 1)
                np.add.at(pause_tx, erx[up_i], contrib)
        pause_tx[down] = 0.0
        wd_drop = np.where(wd, offered / FRAME * 0.5, 0.0)
        # receiver NIC sees CE marks and answers with CNPs; the sender's NIC handles them
        nic_ecn = (
            np.bincount(fl.dst, weights=rate * f_mark / FRAME, minlength=n_nics)[:n_nics]
            if nflows
            else np.zeros(n_nics)
        )
        cnp = rate * f_mark / FRAME * 0.25
        nic_cnp_sent = (
            np.bincount(fl.dst, weights=cnp, minlength=n_nics)[:n_nics]
            if nflows
            else np.zeros(n_nics)
        )
        nic_cnp_handled = (
            np.bincount(fl.src, weights=cnp, minlength=n_nics)[:n_nics]
            if nflows
            else np.zeros(n_nics)
        )
        # GPUs
        gpu_util = np.zeros(self.n_gpus)
        gpu_pod = np.zeros(self.n_gpus, dtype=np.int64)
        for j in sim.workload.running(t0):
            for p in j.pods:
                sl = slice(p.node * fab.gpus_per_node, (p.node + 1) * fab.gpus_per_node)
                gpu_util[sl] = 0.93 * g_job[j.idx]
                gpu_pod[sl] = self.pod_index[(j.idx, p.node)]
        throttled = gpu_clock < 1
        gpu_util[throttled & (gpu_pod > 0)] = 0.99  # the straggler itself is busy; the others wait
        gpu_reasons[(gpu_util < 0.05) & gpu_up] |= CE_IDLE
        # sFlow: sampled where the flow enters the fabric (its first leaf)
        first = hop == 0
        second = hop == 1
        f_in = erx[first]
        f_out = np.zeros(nflows, dtype=np.int64)
        f_out[fi[second]] = etx[second]
        return EpochState(
            t0,
            t1,
            tx,
            ~down,
            ecn_q,
            wm,
            pause_tx,
            wd,
            wd_drop,
            nic_ecn,
            nic_cnp_sent,
            nic_cnp_handled,
            nic_stall,
            nic_storm,
            errors,
            gpu_util,
            gpu_clock,
            gpu_up,
            gpu_reasons,
            gpu_pod,
            rate,
            f_mark,
            fl,
            self.ep_switch[f_in],
            f_in,
            f_out,
            job_pace,
        )

    def _note_paces(
        self,
        t0: int,
        t1: int,
        s_job: np.ndarray,
        hung: np.ndarray,
        fl: Flows,
        fi: np.ndarray,
        etx: np.ndarray,
        ratio: np.ndarray,
    ) -> dict[int, tuple[float, bool]]:
        """Each running job's network pace and the endpoint that set it (its flows' most
        overloaded hop), for its collectives and their ground truth."""
        from telemetry.sim.collectives import JobPace

        out: dict[int, tuple[float, bool]] = {}
        row_job = fl.job[fi] if len(fi) else np.zeros(0, dtype=np.int64)
        r = ratio[etx] if len(fi) else np.zeros(0)
        for j in self.sim.workload.running(t0):
            m = np.nonzero(row_job == j.idx)[0]
            bottleneck = int(etx[m[int(np.argmin(r[m]))]]) if len(m) else -1
            out[j.idx] = (float(s_job[j.idx]), bool(hung[j.idx]))
            self.sim.paces.note(
                j.idx, JobPace(t0, t1, float(s_job[j.idx]), bottleneck, bool(hung[j.idx]))
            )
        return out

    # records -----------------------------------------------------------------------------------
    def chunk(self, c0: int, c1: int) -> list[Batch]:
        out: dict[str, list[pa.Table]] = {}
        for t in range(c0, c1):
            ep = self.epoch(t)
            rng = _rng(self.sim.scenario.seed, "steps", t)
            for kind, table in self._step(t, ep, rng):
                out.setdefault(kind.name, []).append(table)
        batches = []
        for name, tables in out.items():
            batches.append(Batch(KINDS[name], pa.concat_tables(tables)))
        return batches

    def _step(
        self, t: int, ep: EpochState, rng: np.random.Generator
    ) -> list[tuple[RecordKind, pa.Table]]:
        fab, sim = self.fab, self.sim
        dt = sim.dt
        ts_ms = sim.ts(t)
        n_eps, n_nics = fab.n_eps, fab.n_nics
        noise = rng.lognormal(0.0, 0.03, n_eps)
        tx = ep.tx * noise
        for (a, b), pairs in fab.dci.items():  # HDFS bytes crossing the DCI this step
            per_link = sim.hdfs.dci_bytes[(a, b)][t] / dt / len(pairs) / 2
            for ea, eb in pairs:
                tx[ea] += per_link
                tx[eb] += per_link
        tx = np.minimum(tx, self.cap * ep.up)
        rx = tx[self.peer]  # what one end sends the other receives
        up = ep.up.copy()
        downs = (~up) & (~self.prev_down)
        self.prev_down = ~up
        c = self.c_ep
        c["txb"] += tx * dt
        c["rxb"] += rx * dt
        c["qtx"] += tx * dt
        c["ecn"] += ep.ecn_q * noise * dt
        ptx = ep.pause_tx * noise * dt
        c["ptx"] += ptx
        prx = ptx[self.peer]
        c["prx"] += prx
        c["pdur"] += np.minimum(prx * PAUSE_US, dt * 1e6)
        c["err"] += ep.errors * dt * noise
        c["down"] += downs
        new_storm = ep.wd_storm & (t == ep.t0)
        c["wdst"] += new_storm
        c["wdd"] += ep.wd_drop * dt
        out: list[tuple[RecordKind, pa.Table]] = []
        # NICs
        nn = n_nics
        cn = self.c_nic
        cn["ecn"] += ep.nic_ecn * noise[:nn] * dt
        cn["cnps"] += ep.nic_cnp_sent * noise[:nn] * dt
        cn["cnph"] += ep.nic_cnp_handled * noise[:nn] * dt
        cn["stall"] += ep.nic_stall * dt
        cn["storm"] += ep.nic_storm
        sc_ = self.cols
        out.append(
            (
                NIC_SAMPLE,
                _table(
                    NIC_SAMPLE,
                    nn,
                    {
                        "ts": _ts(np.full(nn, ts_ms)),
                        "node": sc_["nic_node"],
                        "device": sc_["nic_dev"],
                        "port": np.ones(nn, np.uint8),
                        "netdev": sc_["nic_netdev"],
                        "link_layer": sc_["nic_ll"],
                        "up": up[:nn].astype(np.uint8),
                        "rate_bytes_per_second": self.cap[:nn] * (up[:nn]),
                        "rx_bytes_total": c["rxb"][:nn].astype(np.uint64),
                        "tx_bytes_total": c["txb"][:nn].astype(np.uint64),
                        "rx_packets_total": (c["rxb"][:nn] / FRAME).astype(np.uint64),
                        "tx_packets_total": (c["txb"][:nn] / FRAME).astype(np.uint64),
                        "rx_errors_total": c["err"][:nn].astype(np.uint64),
                        "tx_discards_total": np.zeros(nn, np.uint64),
                        "ecn_marked_packets_total": cn["ecn"].astype(np.uint64),
                        "cnp_sent_total": cn["cnps"].astype(np.uint64),
                        "cnp_handled_total": cn["cnph"].astype(np.uint64),
                        "cnp_ignored_total": np.zeros(nn, np.uint64),
                        "pfc_rx_pause_total": c["prx"][:nn].astype(np.uint64),
                        "pfc_tx_pause_total": c["ptx"][:nn].astype(np.uint64),
                        "pfc_pause_duration_us_total": c["pdur"][:nn].astype(np.uint64),
                        "pause_storm_events_total": cn["storm"].astype(np.uint64),
                        "pci_stalled_total": cn["stall"].astype(np.uint64),
                    },
                ),
            )
        )
        # switch ports and their lossless queue
        sw = self.sw
        ns = len(sw)
        sdev, sport, srole = sc_["sw_dev"], sc_["sw_port"], sc_["sw_role"]
        cap = self.cap[sw]
        ts_col = _ts(np.full(ns, ts_ms))
        zeros = np.zeros(ns, np.uint64)
        out.append(
            (
                SWITCH_PORT_SAMPLE,
                _table(
                    SWITCH_PORT_SAMPLE,
                    ns,
                    {
                        "ts": ts_col,
                        "switch": sdev,
                        "port": sport,
                        "role": srole,
                        "up": up[sw].astype(np.uint8),
                        "speed_bps": cap * 8,
                        "rx_bytes_total": c["rxb"][sw].astype(np.uint64),
                        "tx_bytes_total": c["txb"][sw].astype(np.uint64),
                        "rx_packets_total": (c["rxb"][sw] / FRAME).astype(np.uint64),
                        "tx_packets_total": (c["txb"][sw] / FRAME).astype(np.uint64),
                        "rx_discards_total": zeros,
                        "tx_discards_total": c["wdd"][sw].astype(np.uint64),
                        "rx_errors_total": c["err"][sw].astype(np.uint64),
                        "tx_errors_total": zeros,
                        "pfc_rx_pause_total": c["prx"][sw].astype(np.uint64),
                        "pfc_tx_pause_total": c["ptx"][sw].astype(np.uint64),
                        "pfc_rx_pause_duration_us_total": c["pdur"][sw].astype(np.uint64),
                        "link_down_events_total": c["down"][sw].astype(np.uint64),
                        "rx_bytes_per_second": rx[sw],
                        "tx_bytes_per_second": tx[sw],
                        "tx_utilization_ratio": tx[sw] / cap,
                    },
                ),
            )
        )
        out.append(
            (
                SWITCH_QUEUE_SAMPLE,
                _table(
                    SWITCH_QUEUE_SAMPLE,
                    ns,
                    {
                        "ts": ts_col,
                        "switch": sdev,
                        "port": sport,
                        "queue": np.full(ns, PRIO, np.uint8),
                        "queue_type": sc_["sw_qtype"],
                        "tx_packets_total": (c["qtx"][sw] / FRAME).astype(np.uint64),
                        "tx_bytes_total": c["qtx"][sw].astype(np.uint64),
                        "dropped_packets_total": c["wdd"][sw].astype(np.uint64),
                        "ecn_marked_packets_total": c["ecn"][sw].astype(np.uint64),
                        "watermark_bytes": ep.wm[sw] * noise[sw],
                        "pfc_wd_storm_detected": ep.wd_storm[sw].astype(np.uint8),
                        "pfc_wd_storms_total": c["wdst"][sw].astype(np.uint64),
                        "pfc_wd_dropped_packets_total": c["wdd"][sw].astype(np.uint64),
                    },
                ),
            )
        )
        out.append((GPU_SAMPLE, pool_gpus(self.sim, t, self._gpus(t, ts_ms, ep, rng))))
        if sim.scenario.sflow.enabled and len(ep.flow_rate):
            fs = self._sflow(ts_ms, ep, rng)
            if fs is not None:
                out.append((FLOW_SAMPLE, fs))
        cs = self.collectives.table(
            t, ep.job_pace, ep.gpu_clock, _rng(sim.scenario.seed, "collectives", t)
        )
        if cs is not None:
            out.append((COLLECTIVE_SAMPLE, cs))
        return out

    def _gpus(self, t: int, ts_ms: int, ep: EpochState, rng: np.random.Generator) -> pa.Table:
        fab, sim = self.fab, self.sim
        n = self.n_gpus
        dt = sim.dt
        util = np.clip(ep.gpu_util * rng.normal(1.0, 0.02, n), 0, 1)
        busy = ep.gpu_pod > 0
        util[~busy] = 0.0
        clock = ep.gpu_clock
        throttled = clock < 1
        power = np.minimum(
            self.power_limit, 70 + (self.power_limit - 70) * util**0.9 * clock
        ) * rng.normal(1.0, 0.01, n)
        temp = 34 + 40 * util + rng.normal(0, 0.5, n)
        temp[throttled] = 91 + rng.normal(0, 0.5, int(throttled.sum()))
        g = self.c_gpu
        g["energy"] += power * dt
        g["tviol"] += throttled * dt
        xid_now = np.zeros(n)
        for f in sim.faults:
            if f.kind in ("gpu_xid", "gpu_lost") and f.start_step == t:
                k = f.target["node"] * fab.gpus_per_node + f.target["gpu"]
                xid_now[k] += 1
                if f.kind == "gpu_xid" and int(f.detail.get("xid", 48)) in (48, 94, 95):
                    g["ecc_u"][k] += 1
        g["xid"] += xid_now
        valid = ep.gpu_up
        sc_ = self.cols
        f64, u64 = pa.float64(), pa.uint64()
        return _table(
            GPU_SAMPLE,
            n,
            {
                "ts": _ts(np.full(n, ts_ms)),
                "node": sc_["gpu_node"],
                "gpu": sc_["gpu_idx"],
                "uuid": sc_["gpu_uuid"],
                "mig": sc_["gpu_mig"],
                "model": sc_["gpu_model"],
                "pci_bus_id": sc_["gpu_bus"],
                "pod": sc_["pods"].take(ep.gpu_pod),
                "namespace": sc_["pod_ns"].take(ep.gpu_pod),
                "up": valid.astype(np.uint8),
                "utilization_ratio": _masked(util, valid, f64),
                "memory_utilization_ratio": _masked(util * 0.55, valid, f64),
                "memory_used_bytes": _masked(
                    np.where(busy, self.mem_total * 0.82, 5.2e8), valid, f64
                ),
                "memory_total_bytes": _masked(np.full(n, self.mem_total), valid, f64),
                "sm_clock_hertz": _masked(
                    np.where(busy | throttled, SM_CLOCK_HZ * clock, 3.45e8), valid, f64
                ),
                "memory_clock_hertz": _masked(np.full(n, MEM_CLOCK_HZ), valid, f64),
                "temperature_celsius": _masked(temp, valid, f64),
                "memory_temperature_celsius": _masked(temp + 4, valid, f64),
                "power_watts": _masked(power, valid, f64),
                "power_limit_watts": _masked(np.full(n, self.power_limit), valid, f64),
                "energy_joules_total": _masked(g["energy"].astype(np.uint64), valid, u64),
                "clock_event_reasons": _masked(ep.gpu_reasons, valid, u64),
                "power_violation_seconds_total": _masked(g["pviol"].astype(np.uint64), valid, u64),
                "thermal_violation_seconds_total": _masked(
                    g["tviol"].astype(np.uint64), valid, u64
                ),
                "ecc_corrected_errors_total": _masked(g["ecc_c"].astype(np.uint64), valid, u64),
                "ecc_uncorrected_errors_total": _masked(g["ecc_u"].astype(np.uint64), valid, u64),
                "sm_active_ratio": _masked(util * 0.9, valid, f64),
                "tensor_active_ratio": _masked(util * 0.7, valid, f64),
                "xid_errors_total": _masked(g["xid"].astype(np.uint64), valid, u64),
            },
        )

    def _sflow(self, ts_ms: int, ep: EpochState, rng: np.random.Generator) -> pa.Table | None:
        sim = self.sim
        spec = sim.scenario.sflow
        fl = ep.flows
        lam = ep.flow_rate * sim.dt / (FRAME * spec.sampling_rate)
        k = np.minimum(rng.poisson(lam), spec.max_samples_per_flow)
        if not k.any():
            return None
        idx = np.repeat(np.arange(len(k)), k)
        n = len(idx)
        sw_names, agents, ports = self.cols["sw_names"], self.cols["agents"], self.cols["ports"]
        marked = rng.random(n) < ep.flow_mark[idx]
        return _table(
            FLOW_SAMPLE,
            n,
            {
                "ts": _ts(ts_ms + rng.integers(0, sim.dt * 1000, n)),
                "agent": agents.take(ep.flow_agent[idx]),
                "switch": sw_names.take(ep.flow_agent[idx]),
                "in_port": ports.take(ep.flow_in[idx]),
                "out_port": ports.take(ep.flow_out[idx]),
                "src_ip": pa.array(fl.src_ip).take(idx),
                "dst_ip": pa.array(fl.dst_ip).take(idx),
                "src_port": fl.sport[idx].astype(np.uint16),
                "dst_port": np.full(n, ROCE_PORT, np.uint16),
                "protocol": np.full(n, 17, np.uint8),
                "vlan": np.zeros(n, np.uint16),
                "dscp": np.full(n, 26, np.uint8),
                "ecn": np.where(marked, 3, 2).astype(np.uint8),
                "bth_opcode": np.full(n, 7, np.uint8),
                "dest_qp": fl.qp[idx].astype(np.uint32),
                "psn": rng.integers(0, 1 << 24, n).astype(np.uint32),
                "frame_bytes": np.full(n, FRAME, np.uint32),
                "sampling_rate": np.full(n, spec.sampling_rate, np.uint32),
                "bytes": np.full(n, FRAME * spec.sampling_rate, np.uint64),
                "packets": np.full(n, spec.sampling_rate, np.uint64),
            },
        )


__all__ = ["Simulation", "build", "default_start_ms"]
