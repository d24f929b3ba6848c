"""The simulated GPU pool around the scenario's jobs (the scenario's `pool:` section): GPU models
per SU, Volcano queues with GPU quotas, PriorityClasses with provisioning types, and the pool
faults — idle holders, fillers that fragment an SU so a pending gang cannot start, a queue under
its guarantee with a gang waiting while the jobs' queue holds more than it deserves — plus Spot
pods preempted for Reserved ones (pod events).

Only adds to what the engine generates: inventory rows (`pool_rows`) and the GPU samples of the
nodes the pool places pods on (`pool_gpus`). Nodes used by the scenario's jobs are never touched.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from exporters.inventory.objects import GPU_PRODUCT
from telemetry.contracts import Batch
from telemetry.errors import ConfigError
from telemetry.records import POD_EVENT, PODGROUP, PRIORITY_CLASS, QUEUE

if TYPE_CHECKING:
    from telemetry.sim.fabric import Fabric
    from telemetry.sim.model import Fault, SimView
    from telemetry.sim.scenario import FaultSpec
    from telemetry.sim.workload import Workload

POOL_FAULTS = (
    "gpu_idle_allocated",
    "gang_blocked_by_fragmentation",
    "queue_over_guarantee_starving",
)
FILLER_GPUS = 4  # of 8: leaves every node of the fragmented SU half free
FILLER_UTIL, SPOT_UTIL, SERVE_UTIL = 0.7, 0.6, 0.5


@dataclass
class PoolPod:
    namespace: str
    name: str
    node: int
    gpus: int
    util: float
    start_step: int
    end_step: int
    priority_class: str
    queue: str
    uid: str = ""

    def __post_init__(self) -> None:
        self.uid = hashlib.sha1(f"{self.namespace}/{self.name}".encode()).hexdigest()[:32]


@dataclass
class Gang:
    namespace: str
    podgroup: str
    queue: str
    members: int
    gpus_per_member: int
    model: str
    start_step: int
    end_step: int


@dataclass
class Plan:
    models: dict[int, str]  # node index -> nvidia.com/gpu.product
    pods: list[PoolPod] = field(default_factory=list)
    gangs: list[Gang] = field(default_factory=list)
    preemptions: list[tuple[PoolPod, PoolPod]] = field(default_factory=list)  # (victim, by)


def resolve(f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: Any, where: str) -> None:
    """Ground truth of a pool fault: its subject is the scenario's `target` (NAMESPACE/POD,
    NAMESPACE/PODGROUP or a queue), which `plan` builds the objects for."""
    if not spec.target:
        raise ConfigError(f"{where}.target: a {spec.kind} fault names its subject")
    f.subject_type = {
        "gpu_idle_allocated": "pod",
        "gang_blocked_by_fragmentation": "podgroup",
        "queue_over_guarantee_starving": "queue",
    }[spec.kind]
    f.subject = spec.target
    f.subjects = [spec.target]
    if spec.kind != "queue_over_guarantee_starving" and "/" not in spec.target:
        raise ConfigError(f"{where}.target: {spec.target!r} is not NAMESPACE/NAME")


def plan(sim: SimView) -> Plan | None:
    """Where the pool's pods go and which gangs wait (deterministic; once per simulation)."""
    pool = sim.scenario.pool
    if pool is None:
        return None
    cached = sim.__dict__.get("_pool_plan")  # kept on the simulation it belongs to
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    fab, steps = sim.fabric, sim.steps
    sus = sorted({(n.idc_idx, n.su) for n in fab.nodes})
    default = str(fab.model["gpu_model"]).replace(" ", "-")
    models = {
        i: (
            pool.gpu_models[sus.index((n.idc_idx, n.su)) % len(pool.gpu_models)]
            if pool.gpu_models
            else default
        )
        for i, n in enumerate(fab.nodes)
    }
    used = {n for j in sim.workload.jobs for n in j.nodes}
    free = [i for i in range(len(fab.nodes)) if i not in used]
    first_model, last_model = models[0], models[len(fab.nodes) - 1]
    p = Plan(models)
    gpn = fab.gpus_per_node

    def take(model: str, what: str) -> int:
        for i in free:
            if models[i] == model:
                free.remove(i)
                return i
        raise ConfigError(f"scenario {sim.scenario.name}: no free {model} node left for {what}")

    for f in sim.faults:
        if f.kind == "gpu_idle_allocated":
            ns, name = f.subject.split("/", 1)
            node = take(first_model, f.subject)
            p.pods.append(
                PoolPod(
                    ns,
                    name,
                    node,
                    gpn,
                    0.0,
                    f.start_step,
                    f.end_step,
                    pool.holder_priority_class,
                    pool.job_queue,
                )
            )
    half = steps // 2
    for k in range(pool.spot_preemptions):
        node = take(first_model, "a Spot pod")
        spot = PoolPod("spot", f"spot-{k}", node, gpn, SPOT_UTIL, 0, half,
                       pool.spot_priority_class, pool.job_queue)  # fmt: skip
        serve = PoolPod("serving", f"serve-{k}", node, gpn, SERVE_UTIL, half, steps,
                        pool.job_priority_class, pool.job_queue)  # fmt: skip
        p.pods += [spot, serve]
        p.preemptions.append((spot, serve))
    for f in sim.faults:
        if f.kind == "gang_blocked_by_fragmentation":
            rest = [i for i in free if models[i] == last_model]
            if len(rest) * (gpn - FILLER_GPUS) < 2 * gpn:
                raise ConfigError(
                    f"scenario {sim.scenario.name}: {f.subject} needs at least "
                    f"{2 * gpn // (gpn - FILLER_GPUS)} free {last_model} nodes to fragment"
                )
            for i in rest:
                free.remove(i)
                p.pods.append(
                    PoolPod(
                        "fill",
                        f"fill-{fab.nodes[i].name}",
                        i,
                        FILLER_GPUS,
                        FILLER_UTIL,
                        0,
                        steps,
                        pool.job_priority_class,
                        pool.job_queue,
                    )
                )
            ns, pg = f.subject.split("/", 1)
            p.gangs.append(
                Gang(ns, pg, pool.gang_queue, 2, gpn, last_model, f.start_step, f.end_step)
            )
        elif f.kind == "queue_over_guarantee_starving":
            # bigger than the whole pool: it waits for capacity, not because of fragmentation
            members = len(fab.nodes) + 1
            p.gangs.append(Gang(f"queue-{f.subject}", f"{f.subject}-wait", f.subject, members, gpn,
                                "", f.start_step, f.end_step))  # fmt: skip
    sim.__dict__["_pool_plan"] = p
    return p


def pool_rows(
    sim: SimView,
    rows_node: list[dict[str, Any]],
    rows_job: list[dict[str, Any]],
    rows_pod: list[dict[str, Any]],
) -> list[Batch]:
    """GPU fields on the engine's node/job/pod rows (in place), the pool's pods appended to
    `rows_pod`, and the pool's own kinds as extra batches."""
    gpn = sim.fabric.gpus_per_node
    pool = sim.scenario.pool
    pl = plan(sim)
    by_name = {n.name: i for i, n in enumerate(sim.fabric.nodes)}
    for r in rows_node:
        labels = json.loads(r["labels"])
        if pl is not None:
            labels[GPU_PRODUCT] = pl.models[by_name[r["node"]]]
            r["labels"] = json.dumps(labels, sort_keys=True)
        r["gpu_capacity"] = gpn
        r["gpu_model"] = labels.get(GPU_PRODUCT, "")
    for r in rows_pod:
        r["gpu_requests"] = gpn
    if pool is None or pl is None:
        return []
    for r in rows_job:
        r["queue"] = pool.job_queue
    for r in rows_pod:
        r["priority_class"] = pool.job_priority_class
        r["podgroup"] = r["job"]
    t0 = sim.start_ms
    rows_pg = []
    for r in rows_job:
        rows_pg.append(
            {"namespace": r["namespace"], "podgroup": r["job"], "job": r["job"],
             "queue": pool.job_queue, "priority_class": pool.job_priority_class,
             "min_member": r["replicas"], "min_gpus": r["replicas"] * gpn, "phase": "Running",
             "unschedulable": False, "reason": "", "valid_from": r["valid_from"],
             "valid_to": r["valid_to"], "updated_at": r["updated_at"]}
        )  # fmt: skip

    def until(step: int) -> int | None:
        return None if step >= sim.steps else sim.ts(step)

    for pp in pl.pods:  # each pool pod is a one-member gang of its own queue
        vt = until(pp.end_step)
        rows_pg.append(
            {"namespace": pp.namespace, "podgroup": pp.name, "job": "", "queue": pp.queue,
             "priority_class": pp.priority_class, "min_member": 1, "min_gpus": pp.gpus,
             "phase": "Running", "unschedulable": False, "reason": "",
             "valid_from": sim.ts(pp.start_step), "valid_to": vt,
             "updated_at": vt or sim.ts(pp.start_step)}
        )  # fmt: skip
        rows_pod.append(
            {"namespace": pp.namespace, "pod": pp.name, "uid": pp.uid,
             "node": sim.fabric.nodes[pp.node].name, "job": "",
             "phase": "Running", "gpus": "",
             "gpu_requests": pp.gpus, "priority_class": pp.priority_class, "podgroup": pp.name,
             "gpu_model": "", "valid_from": sim.ts(pp.start_step), "valid_to": vt,
             "updated_at": vt or sim.ts(pp.start_step)}
        )  # fmt: skip
    for g in pl.gangs:
        vf, vt = sim.ts(g.start_step), until(g.end_step)
        rows_pg.append(
            {"namespace": g.namespace, "podgroup": g.podgroup, "job": "", "queue": g.queue,
             "priority_class": pool.job_priority_class, "min_member": g.members,
             "min_gpus": g.members * g.gpus_per_member, "phase": "Pending", "unschedulable": True,
             "reason": f"NotEnoughResources: {g.members}/{g.members} tasks in gang unschedulable: "
                       f"pod group is not ready, {g.members} minAvailable",
             "valid_from": vf, "valid_to": vt, "updated_at": vt or vf}
        )  # fmt: skip
        for m in range(g.members):
            rows_pod.append(
                {"namespace": g.namespace, "pod": f"{g.podgroup}-{m}", "uid": f"{g.podgroup}-{m}",
                 "node": "", "job": "", "phase": "Pending", "gpus": "",
                 "gpu_requests": g.gpus_per_member, "priority_class": pool.job_priority_class,
                 "podgroup": g.podgroup, "gpu_model": g.model, "valid_from": vf, "valid_to": vt,
                 "updated_at": vt or vf}
            )  # fmt: skip
    rows_q = [
        {"queue": q.name, "parent": "", "state": "Open", "weight": 1, "reclaimable": True,
         "capability_gpus": q.capability, "deserved_gpus": q.deserved,
         "guarantee_gpus": q.guarantee, "valid_from": t0, "valid_to": None, "updated_at": t0}
        for q in pool.queues
    ]  # fmt: skip
    rows_pc = [
        {"priority_class": c.name, "value": c.value, "preemption_policy": "PreemptLowerPriority",
         "global_default": False, "provisioning": c.provisioning, "purpose": c.purpose,
         "valid_from": t0, "valid_to": None, "updated_at": t0}
        for c in pool.priority_classes
    ]  # fmt: skip
    rows_ev = [
        {"ts": sim.ts(victim.end_step), "namespace": victim.namespace, "pod": victim.name,
         "uid": f"ev-{victim.uid}", "reason": "Preempted",
         "message": f"Preempted by pod {by.uid} on node {sim.fabric.nodes[victim.node].name}",
         "preemptor": by.uid, "node": sim.fabric.nodes[victim.node].name,
         "source": "default-scheduler", "count": 1}
        for victim, by in pl.preemptions
    ]  # fmt: skip
    return [
        Batch.from_rows(kind, rows)
        for kind, rows in (
            (QUEUE, rows_q),
            (PRIORITY_CLASS, rows_pc),
            (PODGROUP, rows_pg),
            (POD_EVENT, rows_ev),
        )
        if rows
    ]


def pool_gpus(sim: SimView, t: int, table: pa.Table) -> pa.Table:
    """The GPU samples of step `t` with the pool's pods on their GPUs (pod, namespace,
    utilization) and each node's GPU model."""
    pl = plan(sim)
    if pl is None:
        return table
    gpn = sim.fabric.gpus_per_node
    pods = table.column("pod").to_pylist()
    nss = table.column("namespace").to_pylist()
    util = table.column("utilization_ratio").to_numpy(zero_copy_only=False).copy()
    for pp in pl.pods:
        if pp.start_step <= t < pp.end_step:
            for g in range(pp.gpus):
                k = pp.node * gpn + g
                pods[k], nss[k] = pp.name, pp.namespace
                util[k] = pp.util
    valid = table.column("up").to_numpy(zero_copy_only=False).astype(bool)
    cols = {
        "pod": pa.array(pods, table.schema.field("pod").type),
        "namespace": pa.array(nss, table.schema.field("namespace").type),
        "utilization_ratio": pa.array(np.where(valid, util, np.nan), mask=~valid),
        "model": pa.array(
            [pl.models[i // gpn] for i in range(table.num_rows)], table.schema.field("model").type
        ),
    }
    for name, col in cols.items():
        i = table.schema.get_field_index(name)
        table = table.set_column(i, table.schema.field(i), col.cast(table.schema.field(i).type))
    return table


__all__ = ["POOL_FAULTS", "plan", "pool_gpus", "pool_rows", "resolve"]
