"""The simulated jobs' NCCL behaviour and its ground truth: the algorithm and protocol their
collectives run with (NCCL's pick for the shape, or what NCCL_ALGO / NCCL_PROTO force) and the
bus bandwidth that reaches (nccl_algorithms.yaml), whether their rings cross rails
(NCCL_CROSS_NIC=1), the settings their pods carry, and which jobs therefore run an algorithm that
underperforms (`collective_algorithm_underperforms`) or send fewer flows per rank pair than the
ECMP groups on their paths are wide (`low_flow_entropy`).

The truth is the settings and the physics, never a detector: the thresholds it uses are the
detectors' defaults (thresholds.yaml), read from there. Writes no records.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from telemetry.nccl import canonical, setting_names
from telemetry.sim.model import Fault, SimView

if TYPE_CHECKING:
    from telemetry.sim.scenario import JobSpec
    from telemetry.sim.workload import Job

ALGORITHMS_FILE = Path(__file__).parent / "nccl_algorithms.yaml"


@functools.cache
def _table() -> dict[str, Any]:
    return dict(yaml.safe_load(ALGORITHMS_FILE.read_text()))


@dataclass(frozen=True)
class Choice:
    """How one job's collectives run: algorithm, protocol, bus bandwidth relative to NCCL's own
    pick for the shape (1.0 = the pick), and the settings that forced it (name -> value)."""

    algorithm: str
    protocol: str
    efficiency: float
    pick: tuple[str, str]
    forced_by: dict[str, str]


def choice(spec: JobSpec, nvls: bool, nodes: int) -> Choice:
    """What NCCL runs the job's AllReduce with: the best of what its NCCL_ALGO / NCCL_PROTO
    allow (NCCL's pick when they allow it or are not set)."""
    t = _table()["nvls" if nvls else "no_nvls"]
    pick_a, pick_p = (canonical(x) for x in t["pick"]["multi_node" if nodes > 1 else "single_node"])
    forced: dict[str, str] = {}
    picked = []
    for var, default, eff in (
        ("NCCL_ALGO", pick_a, t["algorithm"]),
        ("NCCL_PROTO", pick_p, t["protocol"]),
    ):
        allowed = [n for n, e in eff.items() if e > 0]
        value = spec.nccl_env.get(var)
        if value:
            names, exclude = setting_names(value)
            allowed = [n for n in allowed if ((n not in names) if exclude else (n in names))]
        if not allowed or default in allowed:
            picked.append(default)
            continue
        best = max(allowed, key=lambda n: eff[n])
        picked.append(best)
        forced[var] = str(value)
    a, p = picked
    rel = (t["algorithm"][a] * t["protocol"][p]) / (t["algorithm"][pick_a] * t["protocol"][pick_p])
    return Choice(a, p, round(rel, 6), (pick_a, pick_p), forced)


def env(spec: JobSpec) -> dict[str, str]:
    """The NCCL settings of the job's pods: its nccl_env and its QPs per connection."""
    return {**spec.nccl_env, "NCCL_IB_QPS_PER_CONNECTION": str(spec.qps)}


def cross_nic(spec: JobSpec) -> bool:
    """NCCL_CROSS_NIC=1: rings may connect different NICs of two servers (across rails)."""
    return spec.nccl_env.get("NCCL_CROSS_NIC", "").strip() == "1"


def comm_id(job_key: str) -> str:
    """The communicator id of a job: NCCL's is a 64-bit hash, printed in hex."""
    import zlib

    return f"0x{zlib.crc32(job_key.encode()):08x}{zlib.crc32(job_key[::-1].encode()):08x}"


def job_choice(sim: SimView, job: Job) -> Choice:
    return choice(job.spec, bool(sim.fabric.model.get("nvls", False)), len(job.pods))


# --- ground truth --------------------------------------------------------------------------------
def truth(sim: SimView) -> list[Fault]:
    """collective_algorithm_underperforms and low_flow_entropy, origin 'workload': conditions
    the jobs' settings create by themselves, for as long as the job runs."""
    from telemetry.correlate.entropy import collision_probability
    from telemetry.correlate.thresholds import default_thresholds

    th = default_thresholds()
    gap = float(th["collective"]["algorithm_gap_ratio"])
    ratio = float(th["ecmp"]["max_over_mean"])
    fab = sim.fabric
    out: list[Fault] = []
    for j in sim.workload.jobs:
        if j.pending or len(j.pods) < 1 or j.start_step >= j.end_step:
            continue
        c = job_choice(sim, j)
        if c.forced_by and c.efficiency <= 1 - gap:
            subj = f"{j.key}/{comm_id(j.key)}"
            f = _fault(sim, j, "collective_algorithm_underperforms", "communicator", subj)
            f.subjects = [subj, j.key]
            f.detail = {
                "algorithm": c.algorithm,
                "protocol": c.protocol,
                "pick": list(c.pick),
                "efficiency": c.efficiency,
                "forced_by": c.forced_by,
            }
            out.append(f)
        crossing = crossing_connections(sim, j)
        if crossing:
            width = min(len(fab.leaf_up[leaf]) for leaf in crossing)
            if j.spec.qps < width:
                worst = max(crossing.values())
                f = _fault(sim, j, "low_flow_entropy", "job", j.key)
                f.subjects = [j.key, j.name]
                f.detail = {
                    "qps_per_connection": j.spec.qps,
                    "ecmp_width": width,
                    "connections_per_group": worst,
                    "collision_probability": collision_probability(
                        worst * j.spec.qps, width, ratio
                    ),
                    "leaves": sorted(crossing),
                }
                out.append(f)
    return out


def connections(job: Job, nics: int) -> list[tuple[int, int, int, int, float]]:
    """(source pod, destination pod, source rail, destination rail, weight) of every connection
    of the job's collectives: ring or tree between consecutive ranks, per rail; with
    NCCL_CROSS_NIC=1 a ring connects rail r of one server to rail r-1 of the next."""
    n = len(job.pods)
    if n < 2:
        return []
    pairs: list[tuple[int, int, float]]
    if job.spec.pattern == "ring":
        pairs = [(i, (i + 1) % n, 1.0) for i in range(n)]
    else:
        pairs = []
        for i in range(1, n):
            pairs += [(i, (i - 1) // 2, 0.5), ((i - 1) // 2, i, 0.5)]
    shift = nics - 1 if cross_nic(job.spec) else 0
    return [(a, b, r, (r + shift) % nics, w) for a, b, w in pairs for r in range(nics)]


def crossing_connections(sim: SimView, job: Job) -> dict[str, int]:
    """Source leaf -> how many of the job's connections leave it through its ECMP uplinks (the
    two ends on different leaves)."""
    fab = sim.fabric
    out: dict[str, int] = {}
    for a, b, ra, rb, _ in connections(job, fab.nics_per_node):
        na, nb = fab.nodes[job.pods[a].node], fab.nodes[job.pods[b].node]
        la = fab.leaf_of[(na.idc_idx, na.su, ra)]
        if la != fab.leaf_of[(nb.idc_idx, nb.su, rb)]:
            out[la] = out.get(la, 0) + 1
    return out


def _fault(sim: SimView, j: Job, kind: str, subject_type: str, subject: str) -> Fault:
    return Fault(
        f"{kind}-w{j.idx}",
        kind,
        sim.ts(j.start_step),
        sim.ts(j.end_step),
        subject_type,
        subject,
        [],
        origin="workload",
        start_step=j.start_step,
        end_step=j.end_step,
    )


__all__ = ["Choice", "choice", "comm_id", "connections", "cross_nic", "env", "job_choice", "truth"]
