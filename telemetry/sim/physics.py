"""Epoch physics of the simulated RoCE fabric: per epoch (a stretch of steps in which jobs, faults
and link states hold still) the flows the jobs and faults offer, their ECMP routes, link loads and
each job's pace, ECN marks, PFC pauses, queue watermarks and the GPUs' state, as an `EpochState`.

Solved once per epoch with numpy; the per-step noise and counters are samples.py's. It notes the
ground truth the physics makes (natural ECMP collisions, job paces) on the simulation; it builds
no records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from telemetry.sim.collectives import JobPace, PaceLog
from telemetry.sim.model import Fault, SimView
from telemetry.sim.nccl import connections as nccl_connections
from telemetry.sim.seeding import stable_hash
from telemetry.sim.visibility import dci_utilization, throttle_clock

FRAME = 4154  # RoCEv2 frame with a 4096-byte payload
ROCE_PORT = 4791
BUFFER_BYTES = 64 << 20  # shared buffer a queue may use
# NVML clock-event reason bits
CE_IDLE, CE_SW_POWER, CE_HW_SLOWDOWN, CE_SW_THERMAL, CE_HW_THERMAL = 0x1, 0x4, 0x8, 0x20, 0x40


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


class SolverSim(SimView, Protocol):
    """What the solver reads of a simulation, and where it notes the ground truth it finds."""

    @property
    def natural_ecmp(self) -> list[tuple[int, int, int, float, float]]: ...
    @property
    def pinned_ecmp(self) -> list[tuple[str, int, int, bool]]: ...
    @property
    def paces(self) -> PaceLog: ...
    @property
    def broken_flows(self) -> dict[tuple[str, str, str, int], int]: ...


def _pin(pinned: dict[str, tuple[int, float]], leaf: str, h: int, cand: list[int]) -> int:
    """The uplink a flow of `leaf` takes: its hash's pick among `cand`, unless the leaf is pinned
    (an ECMP collision) and the flow is among the pinned share (by its own hash)."""
    pin = pinned.get(leaf)
    if pin is not None and pin[0] in cand and ((h >> 13) % 1000) < pin[1] * 1000:
        return pin[0]
    return cand[h % len(cand)]


@dataclass
class Flows:
    """The flows offered in one epoch: every job's NCCL connections (one per QP) and injected
    cross-tenant flows."""

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
    """One solved epoch [t0, t1): rates per endpoint, NIC, GPU and flow, before per-step noise."""

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


class EpochSolver:
    """Solves the epochs of one run, in step order, keeping the last one (a chunk's steps mostly
    share it)."""

    def __init__(self, sim: SolverSim, st: np.random.Generator) -> None:
        """`st`: the run's static stream; the background load draws from it first."""
        self.sim = sim
        fab = self.fab = sim.fabric
        sc = sim.scenario
        n_eps = fab.n_eps
        self.n_gpus = len(fab.nodes) * fab.gpus_per_node
        self.cap = np.array(fab.ep_cap_bps) / 8.0  # bytes/s
        self.bg = self.cap * st.uniform(0.01, 0.04, n_eps)
        for pairs in fab.dci.values():
            for ea, eb in pairs:
                self.bg[ea] = self.bg[eb] = self.cap[ea] * sc.fabric.dci.background_ratio
        switch_ids = {name: i for i, (name, _, _) in enumerate(fab.switches)}
        self.ep_switch = np.array([switch_ids.get(d, -1) for d in fab.ep_device])
        self.pod_index = {
            (j.idx, p.node): 1 + k
            for k, (j, p) in enumerate((j, p) for j in sim.workload.jobs for p in j.pods)
        }
        self.boundaries = self._boundaries()
        self._pinned_by: dict[str, str] = {}  # pinned leaf -> the ecmp_collision fault
        self._epoch: EpochState | None = None

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
                    h = stable_hash(j.name, pa_.name, pb.name, r, q)
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
                    h = stable_hash(f.id, q)
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
            h = stable_hash(fl.src_ip[i], fl.dst_ip[i], int(fl.sport[i]), ROCE_PORT)
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
        engine.py's _natural_ecmp_faults). Carried, not offered: a job that another fault stalls
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
        self._note_broken(t0, [f for f in faults if f.kind == "link_flap"], fl, pinned)
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
            elif f.kind == "collective_timeout":
                hung[f.target["job"]] = True  # one rank never enters the collective
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

    def _note_broken(
        self, t0: int, flaps: list[Fault], fl: Flows, pinned: dict[str, tuple[int, float]]
    ) -> None:
        """The job connections a link flap breaks as it first goes down: those routed over its
        link while it was up (their RDMA QPs run out of retries; telemetry/sim/logs.py prints
        what NCCL then logs). Noted as (fault id, source IP, destination IP, job) -> step."""
        first = [f for f in flaps if f.start_step == t0]
        if not first or not len(fl.src):
            return
        up = np.zeros(self.fab.n_eps, dtype=bool)
        fi, _, etx, erx = self._route(fl, up, pinned)
        for f in first:
            eps = list(f.target["eps"])
            on = np.isin(etx, eps) | np.isin(erx, eps)
            for i in sorted({int(x) for x in fi[on]}):
                if int(fl.job[i]) >= 0:
                    key = (f.id, fl.src_ip[i], fl.dst_ip[i], int(fl.job[i]))
                    self.sim.broken_flows.setdefault(key, t0)

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


__all__ = ["EpochSolver", "EpochState", "Flows", "SolverSim"]
