"""The simulated Kubernetes/Volcano side: nodes, HyperNodes, Volcano jobs placed by a simple
scheduler, pods with primary and Multus RDMA IPs taken from the lowest free slot (so IPs are reused
when pods end). Pure data built from a scenario and a fabric; it never touches a real API server.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np

from telemetry.sim.fabric import Fabric, pod_ip, rdma_ip
from telemetry.sim.scenario import JobSpec, SpecField

TIER_NAMES = {1: "su", 2: "spine", 3: "superspine"}


@dataclass
class Pod:
    name: str
    namespace: str
    job: str
    node: int
    uid: str
    start_step: int
    end_step: int  # exclusive; == steps when still running at the end
    slot: int
    ip: str
    rdma_ips: list[str]


@dataclass
class Job:
    idx: int
    spec: JobSpec
    start_step: int
    end_step: int
    nodes: list[int] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    forced_split: bool = False
    pending: bool = False

    name = SpecField[str]("spec.name")
    namespace = SpecField[str]("spec.tenant")

    @property
    def key(self) -> str:
        return f"{self.spec.tenant}/{self.spec.name}"

    def sus(self, fab: Fabric) -> set[tuple[int, int]]:
        return {(fab.nodes[n].idc_idx, fab.nodes[n].su) for n in self.nodes}

    def tier(self, fab: Fabric) -> int:
        """Lowest HyperNode tier holding all of the job's nodes."""
        if len({fab.nodes[n].idc_idx for n in self.nodes}) > 1:
            return 3
        return 2 if len(self.sus(fab)) > 1 else 1


@dataclass
class Workload:
    jobs: list[Job]
    steps: int

    def running(self, step: int) -> list[Job]:
        return [j for j in self.jobs if not j.pending and j.start_step <= step < j.end_step]


def minute_to_step(minute: float, resolution_s: int, steps: int) -> int:
    return min(steps, max(0, round(minute * 60 / resolution_s)))


def expand_jobs(fab: Fabric, rng: np.random.Generator) -> list[JobSpec]:
    sc = fab.scenario
    specs = list(sc.jobs)
    rj = sc.random_jobs
    for i in range(rj.count):
        soft = bool(rng.random() < rj.soft_ratio)
        nodes = int(rng.choice(rj.nodes))
        specs.append(
            JobSpec.model_validate(
                {
                    "name": f"job-{i:04d}",
                    "tenant": rj.tenants[i % len(rj.tenants)],
                    "nodes": nodes,
                    "mode": "soft" if soft else "hard",
                    "highest_tier": 1 if nodes <= sc.fabric.servers_per_su else 2,
                    "gbps_per_nic": float(rng.uniform(80, 240)),
                    "comm_fraction": float(rng.uniform(0.2, 0.5)),
                }
            )
        )
    return specs


def schedule(fab: Fabric, specs: list[JobSpec], force_split: set[str], seed: int) -> Workload:
    """Place jobs in start order. Tier-1 jobs go best-fit into one SU, larger ones fill the emptiest
    SUs of one IDC; a job named in `force_split` is spread over two SUs whatever it asked for (the
    scheduler "drifts"). A hard job that cannot fit stays pending."""
    sc = fab.scenario
    steps = sc.steps
    jobs = [
        Job(
            i,
            s,
            minute_to_step(s.start_minute, sc.resolution_seconds, steps),
            steps
            if s.end_minute is None
            else minute_to_step(s.end_minute, sc.resolution_seconds, steps),
            forced_split=s.name in force_split,
        )
        for i, s in enumerate(specs)
    ]
    su_nodes: dict[tuple[int, int], list[int]] = {}
    for nd in fab.nodes:
        su_nodes.setdefault((nd.idc_idx, nd.su), []).append(nd.idx)
    busy_until = np.zeros(len(fab.nodes), dtype=np.int64)  # node free from this step on
    node_slots: dict[int, list[tuple[int, int]]] = {}  # node -> [(slot, free_from_step)]
    order = sorted(jobs, key=lambda j: (j.start_step, j.idx))
    for job in order:
        t = job.start_step
        free = {k: [n for n in v if busy_until[n] <= t] for k, v in su_nodes.items()}
        chosen = _place(job, free, fab)
        if chosen is None or job.start_step >= job.end_step:
            job.pending = True
            continue
        job.nodes = chosen
        for rank, n in enumerate(chosen):
            busy_until[n] = job.end_step
            slot = _lowest_free_slot(node_slots.setdefault(n, []), t, job.end_step)
            k = n
            pod_name = f"{job.name}-worker-{rank}"
            job.pods.append(
                Pod(
                    name=pod_name,
                    namespace=job.namespace,
                    job=job.name,
                    node=n,
                    uid=str(
                        uuid.uuid5(
                            uuid.NAMESPACE_URL,
                            f"railscope-sim/{seed}/{job.namespace}/{pod_name}/{t}",
                        )
                    ),
                    start_step=t,
                    end_step=job.end_step,
                    slot=slot,
                    ip=pod_ip(k, slot),
                    rdma_ips=[rdma_ip(k, r, slot) for r in range(fab.nics_per_node)],
                )
            )
    return Workload(jobs, steps)


def _lowest_free_slot(slots: list[tuple[int, int]], start: int, end: int) -> int:
    """IPAM: the lowest slot whose previous holder has ended — this is why pod IPs get reused."""
    for i, (slot, free_from) in enumerate(slots):
        if free_from <= start:
            slots[i] = (slot, end)
            return slot
    slots.append((len(slots), end))
    return len(slots) - 1


def _place(job: Job, free: dict[tuple[int, int], list[int]], fab: Fabric) -> list[int] | None:
    need = job.spec.nodes
    if job.forced_split:
        by_idc: dict[int, list[tuple[int, int]]] = {}
        for k in free:
            by_idc.setdefault(k[0], []).append(k)
        for _idc, keys in sorted(by_idc.items()):
            keys = sorted(keys, key=lambda k: (-len(free[k]), k))[:2]
            if len(keys) == 2 and len(free[keys[0]]) + len(free[keys[1]]) >= need and need >= 2:
                a = min(len(free[keys[0]]), (need + 1) // 2)
                b = need - a
                if b <= len(free[keys[1]]):
                    return free[keys[0]][:a] + free[keys[1]][:b]
        return None
    fits = [k for k, v in free.items() if len(v) >= need]
    if fits:
        best = min(fits, key=lambda k: (len(free[k]), k))
        return free[best][:need]
    if job.spec.mode == "hard" and (job.spec.highest_tier or 3) <= 1:
        return None
    by_idc_free: dict[int, list[tuple[int, int]]] = {}
    for k in free:
        by_idc_free.setdefault(k[0], []).append(k)
    for _idc, keys in sorted(by_idc_free.items()):
        if sum(len(free[k]) for k in keys) >= need:
            out: list[int] = []
            for k in sorted(keys, key=lambda k: (-len(free[k]), k)):
                out += free[k][: need - len(out)]
                if len(out) == need:
                    return out
    if job.spec.mode == "hard" and (job.spec.highest_tier or 3) <= 2:
        return None
    allfree = [n for k in sorted(free) for n in free[k]]
    return allfree[:need] if len(allfree) >= need else None


__all__ = ["TIER_NAMES", "Job", "Pod", "Workload", "expand_jobs", "minute_to_step", "schedule"]
