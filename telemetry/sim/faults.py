"""Fault injection plan and ground truth: what the simulator broke, where, and when.

Reads the scenario's `faults:` list and the built fabric/workload, picks concrete targets (by name
or by seed) and produces `Fault` records, written as `ground_truth.json` next to the data. It
never reads the store: the ground truth is what was injected, not what anything detected.
"""

from __future__ import annotations

import numpy as np

from telemetry import xid as xid_catalog
from telemetry.errors import ConfigError
from telemetry.sim.fabric import Fabric, rdma_device, su_name
from telemetry.sim.logs import LOG_FAULT_KINDS
from telemetry.sim.logs import resolve as log_resolve
from telemetry.sim.model import Fault, GroundTruth
from telemetry.sim.pool import POOL_FAULTS
from telemetry.sim.pool import resolve as pool_resolve
from telemetry.sim.scenario import FaultSpec, JobSpec, Scenario
from telemetry.sim.workload import Job, Workload, minute_to_step

# ground-truth kinds the scenario does not inject: the simulator derives them from the physics of
# the faults it did inject (origin='consequence', detail.cause names that fault's id)
CONSEQUENCE_FAULT_KINDS = ("collective_slowdown", "collective_straggler", "nccl_network_error")
# ground-truth kinds a scenario sets through its jobs' NCCL settings (JobSpec.nccl_env, qps), never
# in `faults:`: recorded from those settings and the fabric (origin='workload', telemetry/sim/nccl.py)
SETTING_FAULT_KINDS = ("collective_algorithm_underperforms", "low_flow_entropy")


# placement faults must be known before scheduling: they make the scheduler misplace a job
PLACEMENT_KINDS = ("placement_violation", "job_spans_su")


def placement_targets(sc: Scenario, specs: list[JobSpec]) -> dict[int, str]:
    """fault index -> job name the scheduler will spread over two SUs."""
    out: dict[int, str] = {}
    taken: set[str] = set()
    for i, f in enumerate(sc.faults):
        if f.kind not in PLACEMENT_KINDS:
            continue
        if f.target:
            if f.target not in {s.name for s in specs}:
                raise ConfigError(
                    f"scenario {sc.name}: faults.{i}.target: no job named {f.target!r}"
                )
            out[i] = f.target
            taken.add(f.target)
            continue
        want_hard = f.kind == "placement_violation"
        cands = [
            s
            for s in specs
            if s.name not in taken
            and s.nodes >= 2
            and s.nodes <= sc.fabric.servers_per_su
            and (
                (s.mode == "hard" and (s.highest_tier or 3) <= 1) if want_hard else s.mode != "hard"
            )
        ]
        if not cands:
            raise ConfigError(
                f"scenario {sc.name}: faults.{i}: no job fits a {f.kind} fault "
                f"({'a hard job with highest_tier 1' if want_hard else 'a soft job'} of 2..{sc.fabric.servers_per_su} nodes)"
            )
        out[i] = cands[0].name
        taken.add(cands[0].name)
    return out


def resolve_faults(
    sc: Scenario,
    fab: Fabric,
    wl: Workload,
    placement: dict[int, str],
    start_ms: int,
    rng: np.random.Generator,
) -> list[Fault]:
    steps = sc.steps
    res = sc.resolution_seconds
    out: list[Fault] = []
    jobs = {j.name: j for j in wl.jobs}
    for i, spec in enumerate(sc.faults):
        s0 = minute_to_step(spec.start_minute, res, steps)
        s1 = (
            steps
            if spec.duration_minutes is None
            else minute_to_step(spec.start_minute + spec.duration_minutes, res, steps)
        )
        s1 = max(s1, s0 + 1)
        f = Fault(
            f"{spec.kind}-{i}",
            spec.kind,
            start_ms + s0 * res * 1000,
            start_ms + s1 * res * 1000,
            "",
            "",
            [],
            start_step=s0,
            end_step=s1,
        )
        where = f"scenario {sc.name}: faults.{i}"
        if spec.kind in PLACEMENT_KINDS:
            job = jobs[placement[i]]
            if job.pending:
                raise ConfigError(
                    f"{where}: job {job.name} could not be placed (not enough free nodes)"
                )
            f.start_step, f.end_step = job.start_step, job.end_step
            f.start_ms, f.end_ms = (
                start_ms + job.start_step * res * 1000,
                start_ms + job.end_step * res * 1000,
            )
            _job_subject(f, job)
            f.detail = {
                "nodes": [fab.nodes[n].name for n in job.nodes],
                "tier": job.tier(fab),
                "highest_tier_allowed": job.spec.highest_tier,
                "mode": job.spec.mode,
            }
            if spec.kind == "placement_violation":
                f.implied_kinds = ["job_spans_su"]
        else:
            _RESOLVERS[spec.kind](f, spec, fab, wl, rng, where)
        f.detail["severity"] = spec.severity
        f.target["severity"] = spec.severity
        out.append(f)
    # conditions the workload created by itself (a soft job larger than an SU): also true facts
    injected = {f.subject for f in out if f.kind in PLACEMENT_KINDS}
    for j in wl.jobs:
        if not j.pending and j.key not in injected and j.tier(fab) >= 2:
            f = Fault(
                f"job_spans_su-w{j.idx}",
                "job_spans_su",
                start_ms + j.start_step * res * 1000,
                start_ms + j.end_step * res * 1000,
                "",
                "",
                [],
                origin="workload",
                start_step=j.start_step,
                end_step=j.end_step,
            )
            _job_subject(f, j)
            f.detail = {"nodes": len(j.nodes), "sus": len(j.sus(fab)), "mode": j.spec.mode}
            out.append(f)
    return out


def _job_subject(f: Fault, job: Job) -> None:
    f.subject_type, f.subject = "job", job.key
    f.subjects = [job.key, job.name]
    f.target = {"job": job.idx}


def _running_at(wl: Workload, step: int) -> list[Job]:
    return wl.running(step)


def _pick_node(
    spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str, step: int
) -> int:
    if spec.target:
        name = spec.target.split("/")[0]
        for n in fab.nodes:
            if n.name == name:
                return n.idx
        raise ConfigError(f"{where}.target: no node named {name!r}")
    busy = sorted({n for j in _running_at(wl, step) for n in j.nodes})
    pool = busy or list(range(len(fab.nodes)))
    return int(pool[int(rng.integers(len(pool)))])


def _nic_subject(f: Fault, fab: Fabric, node: int, rail: int) -> None:
    name = fab.nodes[node].name
    nic = fab.nic_ep(node, rail)
    port = fab.nic_leaf_port[nic]
    f.subject_type, f.subject = "nic", f"{name}/{rdma_device(rail)}"
    f.subjects = [f.subject, name, fab.ep_name(port), fab.link_name(port), fab.link_name(nic)]
    f.target = {"node": node, "rail": rail, "nic_ep": nic, "leaf_port": port}


def _rail_of(spec: FaultSpec, fab: Fabric, rng: np.random.Generator, where: str) -> int:
    if spec.target and "/" in spec.target:
        dev = spec.target.split("/", 1)[1]
        for r in range(fab.nics_per_node):
            if dev in (rdma_device(r), f"eth{r + 2}"):
                return r
        raise ConfigError(f"{where}.target: no NIC {dev!r} on this server model")
    return int(rng.integers(fab.nics_per_node))


def _r_pfc(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    node = _pick_node(spec, fab, wl, rng, where, f.start_step)
    _nic_subject(f, fab, node, _rail_of(spec, fab, rng, where))
    f.detail = {"stormed_port": fab.ep_name(f.target["leaf_port"])}


def _r_stall(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    node = _pick_node(spec, fab, wl, rng, where, f.start_step)
    _nic_subject(f, fab, node, _rail_of(spec, fab, rng, where))


def _gpu(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    node = _pick_node(spec, fab, wl, rng, where, f.start_step)
    gpu = int(rng.integers(fab.gpus_per_node))
    if spec.target and "/" in spec.target:
        g = spec.target.split("/", 1)[1].removeprefix("gpu")
        if not g.isdigit() or int(g) >= fab.gpus_per_node:
            raise ConfigError(
                f"{where}.target: {spec.target!r}: give NODE/gpuN with N < {fab.gpus_per_node}"
            )
        gpu = int(g)
    name = fab.nodes[node].name
    f.subject_type, f.subject = "gpu", f"{name}/gpu{gpu}"
    f.subjects = [f.subject, name, gpu_uuid(node, gpu)]
    f.target = {"node": node, "gpu": gpu}
    # the action the ground truth expects railscope to recommend: NVIDIA's Xid catalog's
    if f.kind == "gpu_xid":
        code = spec.xid or 48
        f.detail = {"xid": code, "action": xid_catalog.lookup(code).action}
    elif f.kind == "gpu_lost":
        f.detail = {"xid": 79, "action": xid_catalog.lookup(79).action}
        f.implied_kinds = ["gpu_xid"]  # falling off the bus is logged as XID 79
        # its job's other ranks then time out waiting for it (telemetry/sim/logs.py)
        f.implied_kinds.append("collective_timeout")
    else:
        f.detail = {"reason": "thermal"}


def gpu_uuid(node: int, gpu: int) -> str:
    return f"GPU-{node:08x}-{gpu:04x}-4000-8000-{(node * 8 + gpu):012x}"


def _r_ecmp(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    leaf, _, pinned = (spec.target or "").partition(":")  # a leaf, or one uplink LEAF:EthernetN
    if not leaf:
        spanning = [j for j in _running_at(wl, f.start_step) if j.tier(fab) >= 2]
        if not spanning:
            raise ConfigError(
                f"{where}: ecmp_collision needs a job spanning SUs running at its start (or a target leaf)"
            )
        j = spanning[0]
        leaf = fab.leaf_for(j.nodes[0], int(rng.integers(fab.nics_per_node)))
    if leaf not in fab.leaf_up:
        raise ConfigError(f"{where}.target: no leaf switch named {leaf!r}")
    ups = fab.leaf_up[leaf]
    if pinned:
        names = [fab.ep_port[p] for p in ups]
        if pinned not in names:
            raise ConfigError(f"{where}.target: {pinned!r} is not an uplink of {leaf}")
        u = names.index(pinned)
    else:
        u = int(rng.integers(len(ups)))
    port = ups[u]
    f.subject_type, f.subject = "port", fab.ep_name(port)
    f.subjects = [f.subject, leaf, fab.link_name(port), fab.link_name(fab.ep_peer[port])]
    f.target = {"leaf": leaf, "uplink": u, "port": port}
    f.detail = {"group": [fab.ep_name(p) for p in ups]}


def _r_flap(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    if spec.target:
        dev, _, p = spec.target.partition(":")
        eps = [
            e
            for e in range(fab.n_nics, fab.n_eps)
            if fab.ep_device[e] == dev and fab.ep_port[e] == p
        ]
        if not eps:
            raise ConfigError(
                f"{where}.target: no switch port {spec.target!r} (give SWITCH:EthernetN)"
            )
        port = eps[0]
    else:
        spanning = [j for j in _running_at(wl, f.start_step) if j.tier(fab) >= 2]
        if spanning:
            leaf = fab.leaf_for(spanning[-1].nodes[-1], int(rng.integers(fab.nics_per_node)))
        else:
            leaf = sorted(fab.leaf_up)[int(rng.integers(len(fab.leaf_up)))]
        ups = fab.leaf_up[leaf]
        port = ups[int(rng.integers(len(ups)))]
    peer = fab.ep_peer[port]
    f.subject_type, f.subject = "link", fab.link_name(port)
    f.subjects = [f.subject, fab.link_name(peer), fab.ep_name(port), fab.ep_name(peer)]
    f.target = {"eps": [port, peer]}


def _r_cross_tenant(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    running = [j for j in _running_at(wl, f.start_step) if j.pods]
    # two jobs that run for the whole fault where there are: a pod gone mid-fault leaves its
    # IP to whoever is given it next, and the flow is then about somebody else
    whole = [j for j in running if j.end_step >= f.end_step]
    by_tenant: dict[str, Job] = {}
    for pool in (whole, running):
        by_tenant = {}
        for j in pool:
            by_tenant.setdefault(j.namespace, j)
        if len(by_tenant) >= 2:
            break
    if len(by_tenant) < 2:
        raise ConfigError(
            f"{where}: cross_tenant_flow needs pods of two tenants running at its start"
        )
    a, b = list(by_tenant.values())[:2]
    end = min(f.end_step, a.end_step, b.end_step)  # ... else it ends with the first of them
    if end < f.end_step:
        f.end_ms -= (f.end_step - end) * fab.scenario.resolution_seconds * 1000
        f.end_step = end
    pa, pb = a.pods[0], b.pods[-1]
    src, dst = f"{pa.namespace}/{pa.name}", f"{pb.namespace}/{pb.name}"
    f.subject_type, f.subject = "flow", f"{src}->{dst}"
    f.subjects = [f.subject, f"{pa.rdma_ips[0]}->{pb.rdma_ips[0]}", src, dst]
    f.target = {
        "src_node": pa.node,
        "dst_node": pb.node,
        "src_ip": pa.rdma_ips[0],
        "dst_ip": pb.rdma_ips[0],
    }
    f.detail = {
        "src_ip": pa.rdma_ips[0],
        "dst_ip": pb.rdma_ips[0],
        "src_tenant": pa.namespace,
        "dst_tenant": pb.namespace,
    }


def _idc_pair(fab: Fabric, spec: FaultSpec, where: str) -> tuple[int, int]:
    idcs = fab.scenario.fabric.idcs
    if len(idcs) < 2:
        raise ConfigError(f"{where}: needs at least two IDCs")
    gpu = next(i for i, d in enumerate(idcs) if d.sus)
    other = next((i for i, d in enumerate(idcs) if i != gpu and d.datanodes), None)
    if other is None or not idcs[gpu].datanodes:
        raise ConfigError(f"{where}: needs DataNodes in two IDCs")
    return gpu, other


def _r_cross_read(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    a, b = _idc_pair(fab, spec, where)
    names = [d.name for d in fab.scenario.fabric.idcs]
    f.subject_type, f.subject = "idc_pair", f"{names[a]}->{names[b]}"
    f.subjects = [f.subject, f"{names[b]}->{names[a]}"]
    f.target = {"client_idc": a, "dn_idc": b}


def _r_misplaced(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    a, b = _idc_pair(fab, spec, where)
    f.subject_type, f.subject = "block", ""  # filled with the block ids by the HDFS model
    f.target = {"client_idc": a, "dn_idc": b}


def _r_dci(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    a, b = _idc_pair(fab, spec, where)
    names = [d.name for d in fab.scenario.fabric.idcs]
    key = (min(a, b), max(a, b))
    links = fab.dci[key]
    f.subject_type, f.subject = "link", f"{names[key[0]]}<->{names[key[1]]}"
    f.subjects = [f.subject, f"{names[key[1]]}<->{names[key[0]]}"]
    for ea, eb in links:
        f.subjects += [fab.link_name(ea), fab.link_name(eb), fab.ep_name(ea), fab.ep_name(eb)]
    f.target = {"pair": list(key)}


def _r_drift(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    sus = sorted({(n.idc_idx, n.su) for n in fab.nodes})
    if len(sus) < 2:
        raise ConfigError(f"{where}: hypernode_drift needs two SUs")
    home, other = sus[0], sus[1]
    node = next(n for n in fab.nodes if (n.idc_idx, n.su) == other)
    hn = "hn-" + su_name(fab.scenario.fabric.idcs[home[0]].name, home[1])
    f.subject_type, f.subject = "hypernode", hn
    f.subjects = [hn, node.name]
    f.target = {"hypernode": hn, "node": node.idx}
    f.detail = {"declared_member": node.name, "wired_su": node.su_name}


def _r_gap(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    """A source that stops sending (its exporter or collector down): the device itself is fine,
    what reaches the store from it is nothing (timing.Disturber drops it)."""
    switches = {s for s, _, _ in fab.switches}
    if spec.target and spec.target in switches:
        f.subject_type, f.subject, cls = "switch", spec.target, "switch"
    else:
        node = _pick_node(spec, fab, wl, rng, where, f.start_step)
        f.subject_type, f.subject, cls = "node", fab.nodes[node].name, "node"
    f.subjects = [f.subject]
    f.target = {"class": cls, "device": f.subject}
    f.detail = {"source": "node exporter" if cls == "node" else "switch collector"}


_RESOLVERS = {
    "ecmp_collision": _r_ecmp,
    "pfc_storm": _r_pfc,
    "link_flap": _r_flap,
    "nic_pcie_stall": _r_stall,
    "gpu_throttle": _gpu,
    "gpu_xid": _gpu,
    "gpu_lost": _gpu,
    "cross_tenant_flow": _r_cross_tenant,
    "hdfs_cross_idc_read": _r_cross_read,
    "hdfs_replica_misplaced": _r_misplaced,
    "dci_saturation": _r_dci,
    "hypernode_drift": _r_drift,
    "collection_gap": _r_gap,
    **dict.fromkeys(POOL_FAULTS, pool_resolve),
    **dict.fromkeys(LOG_FAULT_KINDS, log_resolve),
}

__all__ = [
    "CONSEQUENCE_FAULT_KINDS",
    "SETTING_FAULT_KINDS",
    "Fault",
    "GroundTruth",
    "placement_targets",
    "resolve_faults",
]
